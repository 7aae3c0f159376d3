"""Signals: SIGTERM and repeated Ctrl-C end a run cleanly, within a bound, and keep it.

Real subprocesses (a signal needs a process boundary), against the fake server, whose
members hang so the run is mid-stage when the signal lands.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tests.fakes.openai_server import hang, reply

ROOT = Path(__file__).resolve().parents[2]


def write_panel(path: Path, url: str, names: list[str]) -> Path:
    members = "".join(f"  - name: {name}\n    model: openai/{name}\n    api_base: {url}\n" for name in names)
    path.write_text(f"name: signals\nquestion: hold on\ntimeouts: {{answer: 5m, vote: 5m}}\nmembers:\n{members}")
    return path


def start(file: Path, db: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "panel_cli", "confer", str(file), "--db", str(db)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def wait_for_requests(server, count: int, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 90  # a hang guard, not a measurement
    while len(server.requests) < count and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    assert len(server.requests) >= count, "the run never reached the stage"


def finish(process: subprocess.Popen[str]) -> str:
    try:
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    return stderr


def test_sigterm_mid_round_keeps_the_run_as_interrupted_and_exits_143(fake_server, tmp_path):
    fake_server.script("a", reply("a answers"), hang())
    fake_server.script("b", reply("b answers"), hang())
    db = tmp_path / "runs.db"
    process = start(write_panel(tmp_path / "p.yaml", fake_server.url, ["a", "b"]), db)
    wait_for_requests(fake_server, 4, process)
    time.sleep(0.3)
    process.send_signal(signal.SIGTERM)
    stderr = finish(process)

    assert process.returncode == 143, stderr
    assert "Traceback" not in stderr and "interrupted by SIGTERM" in stderr
    con = sqlite3.connect(db)
    assert con.execute("select status from runs").fetchone() == ("interrupted",)
    calls = sorted(con.execute("select stage, error_kind from calls").fetchall(), key=str)
    assert calls == [("answer", None), ("answer", None), ("vote", "cancelled"), ("vote", "cancelled")]
    assert con.execute("select type from events order by seq desc limit 1").fetchone() == ("run_interrupted",)


def test_three_quick_ctrl_c_on_sixteen_members_exit_130_with_every_call_kept(fake_server, tmp_path):
    """The second and third Ctrl-C land while the first one's clean-up is writing 16
    cancelled calls: they are ignored, the clean-up finishes, nothing is lost."""
    fake_server.default(hang())
    names = [f"m{index}" for index in range(16)]
    db = tmp_path / "runs.db"
    process = start(write_panel(tmp_path / "p.yaml", fake_server.url, names), db)
    wait_for_requests(fake_server, 16, process)
    for _ in range(3):
        process.send_signal(signal.SIGINT)
        time.sleep(0.01)
    stderr = finish(process)

    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    con = sqlite3.connect(db)
    assert con.execute("select status from runs").fetchone() == ("interrupted",)
    assert con.execute("select count(*), min(error_kind), max(error_kind) from calls").fetchone() == (
        16,
        "cancelled",
        "cancelled",
    )


def test_sigterm_before_the_run_exists_exits_143_without_a_traceback(tmp_path):
    """Before the run exists (here, waiting for a question on a stdin that never ends, while
    litellm loads) SIGTERM stops the command the same way, and nothing is stored."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "panel_cli",
            "confer",
            "configs/demo.yaml",
            "-q",
            "-",
            "--db",
            str(tmp_path / "runs.db"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    time.sleep(2.0)  # past panel's own start-up; the command then waits on stdin for good
    process.send_signal(signal.SIGTERM)
    stderr = finish(process)
    assert process.returncode == 143, stderr
    assert "Traceback" not in stderr and "interrupted by SIGTERM" in stderr
    assert not (tmp_path / "runs.db").exists()
