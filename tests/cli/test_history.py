from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from panel_cli.cli.history import history_app
from panel_cli.errors import UserError
from panel_cli.view.fmt import cost as format_cost
from tests.store.sample_runs import ANSWER, ENDINGS, QUESTION, answer_calls, confer_run, record, run_started

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
    assert [run["id"] for run in runs] == ["run-crashed-3", "run-unpriced-2", "run-finished-1"]
    assert runs[1]["cost"] is None and runs[1]["status"] == "no_answer"
    assert runs[2]["cost"] == pytest.approx(0.005)


def test_list_reads_panel_db_from_the_environment(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PANEL_DB", str(db))
    assert "run-fini" in invoke("list")


def test_empty_store(tmp_path: Path) -> None:
    assert "No runs yet" in invoke("list", "--db", str(tmp_path / "empty.db"))
    assert json.loads(invoke("list", "--db", str(tmp_path / "empty.db"), "--json")) == []


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
    run = json.loads(invoke("show", "run-finished-1", "--db", str(db), "--json"))
    assert run["id"] == "run-finished-1"
    assert run["final_answer"] == ANSWER
    assert [member["name"] for member in run["members"]] == ["gpt", "claude"]
    assert len(run["calls"]) == 4 and run["calls"][0]["messages"][0]["role"] == "user"
    assert [event["seq"] for event in run["events"]] == list(range(1, len(confer_run("x")) + 1))


async def test_show_markup_in_data_prints_as_written(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    await record(path, "r1", [run_started(question="Is [bold]this[/bold] escaped?")])
    assert "Is [bold]this[/bold] escaped?" in invoke("show", "r1", "--db", str(path))


def test_show_unknown_or_ambiguous_id(db: Path) -> None:
    with pytest.raises(UserError, match="No run has the id 'nope'"):
        runner.invoke(app, ["history", "show", "nope", "--db", str(db)], catch_exceptions=False)
    with pytest.raises(UserError, match="matches several runs"):
        runner.invoke(app, ["history", "show", "run-", "--db", str(db)], catch_exceptions=False)


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
