"""The test harness's own promises: a child of the warm panel is the process a fresh
`python -m panel_cli` would be, in everything the tests that use it look at; and a test that
starts a process without the `subprocess` mark fails."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT, blocked_reading_stdin, finish, panel_process, start_panel, wait_until
from tests.warm_panel import WARM_PANEL_WORKS, WarmProcess

pytestmark = [
    pytest.mark.subprocess,
    pytest.mark.skipif(not WARM_PANEL_WORKS, reason="the warm panel needs Linux's pidfds"),
]


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["validate", "configs/demo.yaml"],
        ["confer", "configs/missing.yaml"],
        ["vote", "--options", "A"],
        ["history", "show", "nothing-here"],
    ],
)
def test_a_warm_child_says_and_exits_what_a_fresh_process_does(args, tmp_path):
    env = {"PANEL_DB": str(tmp_path / "runs.db")}
    warm, fresh = panel_process(*args, env=env), panel_process(*args, env=env, fresh=True)
    assert (warm.returncode, warm.stdout, warm.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)


def waiting_on_stdin(tmp_path: Path) -> subprocess.Popen[str]:
    """A warm child blocked reading its question from stdin, before any run exists."""
    process = start_panel(
        "confer", "configs/demo.yaml", "-q", "-", "--db", str(tmp_path / "runs.db"), stdin=subprocess.PIPE
    )
    assert isinstance(process, WarmProcess)
    wait_until(lambda: blocked_reading_stdin(process.pid), "panel to wait for the question", process=process)
    return process


@pytest.mark.skipif(not Path("/proc/self/syscall").exists(), reason="needs Linux's /proc/PID/syscall")
def test_a_warm_child_is_a_process_of_its_own(tmp_path):
    """Its own pid, working directory and open files (its three streams only)."""
    process = waiting_on_stdin(tmp_path)
    try:
        assert process.pid not in (os.getpid(), os.getppid())
        assert Path(f"/proc/{process.pid}/cwd").resolve() == ROOT
        assert sorted(int(fd) for fd in os.listdir(f"/proc/{process.pid}/fd")) == [0, 1, 2]
    finally:
        process.kill()
        finish(process)


@pytest.mark.skipif(not Path("/proc/self/syscall").exists(), reason="needs Linux's /proc/PID/syscall")
@pytest.mark.parametrize(
    ("signum", "code", "said"),
    [
        (signal.SIGINT, 130, "panel: interrupted by SIGINT.\n"),
        (signal.SIGTERM, 143, "panel: interrupted by SIGTERM.\n"),
        (signal.SIGKILL, -signal.SIGKILL, ""),
    ],
)
def test_a_warm_child_hears_signals_with_panels_own_handlers(tmp_path, signum, code, said):
    process = waiting_on_stdin(tmp_path)
    process.send_signal(signum)
    stderr = finish(process)
    assert (process.returncode, stderr) == (code, said)


UNMARKED = """
import subprocess
import sys

import pytest


def test_starts_python_unmarked():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


@pytest.mark.subprocess
def test_starts_python_marked():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_starts_nothing():
    pass
"""


def test_a_test_that_starts_a_process_unmarked_fails(tmp_path):
    """tests/conftest.py's audit hook, run as a plugin of a pytest of its own."""
    (tmp_path / "test_inner.py").write_text(UNMARKED)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(tmp_path),
            "-p",
            "tests.conftest",
            "-p",
            "no:cacheprovider",
            "-c",
            os.devnull,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "test_starts_python_unmarked started a process (subprocess.Popen) but is not marked" in done.stdout
    assert "1 failed, 2 passed" in done.stdout
