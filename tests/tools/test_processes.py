"""No tool server outlives its run: not after an answer, not after a failed run, not after
SIGTERM or Ctrl-C in the middle of a tool call (real `panel` processes for the signals)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from panel_cli.errors import UserError
from tests.fakes.openai_server import reply, tool_calls
from tests.helpers import start_panel
from tests.tools.conftest import FIXTURE, answer_once, fixture_server, tool_panel

pytestmark = pytest.mark.subprocess

GUARD = 120.0  # a hang guard, never a measurement


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """A dead child not yet reaped still answers kill(0); /proc says what it is."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return False


def gone(pid: int) -> bool:
    """Whether the process is gone, allowing the kernel a moment to reap a killed one."""
    deadline = time.monotonic() + GUARD
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def wait_for(condition, process: subprocess.Popen[str] | None = None) -> None:
    deadline = time.monotonic() + GUARD
    while not condition():
        assert time.monotonic() < deadline, "the run never got there"
        assert process is None or process.poll() is None, process.communicate()[1] if process else ""
        time.sleep(0.05)


async def test_the_server_stops_when_the_run_ends(fake_server, run_with_tools, tmp_path):
    pidfile = tmp_path / "server.pid"
    panel = tool_panel(fake_server, ["a"], tools={"fix": fixture_server(env={"MCP_FIXTURE_PIDFILE": str(pidfile)})})
    fake_server.script("a-model", tool_calls(("lookup", {"query": "x"})), reply("done"))
    result, _ = await run_with_tools(answer_once, panel)

    assert result.final_answer == "done"
    assert gone(int(pidfile.read_text()))


async def test_the_server_stops_when_the_run_fails(fake_server, run_with_tools, tmp_path):
    """Another server cannot start, so the run fails before any call: the one that started stops."""
    pidfile = tmp_path / "server.pid"
    servers = {
        "fix": fixture_server(env={"MCP_FIXTURE_PIDFILE": str(pidfile)}),
        "broken": {"command": [sys.executable, "-c", "import sys; sys.exit(1)"]},
    }
    panel = tool_panel(fake_server, ["a"], uses={"a": ["fix", "broken"]}, tools=servers)
    with pytest.raises(UserError, match="Tool server 'broken'"):
        await run_with_tools(answer_once, panel)
    wait_for(pidfile.exists)
    assert gone(int(pidfile.read_text()))


def tool_events(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db) as connection:
            return connection.execute("SELECT count(*) FROM events WHERE type = 'tool_call_started'").fetchone()[0]
    except sqlite3.Error:
        return 0


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_no_server_survives_a_signal_in_the_middle_of_a_tool_call(fake_server, tmp_path, signum, code):
    pidfile = tmp_path / "server.pid"
    panel = tmp_path / "tools.yaml"
    panel.write_text(
        "name: signals\nquestion: hold on\nprotocol: confer\n"
        f"tools:\n  fix:\n    command: [python, {FIXTURE}]\n    env: {{MCP_FIXTURE_PIDFILE: {pidfile}}}\n    timeout: 5m\n"
        f"members:\n  - name: a\n    model: openai/a-model\n    api_base: {fake_server.url}\n    tools: [fix]\n"
    )
    fake_server.script("a-model", tool_calls(("hang", {"query": "forever"})))
    db = tmp_path / "runs.db"
    process = start_panel("confer", str(panel), "--db", str(db))
    try:
        wait_for(lambda: tool_events(db) > 0, process)
        server = int(pidfile.read_text())
        assert alive(server)
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=GUARD)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == code, stderr
    assert "Traceback" not in stderr
    assert gone(server), "the tool server outlived panel"
    with sqlite3.connect(db) as connection:
        assert connection.execute("SELECT status FROM runs").fetchone()[0] == "interrupted"
