from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
import typer

from panel_cli.cli.history import history_app
from panel_cli.errors import UserError
from panel_cli.events import BaseEvent, CallFailed, MemberInfo, RunFailed, RunFinished
from panel_cli.store.subscriber import TranscriptStore
from panel_cli.view.fmt import cost as format_cost
from tests.helpers import ROOT, cli, cli_ok, run_python
from tests.store.sample_runs import (
    ANSWER,
    ENDINGS,
    QUESTION,
    answer_calls,
    confer_run,
    record,
    run_started,
    vote_round,
)

RAW = '{"error": {"message": "context_length_exceeded", "type": "invalid_request_error"}}'

app = typer.Typer()
app.add_typer(history_app, name="history")

# Wide enough that Rich never truncates an id or a column header.
DAY = 86400.0


def keep(path: Path, run_id: str, events: Sequence[BaseEvent]) -> None:
    """Store a run as a protocol would; from a test that is not a coroutine, since the history
    commands run their own event loop."""
    asyncio.run(record(path, run_id, list(events)))


def keep_at(path: Path, run_id: str, events: Sequence[BaseEvent], times: Sequence[float]) -> None:
    """Store a run whose events happened at `times` (epoch seconds), as if it had run then."""

    async def write() -> None:
        async with await TranscriptStore.open(path) as store:
            for seq, (event, ts) in enumerate(zip(events, times, strict=True), start=1):
                await store(event.model_copy(update={"run_id": run_id, "seq": seq, "ts": ts}))

    asyncio.run(write())


def days_ago(days: float, count: int) -> list[float]:
    """`count` event times a second apart, starting `days` ago."""
    start = time.time() - days * DAY
    return [start + index for index in range(count)]


@pytest.fixture
async def db(tmp_path: Path) -> Path:
    path = tmp_path / "runs.db"
    await record(path, "run-finished-1", confer_run("run-finished-1"))
    unpriced = answer_calls("run-unpriced-2", cost_gpt=None, cost_claude=None)
    await record(path, "run-unpriced-2", [run_started(), *unpriced, ENDINGS["no_answer"]])
    await record(path, "run-crashed-3", [run_started(), *answer_calls("run-crashed-3")])
    return path


def invoke(*args: str) -> str:
    return cli_ok("history", *args)


def test_list_shows_each_run(db: Path) -> None:
    output = invoke("list", "--db", str(db))
    lines = output.splitlines()
    assert lines[0].split() == ["id", "started", "protocol", "panel", "question", "status", "outcome", "calls", "cost"]
    crashed, unpriced, finished = lines[1:4]
    assert crashed.startswith("run-cras ") and " running " in crashed, "its process (this one) is alive"
    assert "no_answer" in unpriced and "—" in unpriced and "$0" not in unpriced
    assert "finished" in finished and "$0.0050" in finished and " gpt " in finished, "the winner is its outcome"
    assert "confer" in finished and "db-choice" in finished and "Which database" in finished


def test_list_limit_and_status(db: Path) -> None:
    assert "run-cras" in invoke("list", "--db", str(db), "--limit", "1")
    assert "run-fini" not in invoke("list", "--db", str(db), "--limit", "1")
    filtered = invoke("list", "--db", str(db), "--status", "finished")
    assert "run-fini" in filtered and "run-cras" not in filtered


def test_list_json(db: Path) -> None:
    runs = json.loads(invoke("list", "--db", str(db), "--json"))
    assert [run["run_id"] for run in runs] == ["run-crashed-3", "run-unpriced-2", "run-finished-1"]
    assert list(runs[0]) == [
        "run_id",
        "protocol",
        "question",
        "reached_answer",
        "duration_s",
        "calls",
        "tokens",
        "cost",
        "cost_basis",
        "unpriced_models",
        "calls_by_status",
        "parent_id",
        "panel",
        "status",
        "resumed_by",
        "outcome",
        "started_at",
        "finished_at",
        "damage",
    ]
    assert runs[0]["damage"] is None
    assert runs[1]["cost"] is None and runs[1]["status"] == "no_answer" and runs[1]["reached_answer"] is False
    assert runs[2]["cost"] == pytest.approx(0.005) and runs[2]["reached_answer"] is True
    assert (runs[2]["cost_basis"], runs[2]["unpriced_models"]) == ("partial", ["anthropic/claude"])
    counted = {"answered": 3, "reused": 0, "late": 0, "failed": 1, "cancelled": 0, "refused": 0}
    assert runs[2]["calls_by_status"] == counted, "from its call rows: three answered, one failed"
    assert runs[2]["outcome"] == "gpt" and runs[0]["outcome"] is None
    assert runs[2]["duration_s"] == pytest.approx(runs[2]["finished_at"] - runs[2]["started_at"])
    assert runs[0]["duration_s"] is None and runs[0]["finished_at"] is None  # still running


