"""Signals: SIGTERM, SIGHUP and repeated Ctrl-C end a run cleanly, within a bound, and keep it.

Real processes (a signal needs a process boundary): children of the warm panel
(tests/warm_panel.py) once the run exists, fresh interpreters for a signal before it does,
or for a process started as a terminal or nohup starts it; against the fake server, whose
members hang so the run is mid-stage when the signal lands. Each signal is sent once the
child is observably where the test means it to be (its requests at the fake server, its rows
in the store, its main thread blocked on stdin), never after a fixed sleep.
"""

from __future__ import annotations

import fcntl
import os
import signal
import sqlite3
import subprocess
import sys
import termios
import threading
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAIServer, after, hang, reply
from tests.helpers import (
    HANG_GUARD,
    ROOT,
    blocked_reading_stdin,
    finish,
    run_python,
    start_panel,
    stored_count,
    wait_until,
    write_panel,
)

pytestmark = pytest.mark.subprocess

STARTED_CALLS = "select count(*) from events where type = 'call_started'"


def signals_panel(path: Path, server: FakeOpenAIServer, names: list[str]) -> Path:
    return write_panel(path, server, names, "question: hold on", "timeouts: {answer: 5m, vote: 5m}", name="signals")


def test_sigterm_mid_round_keeps_the_run_as_interrupted_and_exits_143(fake_server, tmp_path):
    fake_server.script("a", reply("a answers"), hang())
    fake_server.script("b", reply("b answers"), hang())
    db = tmp_path / "runs.db"
    process = start_panel("confer", str(signals_panel(tmp_path / "p.yaml", fake_server, ["a", "b"])), "--db", str(db))
    wait_until(lambda: len(fake_server.requests) >= 4, "both votes to reach the server", process=process)
    wait_until(lambda: stored_count(db, STARTED_CALLS) == 4, "both votes to be in the store", process=process)
    process.send_signal(signal.SIGTERM)
    stderr = finish(process)

    assert process.returncode == 143, stderr
    con = sqlite3.connect(db)
    (run_id,) = con.execute("select id from runs").fetchone()
    assert "Traceback" not in stderr and stderr.endswith(
        f"panel: interrupted by SIGTERM; run {run_id} is kept as interrupted: `panel resume {run_id} --db {db}`"
        " continues it.\n"
    )
    assert con.execute("select status from runs").fetchone() == ("interrupted",)
    calls = sorted(con.execute("select stage, error_kind from calls").fetchall(), key=str)
    assert calls == [("answer", None), ("answer", None), ("vote", "cancelled"), ("vote", "cancelled")]
    assert con.execute("select type from events order by seq desc limit 1").fetchone() == ("run_interrupted",)


def test_three_quick_ctrl_c_on_sixteen_members_exit_130_with_every_call_kept(fake_server, tmp_path):
    """The second and third Ctrl-C come once the first one's clean-up is writing 16 cancelled
    calls (or has written them): they are ignored, the clean-up finishes, nothing is lost."""
    fake_server.default(hang())
    names = [f"m{index}" for index in range(16)]
    db = tmp_path / "runs.db"
    process = start_panel("confer", str(signals_panel(tmp_path / "p.yaml", fake_server, names)), "--db", str(db))
    wait_until(lambda: len(fake_server.requests) >= 16, "all sixteen answers to reach the server", process=process)
    process.send_signal(signal.SIGINT)
    wait_until(
        lambda: process.poll() is not None or stored_count(db, "select count(*) from calls") > 0,
        "the clean-up to write its first cancelled call",
    )
    for _ in range(2):
        process.send_signal(signal.SIGINT)
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


@pytest.mark.skipif(not Path("/proc/self/syscall").exists(), reason="needs Linux's /proc/PID/syscall")
def test_sigterm_before_the_run_exists_exits_143_without_a_traceback(tmp_path):
    """Before the run exists (here, waiting for a question on a stdin that never ends, while
    litellm loads) SIGTERM stops the command the same way, and nothing is stored."""
    process = start_panel(
        "confer", "configs/demo.yaml", "-q", "-", "--db", str(tmp_path / "runs.db"), stdin=subprocess.PIPE, fresh=True
    )
    wait_until(lambda: blocked_reading_stdin(process.pid), "panel to wait for the question on stdin", process=process)
    process.send_signal(signal.SIGTERM)
    stderr = finish(process)
    assert process.returncode == 143, stderr
    assert "Traceback" not in stderr and "interrupted by SIGTERM" in stderr
    assert not (tmp_path / "runs.db").exists()


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_closing_the_terminal_mid_run_keeps_the_run_as_interrupted_and_exits_129(fake_server, tmp_path):
    """The terminal closes under a live run: the kernel sends SIGHUP and every later write to
    the terminal fails. The run is kept as interrupted, its calls cancelled, as for SIGTERM."""
    fake_server.default(hang())
    db = tmp_path / "runs.db"
    panel = signals_panel(tmp_path / "p.yaml", fake_server, ["a", "b"])
    terminal, child_end = os.openpty()

    def own_the_terminal() -> None:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)  # as a terminal's shell starts it, whatever ours has
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    process = subprocess.Popen(
        [sys.executable, "-m", "panel_cli", "confer", str(panel), "--db", str(db)],
        stdin=child_end,
        stdout=child_end,
        stderr=child_end,
        cwd=ROOT,
        preexec_fn=own_the_terminal,
    )
    os.close(child_end)
    try:
        wait_until(lambda: stored_count(db, STARTED_CALLS) == 2, "both answers to be in the store", process=process)
    finally:
        os.close(terminal)  # the terminal window closes: SIGHUP to the process on it
    assert process.wait(timeout=HANG_GUARD) == 129
    con = sqlite3.connect(db)
    assert con.execute("select status from runs").fetchone() == ("interrupted",)
    assert con.execute("select count(*), min(error_kind), max(error_kind) from calls").fetchone() == (
        2,
        "cancelled",
        "cancelled",
    )


