"""A reader that leaves (`panel … | head`) never changes a run's status: the run goes on to its
end, is stored as finished, and the process exits with the run's own code, saying nothing.

Real processes, since a closed pipe is a process boundary. Each test makes sure panel still
has something to write after the pipe is closed, so a write does meet the closed pipe: the
fake server holds its replies until the test has closed its end, or the text to print is
larger than a pipe holds."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAIServer, RecordedRequest, responder
from tests.helpers import HANG_GUARD, ROOT, hear_ctrl_c, panel_process, start_panel, write_panel
from tests.protocols.conftest import task_of, vote_json

pytestmark = pytest.mark.subprocess

ANSWER = "Use PostgreSQL."


def held_until(server: FakeOpenAIServer, released: threading.Event) -> None:
    """Each member answers, then votes for A, once `released` is set."""

    def reply(request: RecordedRequest) -> str:
        assert released.wait(HANG_GUARD), "the test never released the replies"
        return vote_json("A", 90, ANSWER) if task_of(request) == "confer.vote" else ANSWER

    server.default(responder(reply))


def run_statuses(db: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT status, calls FROM runs").fetchall()
    con.close()
    return rows


def test_a_run_piped_to_head_finishes_and_exits_0(fake_server, tmp_path):
    """`panel confer FILE 2>&1 | head -1`: progress and answer share the pipe head closes."""
    released = threading.Event()
    held_until(fake_server, released)
    panel, db = (
        write_panel(tmp_path / "panel.yaml", fake_server, ["a", "b"], "question: Which database?", "max_rounds: 1"),
        tmp_path / "runs.db",
    )
    process = start_panel("confer", str(panel), "--db", str(db), stderr=subprocess.STDOUT)
    assert process.stdout is not None
    first = process.stdout.readline()
    process.stdout.close()
    released.set()
    assert process.wait(HANG_GUARD) == 0
    assert first.startswith("run started")
    assert run_statuses(db) == [("finished", 4)]


def test_a_closed_stdout_is_not_an_error_on_stderr(fake_server, tmp_path):
    released = threading.Event()
    held_until(fake_server, released)
    panel, db = (
        write_panel(tmp_path / "panel.yaml", fake_server, ["a", "b"], "question: Which database?", "max_rounds: 1"),
        tmp_path / "runs.db",
    )
    process = start_panel("confer", str(panel), "--db", str(db), "--json")
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    released.set()
    stderr = process.stderr.read()
    assert process.wait(HANG_GUARD) == 0
    assert "Error" not in stderr and "Traceback" not in stderr and "Exception" not in stderr, stderr
    assert run_statuses(db) == [("finished", 4)]


def test_history_show_piped_to_head_exits_0_quietly(fake_server, tmp_path):
    """Two 150,000-character answers are more than a pipe holds: show is still writing when
    the reader leaves."""
    long = "PostgreSQL, because " + "it is well understood and " * 6000
    fake_server.default(
        responder(lambda request: vote_json("A", 90, "ok") if task_of(request) == "confer.vote" else long)
    )
    panel, db = (
        write_panel(tmp_path / "panel.yaml", fake_server, ["a", "b"], "question: Which database?", "max_rounds: 1"),
        tmp_path / "runs.db",
    )
    assert panel_process("confer", str(panel), "--db", str(db), "--quiet").returncode == 0
    process = start_panel("history", "show", "last", "--db", str(db))
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.readline().startswith("Run")
    process.stdout.close()
    stderr = process.stderr.read()
    assert process.wait(HANG_GUARD) == 0
    assert stderr == ""


def closed(*fds: int) -> Callable[[], None]:
    """A child's start with these descriptors closed, as a shell's `2>&-` leaves them."""

    def close() -> None:
        hear_ctrl_c()
        for fd in fds:
            os.close(fd)

    return close


def demo_run(tmp_path: Path, **streams: Any) -> tuple[subprocess.CompletedProcess[str], Path]:
    db = tmp_path / "runs.db"
    done = subprocess.run(
        [sys.executable, "-m", "panel_cli", "confer", str(ROOT / "configs" / "demo.yaml"), "--db", str(db)],
        stdin=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
        timeout=HANG_GUARD,
        check=False,
        **streams,
    )
    return done, db


def test_a_run_with_stderr_closed_finishes_and_keeps_its_database_whole(tmp_path):
    """`panel confer FILE 2>&-`: no stream to write progress to is no reason to stop, and the
    database must not become descriptor 2 and take the progress lines."""
    done, db = demo_run(tmp_path, stdout=subprocess.PIPE, preexec_fn=closed(2))
    assert done.returncode == 0
    assert done.stdout.strip(), "the answer is printed"
    assert run_statuses(db) == [("finished", 8)]
    assert b"[round 1]" not in db.read_bytes()


def test_a_run_with_stdout_closed_finishes_and_exits_0(tmp_path):
    done, db = demo_run(tmp_path, stderr=subprocess.PIPE, preexec_fn=closed(1))
    assert (done.returncode, run_statuses(db)) == (0, [("finished", 8)])
    assert "unexpected error" not in done.stderr


def test_output_to_a_full_disk_is_one_sentence_and_exit_1_and_the_run_is_kept(tmp_path):
    with open("/dev/full", "w") as full:
        done, db = demo_run(tmp_path, stdout=full, stderr=subprocess.PIPE, preexec_fn=hear_ctrl_c)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == "panel: the output could not be written (No space left on device)."
    assert "unexpected error" not in done.stderr
    assert run_statuses(db) == [("finished", 8)]