def test_list_since_a_span_or_a_date(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    for run_id, days in (("old", 40), ("week", 6.5), ("today", 0.01)):
        keep_at(path, run_id, confer_run(run_id), days_ago(days, len(confer_run(run_id))))

    def since(value: str) -> list[str]:
        return [run["run_id"] for run in json.loads(invoke("list", "--since", value, "--json", "--db", str(path)))]

    assert since("7d") == ["today", "week"]
    assert since("1w") == ["today", "week"]
    assert since("24h") == since("1440m") == ["today"]
    assert since("60d") == ["today", "week", "old"]
    assert since(time.strftime("%Y-%m-%d", time.localtime(time.time() - 30 * DAY))) == ["today", "week"]
    assert since(time.strftime("%Y-%m-%dT%H:%M", time.localtime(time.time() - DAY))) == ["today"]
    assert since("2100-01-01T00:00:00+00:00") == []


@pytest.mark.parametrize("value", ["yesterday", "7 days", "-3d", "2025-13-01", "", "1000000000w"])
def test_a_since_that_is_no_time_is_one_sentence(db: Path, value: str) -> None:
    with pytest.raises(UserError) as raised:
        cli("history", "list", "--since", value, "--db", str(db), catch_exceptions=False)
    assert (
        raised.value.message
        == f"--since takes a span such as 7d, 24h or 30m, or a date such as 2025-01-31, not '{value}'."
    )


def test_list_by_protocol_status_and_text_together(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    keep(path, "pg", confer_run("pg"))
    keep(
        path,
        "lite",
        [run_started("Is SQLite enough for [bold]us[/bold]?"), *answer_calls("lite"), ENDINGS["interrupted"]],
    )
    vote_started = run_started("Which queue?").model_copy(update={"protocol": "vote", "panel": "queues"})
    keep(path, "queue", [vote_started, RunFinished(final_answer="RabbitMQ", result={"winner": "RabbitMQ"})])

    def listed(*filters: str) -> list[str]:
        return [run["run_id"] for run in json.loads(invoke("list", *filters, "--json", "--db", str(path)))]

    assert listed("--protocol", "vote") == ["queue"]
    assert listed("--protocol", "confer") == ["lite", "pg"]
    assert listed("--protocol", "confer", "--status", "interrupted") == ["lite"]
    assert listed("--search", "append-only") == ["pg"], "words of the final answer"
    assert listed("--search", "SQLite") == ["lite"], "words of the question"
    assert listed("--search", "RabbitMQ", "--protocol", "confer") == []
    assert listed("--search", "[bold]us[/bold]") == ["lite"], "markup in the text searched for is only text"
    assert listed("--since", "1h", "--status", "finished", "--limit", "1") == ["queue"]


@pytest.mark.parametrize("value", ["", "?", " * ( ", '"'])
def test_a_search_with_no_word_is_one_sentence_not_every_run(db: Path, value: str) -> None:
    """Nothing to search for matched every run, listed as if each held the text."""
    with pytest.raises(UserError) as raised:
        cli("history", "list", "--search", value, "--db", str(db), catch_exceptions=False)
    assert raised.value.message == f"--search {value!r} holds no word to search for; give one or more words."


# A clipboard write, a window title, a screen clear and a right-to-left override.
OBEYED = ("\x1b]52;c;QUFB\x07", "\x1b]0;title\x07", "\x1b[2J", "\u202e")


def test_text_a_terminal_would_obey_is_not_shown_from_a_stored_row(db: Path) -> None:
    """A run imported from someone else's file (or written by hand) holds what it holds: the
    events are cleaned as they are read, and so are the run's own row and its calls."""
    with contextlib.closing(sqlite3.connect(db)) as con, con:
        evil = "||".join(f"'{part}'" for part in ("x", *OBEYED)).replace("\x1b", "' || char(27) || '")
        evil = evil.replace("\x07", "' || char(7) || '").replace("\u202e", "' || char(8238) || '")
        con.execute(
            f"UPDATE texts SET body = 'Q' || {evil} WHERE id = (SELECT question_text FROM runs WHERE id = 'run-finished-1')"
        )
        con.execute(f"UPDATE runs SET panel = 'p' || {evil}, error = 'e' || {evil} WHERE id = 'run-finished-1'")
        con.execute(f"UPDATE calls SET model = 'demo/sage' || {evil}, member = 'm' || {evil}, stage = 's' || {evil}")
    for command in (["show", "run-finished-1"], ["show", "run-finished-1", "--plain"], ["list"], ["stats"]):
        shown = invoke(*command, "--db", str(db))
        assert "x" in shown and not any(char in shown for char in ("\x1b", "\x07", "\u202e")), command


def test_a_stored_decision_is_shown_without_what_a_terminal_would_obey(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    cli_ok("decide", str(ROOT / "configs" / "decide.yaml"), "--db", str(db))
    with contextlib.closing(sqlite3.connect(db)) as con, con:
        con.execute(
            "UPDATE decisions SET winner = 'W' || char(27) || '[2J', leader = 'L' || char(27) || ']0;t' || char(7)"
        )
    for shown in (invoke("decisions", "--db", str(db)), invoke("decisions", "--json", "--db", str(db))):
        assert "W" in shown and "\x1b" not in shown and "\\u001b" not in shown


def test_a_filter_that_matches_nothing_says_what_was_asked(db: Path) -> None:
    found = invoke(
        "list", "--status", "failed", "--protocol", "vote", "--search", "[red]x", "--since", "2d", "--db", str(db)
    )
    assert found.startswith("No failed vote runs matching '[red]x' since ")
    assert found.endswith(f" in {db} (3 runs in all).\n")


def test_list_reads_panel_db_from_the_environment(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PANEL_DB", str(db))
    assert "run-fini" in invoke("list")


def test_empty_store(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    assert invoke("list", "--db", str(path)) == f"No runs yet in {path}.\n"
    assert invoke("list", "--db", str(path), "--status", "failed") == f"No runs yet in {path}.\n"
    assert json.loads(invoke("list", "--db", str(path), "--json")) == []


def test_a_status_with_no_run_is_not_an_empty_store(db: Path) -> None:
    assert (
        invoke("list", "--db", str(db), "--status", "interrupted") == f"No interrupted runs in {db} (3 runs in all).\n"
    )


def test_show_a_finished_run(db: Path) -> None:
    output = invoke("show", "run-fin", "--db", str(db))
    assert [line.rstrip() for line in output.splitlines()[:2]] == ["Run       run-finished-1", f"Question  {QUESTION}"]
    assert "Status    finished" in output
    assert "Members   gpt (openai/gpt-4o), claude (anthropic/claude)" in output
    assert "4 calls (1 failed) · 480 tokens · at least $0.0050 (no price: anthropic/claude)" in output
    assert "round 0 · answer" in output and "round 1 · vote" in output, "each round as the live view draws it"
    assert "→ A 80" in output and "winner: gpt" in output
    assert "╭─ answer" in output and "append-only tables" in output and "**PostgreSQL**" not in output  # Markdown
    assert "timeout: timed out after 300s" in output
    assert "300.0s" in output
    assert output.index("round 1 · vote") < output.index("╭─ answer") < output.index("Calls")


def test_show_a_running_run(db: Path) -> None:
    output = invoke("show", "run-crashed-3", "--db", str(db))
    assert "Status    running" in output
    assert "round 0 · answer" in output, "the stage in progress, as far as it came"
    assert "╭─ answer" not in output
    assert "The run is still going; this is how far it has come." in output


@pytest.mark.parametrize(
    ("ending", "says"), [("failed", "Run failed: Every member failed."), ("interrupted", "Interrupted")]
)
def test_show_a_run_that_ended_without_an_answer(tmp_path: Path, ending: str, says: str) -> None:
    path = tmp_path / "runs.db"
    keep(path, "r1", [run_started(), *answer_calls("r1"), ENDINGS[ending]])
    output = invoke("show", "r1", "--db", str(path))
    assert f"Status    {ending}" in output and says in output and "round 0 · answer" in output
    assert "never ended" not in output and "still going" not in output


def test_show_json(db: Path) -> None:
    """The envelope every protocol's `--json` shares comes first, then what the store kept."""
    run = json.loads(invoke("show", "run-finished-1", "--db", str(db), "--json"))
    assert list(run) == [
        "run_id",
        "protocol",
        "question",
        "final_answer",
        "reached_answer",
        "duration_s",
        "calls",
        "tokens",
        "cost",
        "cost_basis",
        "unpriced_models",
        "calls_by_status",
        "spent_anew",
        "warnings",
        "parent_id",
        "panel",
        "status",
        "resumed_from",
        "resumed_by",
        "outcome",
        "started_at",
        "finished_at",
        "members",
        "config",
        "result",
        "error",
        "thread",
        "call_records",
        "events",
        "damage",
    ]
    assert run["run_id"] == "run-finished-1"
    assert run["final_answer"] == ANSWER and run["reached_answer"] is True
    assert run["duration_s"] == pytest.approx(run["finished_at"] - run["started_at"])
    assert (run["calls"], run["tokens"], run["cost"]) == (4, 480, pytest.approx(0.005))
    assert run["calls_by_status"] == {"answered": 3, "reused": 0, "late": 0, "failed": 1, "cancelled": 0, "refused": 0}
    assert run["warnings"] == [] and run["outcome"] == "gpt"
    assert [member["name"] for member in run["members"]] == ["gpt", "claude"]
    assert len(run["call_records"]) == 4 and run["call_records"][0]["messages"][0]["role"] == "user"
    assert [event["seq"] for event in run["events"]] == list(range(1, len(confer_run("x")) + 1))


def test_show_json_warnings_come_from_the_result(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    warned = RunFinished(final_answer=None, reached_answer=False, result={"warnings": ["bob: no structured vote"]})
    keep(path, "r1", [run_started(), *answer_calls("r1"), warned])
    run = json.loads(invoke("show", "r1", "--db", str(path), "--json"))
    assert run["warnings"] == ["bob: no structured vote"]
    assert run["reached_answer"] is False and run["final_answer"] is None and run["status"] == "no_answer"


def test_show_marks_a_truncated_reply_and_keeps_the_raw_detail_off_screen(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    keep(path, "r1", [run_started(), *answer_calls("r1", truncated=True), *vote_round("r1", detail=RAW)])
    output = invoke("show", "r1", "--db", str(path))
    calls = output[output.index("Calls") :]
    gpt_answer = next(line for line in calls.splitlines() if "gpt" in line and "answer" in line)
    assert "reply truncated" in gpt_answer
    assert calls.count("reply truncated") == 1
    assert "PostgreSQL. (truncated)" in output, "the live view's row says so too"
    assert RAW not in output
    records = json.loads(invoke("show", "r1", "--db", str(path), "--json"))["call_records"]
    assert [record["truncated"] for record in records] == [True, False, False, False]
    assert records[3]["detail"] == RAW


def test_markup_in_data_prints_as_written(tmp_path: Path) -> None:
    """Questions, names, answers and errors come from people and models: `[/bold]` or a
    Llama `[/INST]` in one of them is text, not markup (nor `:smile:` an emoji code)."""
    path = tmp_path / "runs.db"
    question = "Is [bold]this[/bold] escaped? [/INST] :smile:"
    started = run_started(question=question).model_copy(
        update={
            "panel": "[red]panel",
            "members": [MemberInfo(name="[/bold]gpt", model="openai/gpt-4o"), MemberInfo(name="claude", model="x")],
        }
    )
    failed = CallFailed(
        call_id="c1",
        member="[/bold]gpt",
        model="openai/gpt-4o",
        stage="answer",
        round=0,
        kind="bad_request",
        message="bad [/i] request",
        latency=1.0,
    )
    finished = RunFinished(final_answer="Use [red]this[/red] [/INST]", result={"winner": "[b]gpt"})
    keep(path, "r1", [started, failed, finished])
    keep(path, "r2", [started, RunFailed(message="boom [/] :smile:")])

    listed = invoke("list", "--db", str(path))
    assert "Is [bold]this[/bold] escaped? [/INST] :smile:" in listed
    assert "[red]panel" in listed and "[b]gpt" in listed
    shown = invoke("show", "r1", "--db", str(path))
    for written in (
        question,
        "[red]panel",
        "[/bold]gpt (openai/gpt-4o)",
        "bad [/i] request",
        "Use [red]this[/red] [/INST]",
    ):
        assert written in shown, written
    assert "boom [/] :smile:" in invoke("show", "r2", "--db", str(path))
    replayed = invoke("replay", "r1", "--speed", "max", "--db", str(path))
    for written in (question, "[/bold]gpt", "bad [/i] request", "Use [red]this[/red] [/INST]"):
        assert written in replayed, written


def test_show_unknown_or_ambiguous_id(db: Path) -> None:
    with pytest.raises(UserError, match="No run has the id 'nope'"):
        cli("history", "show", "nope", "--db", str(db), catch_exceptions=False)
    with pytest.raises(UserError, match="matches several runs"):
        cli("history", "show", "run-", "--db", str(db), catch_exceptions=False)
    with pytest.raises(UserError, match="No run has the id 'nope'"):
        cli("history", "replay", "nope", "--db", str(db), catch_exceptions=False)


def test_db_option_help_reads_the_same_everywhere() -> None:
    for command in ("list", "show", "replay", "delete", "purge", "stats", "decisions", "retally"):
        result = cli("history", command, "--help", env={"COLUMNS": "300"})
        assert "Transcript database (default: $PANEL_DB, else panel.db in the user data folder)." in result.output


def test_show_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database " * 200)
    with pytest.raises(UserError, match="not an SQLite file"):
        cli("history", "list", "--db", str(path), catch_exceptions=False)


def test_format_cost() -> None:
    assert format_cost(None) == "—"
    assert format_cost(0.0) == "$0.0000"
    assert format_cost(0.00001) == "<$0.0001"
    assert format_cost(1.23456) == "$1.2346"


def imported_by(db: Path, command: list[str], heavy: tuple[str, ...]) -> list[str]:
    """Run `panel history COMMAND` in a fresh interpreter, through `main`, and list which of
    `heavy` (packages and their submodules) it loaded."""
    code = (
        "import sys\n"
        f"sys.argv = ['panel', 'history', *{command!r}, '--db', {str(db)!r}]\n"
        "from panel_cli.cli.app import main\n"
        "try:\n    main()\nexcept SystemExit as exit:\n    assert not exit.code, exit.code\n"
        f"heavy = {heavy!r}\n"
        "print(' '.join(sorted({h for h in heavy for m in sys.modules if m == h or m.startswith(h + '.')})))\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()[-1].split()


@pytest.mark.subprocess
@pytest.mark.parametrize(
    "command", [["list"], ["list", "--search", "database"], ["show", "run-fin", "--json"], ["stats"]]
)
def test_history_imports_no_model_code_nor_event_models(db: Path, command: list[str]) -> None:
    """`panel history` starts instantly: no litellm, no gateway, no event models, no live view."""
    heavy = ("litellm", "panel_cli.llm", "panel_cli.events", "rich.live")
    assert imported_by(db, command, heavy) == []


@pytest.mark.subprocess
def test_show_draws_without_the_event_models_or_a_live_area(db: Path) -> None:
    """A stored run is drawn from its payloads as they are, by the live view's own drawing code
    with no live area: no pydantic, no event models, no asyncio, nothing that could reach a model."""
    heavy = ("litellm", "panel_cli.llm", "httpx", "pydantic", "panel_cli.events", "rich.live", "asyncio")
    assert imported_by(db, ["show", "run-fin"], heavy) == []


@pytest.mark.subprocess
@pytest.mark.parametrize("protocol", ["vote", "decide", "orchestrate"])
def test_show_draws_a_ballot_board_or_a_task_tree_without_the_event_models(tmp_path: Path, protocol: str) -> None:
    """A vote's board (its tally and runoff rounds) and orchestrate's tree (its plan) read the
    stored payloads by attribute too: no protocol's show loads pydantic."""
    path = tmp_path / "runs.db"
    ran = cli(protocol, f"configs/{protocol}.yaml", "--json", "--db", str(path), env={"PANEL_DEMO_DELAY": "0"})
    assert ran.exit_code == 0, ran.output
    run_id = json.loads(ran.stdout)["run_id"]
    heavy = ("litellm", "panel_cli.llm", "pydantic", "panel_cli.events", "panel_cli.protocols.vote.tally", "rich.live")
    assert imported_by(path, ["show", run_id], heavy) == []
    shown = invoke("show", run_id, "--db", str(path))
    assert ("winner: " in shown or "no winner" in shown) if protocol != "orchestrate" else "plan by " in shown


@pytest.mark.subprocess
def test_replay_plays_through_the_live_view_and_calls_no_model(db: Path) -> None:
    heavy = ("litellm", "panel_cli.llm.gateway", "httpx", "aiohttp", "panel_cli.events", "panel_cli.view.live")
    assert imported_by(db, ["replay", "run-fin", "--speed", "max"], heavy) == [
        "panel_cli.events",
        "panel_cli.view.live",
    ]


def test_show_says_a_run_of_demo_personas_is_simulated_and_free(tmp_path: Path) -> None:
    """A demo run has no price; show says what the live view said, not an unknown cost."""
    path = tmp_path / "runs.db"
    ran = cli("confer", "configs/demo.yaml", "--json", "--db", str(path), env={"PANEL_DEMO_DELAY": "0"})
    assert ran.exit_code == 0, ran.output
    run_id = json.loads(ran.stdout)["run_id"]
    output = invoke("show", run_id, "--db", str(path))
    assert "8 calls · " in output and " tokens · simulated, free" in output
