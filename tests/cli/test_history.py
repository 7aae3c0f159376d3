from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from panel_cli.cli.history import history_app
from panel_cli.errors import UserError
from panel_cli.events import CallFailed, MemberInfo, RunFailed, RunFinished
from panel_cli.view.fmt import cost as format_cost
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

ROOT = Path(__file__).resolve().parents[2]
RAW = '{"error": {"message": "context_length_exceeded", "type": "invalid_request_error"}}'

app = typer.Typer()
app.add_typer(history_app, name="history")

# Wide enough that Rich never truncates an id or a column header.
runner = CliRunner(env={"COLUMNS": "200"})


@pytest.fixture
async def db(tmp_path: Path) -> Path:
    path = tmp_path / "runs.db"
    await record(path, "run-finished-1", confer_run("run-finished-1"))
    unpriced = answer_calls("run-unpriced-2", cost_gpt=None, cost_claude=None)
    await record(path, "run-unpriced-2", [run_started(), *unpriced, ENDINGS["no_answer"]])
    await record(path, "run-crashed-3", [run_started(), *answer_calls("run-crashed-3")])
    return path


def invoke(*args: str) -> str:
    result = runner.invoke(app, ["history", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_list_shows_each_run(db: Path) -> None:
    output = invoke("list", "--db", str(db))
    lines = output.splitlines()
    assert lines[0].split() == ["id", "started", "protocol", "panel", "status", "calls", "tokens", "cost", "question"]
    crashed, unpriced, finished = lines[1:4]
    assert crashed.startswith("run-cras ") and "running" in crashed
    assert "no_answer" in unpriced and "—" in unpriced and "$0" not in unpriced
    assert "finished" in finished and "$0.0050" in finished and "480" in finished
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
        "run_id", "protocol", "question", "reached_answer", "duration_s", "calls", "tokens", "cost",
        "panel", "status", "started_at", "finished_at",
    ]
    assert runs[1]["cost"] is None and runs[1]["status"] == "no_answer" and runs[1]["reached_answer"] is False
    assert runs[2]["cost"] == pytest.approx(0.005) and runs[2]["reached_answer"] is True
    assert runs[2]["duration_s"] == pytest.approx(runs[2]["finished_at"] - runs[2]["started_at"])
    assert runs[0]["duration_s"] is None and runs[0]["finished_at"] is None  # still running (or crashed)


def test_list_reads_panel_db_from_the_environment(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PANEL_DB", str(db))
    assert "run-fini" in invoke("list")


def test_empty_store(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    assert invoke("list", "--db", str(path)) == f"No runs yet in {path}.\n"
    assert invoke("list", "--db", str(path), "--status", "failed") == f"No runs yet in {path}.\n"
    assert json.loads(invoke("list", "--db", str(path), "--json")) == []


def test_a_status_with_no_run_is_not_an_empty_store(db: Path) -> None:
    assert invoke("list", "--db", str(db), "--status", "interrupted") == f"No interrupted runs in {db} (3 runs in all).\n"


def test_show_a_finished_run(db: Path) -> None:
    output = invoke("show", "run-fin", "--db", str(db))
    assert "run-finished-1" in output
    assert QUESTION in output
    assert "finished" in output
    assert "gpt (openai/gpt-4o), claude (anthropic/claude)" in output
    assert "4 calls · 480 tokens · $0.0050" in output
    assert "append-only tables" in output and "**PostgreSQL**" not in output  # rendered as Markdown
    assert "timeout: timed out after 300s" in output
    assert "300.0s" in output


def test_show_a_running_run_with_unknown_costs(db: Path) -> None:
    output = invoke("show", "run-crashed-3", "--db", str(db))
    assert "running" in output
    assert "Final answer" not in output


def test_show_json(db: Path) -> None:
    """The envelope every protocol's `--json` shares comes first, then what the store kept."""
    run = json.loads(invoke("show", "run-finished-1", "--db", str(db), "--json"))
    assert list(run) == [
        "run_id", "protocol", "question", "final_answer", "reached_answer", "duration_s", "calls", "tokens",
        "cost", "warnings", "panel", "status", "started_at", "finished_at", "members", "config", "result",
        "error", "call_records", "events",
    ]
    assert run["run_id"] == "run-finished-1"
    assert run["final_answer"] == ANSWER and run["reached_answer"] is True
    assert run["duration_s"] == pytest.approx(run["finished_at"] - run["started_at"])
    assert (run["calls"], run["tokens"], run["cost"]) == (4, 480, pytest.approx(0.005))
    assert run["warnings"] == []
    assert [member["name"] for member in run["members"]] == ["gpt", "claude"]
    assert len(run["call_records"]) == 4 and run["call_records"][0]["messages"][0]["role"] == "user"
    assert [event["seq"] for event in run["events"]] == list(range(1, len(confer_run("x")) + 1))


async def test_show_json_warnings_come_from_the_result(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    warned = RunFinished(final_answer=None, reached_answer=False, result={"warnings": ["bob: no structured vote"]})
    await record(path, "r1", [run_started(), *answer_calls("r1"), warned])
    run = json.loads(invoke("show", "r1", "--db", str(path), "--json"))
    assert run["warnings"] == ["bob: no structured vote"]
    assert run["reached_answer"] is False and run["final_answer"] is None and run["status"] == "no_answer"


async def test_show_marks_a_truncated_reply_and_keeps_the_raw_detail_off_screen(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    await record(path, "r1", [run_started(), *answer_calls("r1", truncated=True), *vote_round("r1", detail=RAW)])
    output = invoke("show", "r1", "--db", str(path))
    gpt_answer = next(line for line in output.splitlines() if "gpt" in line and "answer" in line)
    assert "reply truncated" in gpt_answer
    assert output.count("reply truncated") == 1
    assert RAW not in output
    records = json.loads(invoke("show", "r1", "--db", str(path), "--json"))["call_records"]
    assert [record["truncated"] for record in records] == [True, False, False, False]
    assert records[3]["detail"] == RAW


async def test_markup_in_data_prints_as_written(tmp_path: Path) -> None:
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
        call_id="c1", member="[/bold]gpt", model="openai/gpt-4o", stage="answer", round=0, kind="bad_request",
        message="bad [/i] request", latency=1.0,
    )
    await record(path, "r1", [started, failed, RunFinished(final_answer="Use [red]this[/red] [/INST]")])
    await record(path, "r2", [started, RunFailed(message="boom [/] :smile:")])

    listed = invoke("list", "--db", str(path))
    assert "Is [bold]this[/bold] escaped? [/INST] :smile:" in listed
    assert "[red]panel" in listed
    shown = invoke("show", "r1", "--db", str(path))
    for written in (question, "[red]panel", "[/bold]gpt (openai/gpt-4o)", "bad [/i] request", "Use [red]this[/red] [/INST]"):
        assert written in shown, written
    assert "boom [/] :smile:" in invoke("show", "r2", "--db", str(path))


def test_show_unknown_or_ambiguous_id(db: Path) -> None:
    with pytest.raises(UserError, match="No run has the id 'nope'"):
        runner.invoke(app, ["history", "show", "nope", "--db", str(db)], catch_exceptions=False)
    with pytest.raises(UserError, match="matches several runs"):
        runner.invoke(app, ["history", "show", "run-", "--db", str(db)], catch_exceptions=False)


def test_db_option_help_reads_the_same_everywhere() -> None:
    for command in ("list", "show"):
        result = runner.invoke(app, ["history", command, "--help"], env={"COLUMNS": "300"})
        assert "Transcript database (default: $PANEL_DB, else panel.db in the user data folder)." in result.output


def test_show_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database " * 200)
    with pytest.raises(UserError, match="not an SQLite file"):
        runner.invoke(app, ["history", "list", "--db", str(path)], catch_exceptions=False)


def test_format_cost() -> None:
    assert format_cost(None) == "—"
    assert format_cost(0.0) == "$0.0000"
    assert format_cost(0.00001) == "<$0.0001"
    assert format_cost(1.23456) == "$1.2346"


@pytest.mark.parametrize("command", [["list"], ["show", "run-fin"], ["show", "run-fin", "--json"]])
def test_history_imports_no_model_code_nor_event_models(db: Path, command: list[str]) -> None:
    """`panel history` starts instantly: no litellm, no gateway, no event models, no live view."""
    code = (
        "import sys\n"
        f"sys.argv = ['panel', 'history', *{command!r}, '--db', {str(db)!r}]\n"
        "from panel_cli.cli.app import main\n"
        "try:\n    main()\nexcept SystemExit as exit:\n    assert not exit.code, exit.code\n"
        "heavy = ('litellm', 'panel_cli.llm', 'panel_cli.events', 'panel_cli.view.live', 'rich.live')\n"
        "print(sorted(h for h in heavy for m in sys.modules if m == h or m.startswith(h + '.')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "[]"
