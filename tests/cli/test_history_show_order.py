"""`panel history show` as a person reads a run: replies in member order (not the order they
happened to finish), a crashed run's calls that were still out said to have had no reply (not
`waiting` for ever), and a mistyped model on the command line met with the names it is close to."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from panel_cli.events import CallFinished, CallStarted, RunFinished, StageStarted
from panel_cli.models.catalog import unknown_model_sentence
from tests.helpers import cli_ok, cli_refused
from tests.store.sample_runs import QUESTION, record, run_started


def reply(run_id: str, member: str, model: str, stage: str, round: int, text: str) -> CallFinished:
    return CallFinished(
        call_id=f"{run_id}-{member}-{round}",
        member=member,
        model=model,
        stage=stage,
        round=round,
        messages=[{"role": "user", "content": QUESTION}],
        text=text,
        tokens_in=10,
        tokens_out=5,
        cost=0.001,
        latency=1.0,
    )


def test_replies_are_listed_in_member_order_stage_by_stage(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    events = [
        run_started(),  # members gpt, then claude
        StageStarted(stage="answer", round=0, members=["gpt", "claude"]),
        reply("r", "claude", "anthropic/claude", "answer", 0, "claude answers first."),
        reply("r", "gpt", "openai/gpt-4o", "answer", 0, "gpt answers second."),
        StageStarted(stage="vote", round=1, members=["gpt", "claude"]),
        reply("r", "claude", "anthropic/claude", "vote", 1, "claude votes first."),
        reply("r", "gpt", "openai/gpt-4o", "vote", 1, "gpt votes second."),
        RunFinished(final_answer="PostgreSQL.", result={}),
    ]
    asyncio.run(record(db, "r", events))
    shown = cli_ok("history", "show", "r", "--db", str(db))
    replies = shown.split("Replies", 1)[1].split("Calls", 1)[0]
    order = [text for text in ("gpt answers", "claude answers", "gpt votes", "claude votes") if text in replies]
    assert sorted(order, key=replies.index) == ["gpt answers", "claude answers", "gpt votes", "claude votes"]


def test_a_crashed_runs_calls_still_out_had_no_reply(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    events = [
        run_started(),
        StageStarted(stage="answer", round=0, members=["gpt", "claude"]),
        CallStarted(call_id="c-1", member="gpt", model="openai/gpt-4o", stage="answer", round=0),
        CallStarted(call_id="c-2", member="claude", model="anthropic/claude", stage="answer", round=0),
        reply("c", "gpt", "openai/gpt-4o", "answer", 0, "PostgreSQL."),
    ]
    asyncio.run(record(db, "crashed", events))
    asyncio.run(record(db, "going", events))
    with sqlite3.connect(db) as connection:  # its process is gone: no process has pid -1
        connection.execute("UPDATE runs SET pid = -1 WHERE id = 'crashed'")
    connection.close()
    crashed = cli_ok("history", "show", "crashed", "--db", str(db))
    assert "Status    stale" in crashed
    (row,) = [line for line in crashed.splitlines() if line.startswith(" claude ")]
    assert " no reply " in row and "waiting" not in crashed
    going = cli_ok("history", "show", "going", "--db", str(db))
    (row,) = [line for line in going.splitlines() if line.startswith(" claude ")]
    assert " waiting " in row, "a run still going may yet get its reply"


def test_a_mistyped_model_on_the_command_line_gets_the_close_names() -> None:
    said = cli_refused("council", "--members", "gpt4o,claude", "-q", "Which database?")
    assert said.startswith("member 'gpt4o': 'gpt4o' is not a model litellm knows; did you mean gpt-4o")
    assert cli_refused("council", "--members", "gpt-4o,claud", "-q", "Which database?").startswith(
        "member 'claud': 'claud' is not a model litellm knows; did you mean claude"
    )


def test_a_name_like_no_known_one_gets_no_guess() -> None:
    said = unknown_model_sentence("zzqqxx-nothing-like-it")
    assert "did you mean" not in said and "if it is an OpenAI model write openai/zzqqxx-nothing-like-it" in said
