"""`panel history` on a narrow terminal and in a pipe: a header is never cut (whole columns give
way instead), a demo run's cost takes one short cell, a decision keeps its topic, and `show`
piped to a pager draws its round tables as wide as their cells need, not at Rich's 80 columns.
Each through the CLI, in-process."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from panel_cli.events import CallFinished, DecisionRecorded, MemberInfo, RunFinished, RunStarted, StageStarted
from tests.cli.test_history_corners import LONG_REPLY, long_run
from tests.helpers import cli_ok
from tests.store.sample_runs import confer_run, record, run_started

RUN_HEADERS = {"id", "started", "protocol", "panel", "question", "status", "outcome", "calls", "cost"}
DECISION_HEADERS = {"id", "decided", "method", "winner", "votes", "leader", "topic"}
TOPIC = "Should the billing service move its queue from RabbitMQ to Kafka before the audit in March?"


def history(*args: str, columns: int | None) -> str:
    return cli_ok("history", *args, columns=columns)


def demo_run(run_id: str) -> list:
    """A run of demo personas: it cost nothing, and is `simulated`."""
    started = RunStarted(
        protocol="ensemble",
        panel="ensemble-demo",
        question="Which queue should the billing service use?",
        members=[MemberInfo(name="sage", model="demo/sage")],
        config={},
    )
    call = CallFinished(
        call_id=f"{run_id}-1",
        member="sage",
        model="demo/sage",
        stage="fanout",
        text="[simulated] RabbitMQ.",
        tokens_in=10,
        tokens_out=5,
        cost=0.0,
        latency=0.01,
    )
    return [
        started,
        StageStarted(stage="fanout", members=["sage"]),
        call,
        RunFinished(final_answer="[simulated] RabbitMQ."),
    ]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "runs.db"
    asyncio.run(record(path, "89c0ffee-priced", confer_run("89c0ffee-priced")))
    asyncio.run(record(path, "89c0ffee-demo", demo_run("89c0ffee-demo")))
    asyncio.run(record(path, "89c0ffee-long", long_run("89c0ffee-long")))
    return path


@pytest.mark.parametrize("columns", [40, 60, 80])
def test_a_narrow_list_gives_up_columns_rather_than_cut_a_header(db: Path, columns: int) -> None:
    lines = history("list", "--db", str(db), columns=columns).splitlines()
    headers = lines[0].split()
    assert set(headers) <= RUN_HEADERS and "…" not in lines[0], "every header shown is whole"
    assert {"id", "question", "status"} <= set(headers), "what a run is known by always stays"
    assert all(len(line) <= columns for line in lines)
    ids = {"89c0ffee-priced", "89c0ffee-demo", "89c0ffee-long"}
    shown = [line.split()[0] for line in lines[1:]]
    assert sorted(next(run for run in ids if run.startswith(short)) for short in shown) == sorted(ids), "ids whole"


def test_a_list_wide_enough_keeps_every_column(db: Path) -> None:
    assert set(history("list", "--db", str(db), columns=200).splitlines()[0].split()) == RUN_HEADERS


def test_a_demo_runs_cost_is_one_short_cell_in_the_list(db: Path) -> None:
    listed = history("list", "--db", str(db), columns=100)
    demo = next(line for line in listed.splitlines() if line.startswith("89c0ffee-d"))
    assert demo.split()[-1] == "free"
    assert "simulated, free" not in listed and "$0.0000" not in listed
    assert "Totals    1 call · 15 tokens · simulated, free" in history(
        "show", "89c0ffee-demo", "--db", str(db), columns=100
    )


@pytest.fixture
def decided(tmp_path: Path) -> Path:
    path = tmp_path / "runs.db"
    decision = DecisionRecorded(
        topic=TOPIC,
        winner="Postpone the move a week",
        vote_counts={"Move to Kafka now": 2, "Postpone the move a week": 3},
        method="plurality",
        total_votes=5,
        ballots_cast=5,
        leader="sage",
        leader_override=True,
    )
    asyncio.run(record(path, "89c1aaaa-1", [run_started(TOPIC), decision, RunFinished(final_answer="Postpone")]))
    return path


@pytest.mark.parametrize("columns", [60, 100])
def test_decisions_keep_the_topic_at_any_width(decided: Path, columns: int) -> None:
    lines = history("decisions", "--db", str(decided), columns=columns).splitlines()
    assert set(lines[0].split()) <= DECISION_HEADERS and "…" not in lines[0]
    assert "topic" in lines[0].split() and "Should the billing" in lines[1]
    assert lines[1].startswith("89c1aaaa ") and all(len(line) <= columns for line in lines)


def test_piped_decisions_show_every_column_whole(decided: Path) -> None:
    lines = history("decisions", "--db", str(decided), columns=None).splitlines()
    assert set(lines[0].split()) == DECISION_HEADERS
    assert TOPIC in lines[1] and "Move to Kafka now 2, Postpone the move a week 3" in lines[1]


def test_show_in_a_pipe_draws_round_tables_as_wide_as_their_cells(db: Path) -> None:
    shown = history("show", "89c0ffee-long", "--db", str(db), columns=None)
    (row,) = [line for line in shown.splitlines() if line.startswith(" gpt ")]
    flat = " ".join(LONG_REPLY.split())
    assert flat[:300] in row, "the answer's cell is not cut to 80 columns"
    assert len(row) < 2 * len(flat), "nor padded out to a width nobody asked for"
    assert max(len(line) for line in shown.splitlines()) < 2 * len(flat)


def test_show_fits_the_width_columns_gives(db: Path) -> None:
    shown = history("show", "89c0ffee-long", "--db", str(db), columns=100)
    assert max(len(line) for line in shown.splitlines()) <= 100
    assert any(line.startswith(" gpt ") and line.rstrip().endswith("…") for line in shown.splitlines())


def test_a_piped_thread_and_answer_box_are_not_padded_to_no_end(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    asyncio.run(record(path, "89c2aaaa-first", confer_run("89c2aaaa-first")))
    follow = confer_run("89c2bbbb-second")
    follow[0] = follow[0].model_copy(update={"config": {**follow[0].config, "parent_id": "89c2aaaa-first"}})
    asyncio.run(record(path, "89c2bbbb-second", follow))
    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT parent_id FROM runs WHERE id = '89c2bbbb-second'").fetchone() == (
            "89c2aaaa-first",
        )
    connection.close()
    shown = history("show", "89c2bbbb-second", "--db", str(path), columns=None)
    assert "Thread" in shown and "╭─ answer" in shown
    assert max(len(line) for line in shown.splitlines()) < 200
