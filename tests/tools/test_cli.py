"""The tools demo as a user runs it (offline, no key), and what the views, the store,
`history show` and the exports make of its tool calls."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from rich.console import Console

from panel_cli.events import (
    CallFinished,
    CallStarted,
    MemberInfo,
    RunStarted,
    StageStarted,
    ToolCallFinished,
    ToolCallStarted,
    ToolServerStarted,
)
from panel_cli.store.migrations import MIGRATIONS
from panel_cli.view.live import LiveView
from panel_cli.view.plain import PlainView
from tests.helpers import cli

ROOT = Path(__file__).resolve().parents[2]
DEMO = str(ROOT / "configs" / "tools.yaml")


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    """One run of the demo, with one more file attached from the command line."""
    folder = tmp_path_factory.mktemp("demo")
    db = folder / "runs.db"
    extra = folder / "extra.md"
    extra.write_text("An extra note.\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PANEL_DEMO_DELAY", "0")
        outcome = cli("council", DEMO, "--json", "--db", str(db), "--attach", str(extra))
    assert outcome.exit_code == 0, outcome.output
    return json.loads(outcome.stdout), db


@pytest.mark.subprocess
def test_the_demo_runs_offline_and_its_answer_cites_the_notes(demo_run):
    result, db = demo_run
    assert result["reached_answer"]
    assert (
        "From what I looked up: “Every table that holds customer data carries a tenant_id column."
        in result["final_answer"]
    )
    with sqlite3.connect(db) as connection:
        config = json.loads(
            connection.execute("SELECT body FROM texts JOIN runs ON runs.config_text = texts.id").fetchone()[0]
        )
        rows = connection.execute("SELECT member, stage, server, tool, status FROM tool_calls ORDER BY seq").fetchall()
    assert [Path(entry).name for entry in config["attach"]] == ["brief.md", "extra.md"]
    assert sorted(rows) == [
        ("engineer", "answer", "notes", "lookup", "ok"),
        ("sage", "answer", "notes", "lookup", "ok"),
        ("sage", "synthesis", "notes", "lookup", "ok"),
    ]


@pytest.mark.subprocess  # demo_run, the first test to ask for it, starts the tool server
def test_history_show_and_the_exports_show_the_tool_calls(demo_run):
    result, db = demo_run
    run_id = result["run_id"]
    shown = cli("history", "show", run_id, "--db", str(db))
    assert shown.exit_code == 0, shown.output
    assert "tools: started notes (python tools/notes_server.py): lookup; for sage, engineer" in shown.stdout
    assert 'lookup(query="How should the new reporting' in shown.stdout
    markdown = cli("history", "export", run_id, "--format", "md", "--db", str(db))
    assert "| member | status | tools | answer |" in markdown.stdout
    assert 'lookup(query="How should the new reporting ser…) ok, 539 chars' in markdown.stdout
    assert "- **tools:** started notes" in markdown.stdout
    page = cli("history", "export", run_id, "--format", "html", "-o", "-", "--db", str(db))
    assert "lookup(query=&quot;How should the new reporting" in page.stdout


@pytest.mark.subprocess
def test_deleting_the_run_deletes_its_tool_call_rows(demo_run, tmp_path):
    _, db = demo_run
    copy = tmp_path / "copy.db"
    copy.write_bytes(db.read_bytes())
    with sqlite3.connect(copy) as connection:
        run_id = connection.execute("SELECT id FROM runs").fetchone()[0]
        assert connection.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    outcome = cli("history", "delete", run_id, "--yes", "--db", str(copy))
    assert outcome.exit_code == 0, outcome.output
    with sqlite3.connect(copy) as connection:
        assert connection.execute("SELECT count(*) FROM tool_calls").fetchone()[0] == 0


def events() -> list:
    call = {"call_id": "c1", "member": "ann", "stage": "answer", "round": None, "about": None}
    tool = {
        **call,
        "tool_call_id": "t1",
        "server": "notes",
        "tool": "lookup",
        "arguments": {"query": "[bold]tenants[/bold]"},
    }
    return [
        RunStarted(protocol="council", panel="p", question="q", members=[MemberInfo(name="ann", model="demo/sage")]),
        ToolServerStarted(
            server="notes", transport="stdio", target="python notes.py", tools=["lookup"], members=["ann"]
        ),
        StageStarted(stage="answer", members=["ann"]),
        CallStarted(**call, model="demo/sage"),
        ToolCallStarted(**tool),
        ToolCallFinished(**tool, status="timeout", error="no result within 30.0s", duration=30.0),
        CallFinished(**call, model="demo/sage", text="the answer", latency=31.0),
    ]


async def test_the_live_view_puts_each_tool_call_on_its_members_row_as_text():
    console = Console(record=True, width=160, color_system=None)
    view = LiveView(console, animate=False)
    for event in events():
        await view(event)
    view.close()
    text = console.export_text()
    assert "tools: started notes (python notes.py): lookup; for ann" in text
    assert 'lookup(query="[bold]tenants[/bold]") timeout' in text, "arguments are shown as written, never as markup"


async def test_the_plain_view_writes_a_line_per_tool_event(tmp_path):
    log = tmp_path / "log"
    with log.open("w") as stream:
        view = PlainView(stream)
        for event in events():
            await view(event)
    lines = log.read_text().splitlines()
    assert "tools: started notes (python notes.py): lookup; for ann" in lines
    assert '[answer] tool call  ann  lookup(query="[bold]tenants[/bold]")' in lines
    assert "[answer] tool timeout  ann  lookup  30.00s  no result within 30.0s" in lines
