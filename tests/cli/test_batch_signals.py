"""Ctrl-C and SIGTERM stop a batch: the run in flight is kept as interrupted, the finished
runs and their result lines stay, and the command prints how to continue; resuming then asks
the server only for the questions left. A real subprocess, since a signal needs a process."""

from __future__ import annotations

import json
import shlex
import signal
import sqlite3
import time

import pytest

from tests.batch.panels import answer, batch_panel, write_questions
from tests.fakes.openai_server import hang, responder
from tests.helpers import cli, start_panel

pytestmark = pytest.mark.subprocess


@pytest.mark.parametrize(("signum", "code", "name"), [(signal.SIGINT, 130, "SIGINT"), (signal.SIGTERM, 143, "SIGTERM")])
def test_a_stopped_batch_keeps_what_finished_and_says_how_to_resume(fake_server, tmp_path, signum, code, name):
    fake_server.script("m0", responder(answer), responder(answer), hang(), responder(answer))
    panel = batch_panel(tmp_path / "panel.yaml", fake_server)
    questions = write_questions(tmp_path / "q.jsonl", range(1, 6))
    out, db = tmp_path / "out.jsonl", tmp_path / "runs.db"
    process = start_panel(
        "batch", str(panel), "--questions", str(questions), "--concurrency", "1", "--output", str(out), "--db", str(db)
    )
    try:
        deadline = time.monotonic() + 90  # a hang guard, not a measurement
        while len(fake_server.requests) < 3 and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        assert len(fake_server.requests) == 3, "the batch never reached its third question"
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()

    assert process.returncode == code, stderr
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    batch_id = lines[0].split()[2].rstrip(":")
    assert f"panel: batch {batch_id} stopped: 2 of 5 questions have a finished run, kept with their results." in lines
    command = f"panel batch {panel} --questions {questions} --resume {batch_id} --output {out} --db {db}"
    assert f"panel: continue it with: {command}" in lines
    assert lines[-1] == f"panel: interrupted by {name}."
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["q1", "q2"]
    statuses = sqlite3.connect(db).execute(
        "SELECT status, count(*) FROM runs WHERE batch_id = ? GROUP BY status", (batch_id,)
    )
    assert dict(statuses.fetchall()) == {"finished": 2, "interrupted": 1}

    outcome = cli(*shlex.split(command)[1:], "--json", columns=None)
    assert outcome.exit_code == 0, outcome.output
    assert sorted(answer(request) for request in fake_server.requests[3:]) == ["A3", "A4", "A5"]
    assert [json.loads(line)["final_answer"] for line in out.read_text().splitlines()] == ["A1", "A2", "A3", "A4", "A5"]
