"""Ctrl-C during `panel_cli.run` stops the run as it stops the command line's (docs/python.md):
the run is stored as interrupted, and KeyboardInterrupt reaches the caller. A real process, since
the test sends it a real signal, once the run's call is in flight."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

import panel_cli
from tests.fakes.openai_server import hang
from tests.helpers import HANG_GUARD, ROOT, hear_ctrl_c, wait_until

SCRIPT = """
import sys
import panel_cli

panel = panel_cli.Panel(
    name="hung",
    members=[{"name": name, "model": f"openai/{name}", "api_base": sys.argv[1]} for name in ("x", "y")],
    defaults={"retries": 0},
)
try:
    panel_cli.run(panel, "Anything?", protocol="council")
except KeyboardInterrupt:
    print("KeyboardInterrupt")
"""


@pytest.mark.subprocess
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_keeps_the_run_interrupted_and_raises_keyboard_interrupt(fake_server, tmp_path) -> None:
    fake_server.default(hang())
    process = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, fake_server.url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "OPENAI_API_KEY": "fake-test-key"},
        preexec_fn=hear_ctrl_c,
    )
    wait_until(lambda: len(fake_server.requests) == 2, "the run's calls to be in flight", process=process)
    process.send_signal(signal.SIGINT)
    try:
        stdout, stderr = process.communicate(timeout=HANG_GUARD)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    assert (stdout, stderr) == ("KeyboardInterrupt\n", "")
    (stopped,) = panel_cli.history.list_runs()
    assert (stopped.status, stopped.calls_by_status["cancelled"]) == ("interrupted", 2)