def test_a_run_started_with_sighup_ignored_outlives_its_terminal(fake_server, tmp_path):
    """`nohup panel …` starts panel with SIGHUP ignored: a SIGHUP mid-run then changes nothing."""
    hung_up = threading.Event()
    fake_server.default(after(hung_up.is_set, reply("still here"), guard=HANG_GUARD))
    db = tmp_path / "runs.db"
    panel = signals_panel(tmp_path / "p.yaml", fake_server, ["a", "b"])
    process = subprocess.Popen(
        [sys.executable, "-m", "panel_cli", "confer", str(panel), "--db", str(db), "--max-rounds", "1"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN),
    )
    wait_until(lambda: stored_count(db, STARTED_CALLS) == 2, "both answers to be in the store", process=process)
    process.send_signal(signal.SIGHUP)
    hung_up.set()
    stderr = finish(process)

    assert process.returncode in (0, 1), stderr
    assert "SIGHUP" not in stderr
    con = sqlite3.connect(db)
    assert con.execute("select status from runs").fetchone() in (("finished",), ("no_answer",))
    assert con.execute("select count(*) from calls where error_kind = 'cancelled'").fetchone() == (0,)


def has_loaded(pid: int, library: str) -> bool:
    """Whether the process has mapped a shared library whose path holds `library` (Linux's
    /proc/PID/maps): a sign of how far its imports have got."""
    try:
        return library in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs Linux's /proc/PID/maps")
@pytest.mark.parametrize(
    "library",
    [
        pytest.param("_pydantic_core", id="while-panel-imports"),
        pytest.param("multidict/_multidict", id="while-litellm-loads-in-its-thread"),
    ],
)
def test_ctrl_c_before_the_run_exists_is_one_line_and_exit_130(fake_server, tmp_path, library):
    """Ctrl-C in panel's first second (importing itself, or while litellm loads in a thread
    that holds the import lock) ends it as a later Ctrl-C does: one line, exit 130, promptly."""
    fake_server.default(hang())
    panel = write_panel(tmp_path / "p.yaml", fake_server, ["a", "b"], "question: hi")
    db = tmp_path / "runs.db"
    process = start_panel("confer", str(panel), "--db", str(db), fresh=True)
    wait_until(lambda: has_loaded(process.pid, library), f"panel to load {library}", process=process)
    process.send_signal(signal.SIGINT)
    stderr = finish(process)

    assert stderr == "panel: interrupted by SIGINT.\n"
    # 130 as panel exits; now and then CPython ends a process interrupted while it imports by
    # SIGINT itself, after panel's line: the shell reports that as 130 too.
    assert process.returncode in (130, -signal.SIGINT)
    assert not fake_server.requests


@pytest.mark.parametrize(
    "moment",
    ["panel_cli.cli.closed_pipes.keep_going_when_readers_leave", "panel_cli.cli.app.owning_the_process"],
    ids=["before-the-streams-are-wrapped", "before-ctrl-c-is-handled"],
)
def test_ctrl_c_in_the_instants_before_panels_handling_is_one_line_and_exit_130(moment):
    """A Ctrl-C 10 to 20 ms after start lands after the imports and before panel's own handler
    is in place. Made to land exactly there (the function entered at that moment raises what
    the signal would), so the test needs no luck with time."""
    module, _, name = moment.rpartition(".")
    result = run_python(
        "import importlib, sys\n"
        f"sys.argv = ['panel', 'history', 'list']\n"
        f"target = importlib.import_module({module!r})\n"
        "def ctrl_c(*args, **kwargs):\n    raise KeyboardInterrupt\n"
        f"setattr(target, {name!r}, ctrl_c)\n"
        "import panel_cli.cli.app\n"
        f"setattr(panel_cli.cli.app, {name!r}, ctrl_c)\n"
        "from panel_cli.cli.entry import main\n"
        "main()\n"
    )
    assert (result.returncode, result.stderr) == (130, "panel: interrupted by SIGINT.\n")


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_while_the_command_line_loads_is_one_line_not_the_default_action(tmp_path, signum, code):
    """SIGTERM (`timeout`, a CI cancel) or SIGHUP in panel's first few hundred milliseconds, while
    it imports Typer and Rich: the same line and exit code as later, not the signal's default
    action (a bare -15). The child reports each import as it ends (`-X importtime`); the signal
    goes as soon as it reports an import after panel's signal handling, so inside the import of
    the command line, which takes it far longer than this test takes to send a signal."""
    process = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "panel_cli", "confer", "configs/demo.yaml", "-q", "hi"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PANEL_DB": str(tmp_path / "runs.db")},
    )
    assert process.stderr is not None
    reported = iter(process.stderr.readline, "")
    next(line for line in reported if line.rstrip().endswith(" panel_cli.cli.signals"))
    next(reported)  # the next import ends after the handlers are in
    process.send_signal(signum)
    rest = "".join(reported)
    process.wait(timeout=HANG_GUARD)

    assert process.returncode == code, rest[-2000:]
    said = [line for line in rest.splitlines() if not line.startswith("import time:")]
    assert said == [f"panel: interrupted by {signal.Signals(signum).name}."]
    assert not (tmp_path / "runs.db").exists()
