"""Where the question comes from: `-q`, else the file, else stdin (`-q -` forces stdin).

stdin is read only when nothing else gives a question, so `sleep 30 | panel confer FILE`
does not wait for the pipe, and a shell loop's input is not eaten by the first run."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers import cli, start_panel, wait_until

ROOT = Path(__file__).resolve().parents[2]
DEMO = str(ROOT / "configs" / "demo.yaml")


@pytest.mark.subprocess
@pytest.mark.subprocess
def test_a_pipe_that_never_closes_is_not_read_when_the_file_has_a_question(tmp_path):
    """stdin stays open until panel has ended: a read of it would never return."""
    process = start_panel(
        "confer", DEMO, "--max-rounds", "1", "--json", "--db", str(tmp_path / "r.db"), stdin=subprocess.PIPE
    )
    try:
        wait_until(lambda: process.poll() is not None, "panel to end with its stdin still open")
        stdout, stderr = process.communicate()
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, stderr
    assert json.loads(stdout)["question"].startswith("Should a five-person startup")


def test_the_files_question_wins_over_a_loops_input(tmp_path):
    outcome = cli(
        "confer",
        DEMO,
        "--max-rounds",
        "1",
        "--json",
        "--db",
        str(tmp_path / "r.db"),
        input="next-file.yaml\n",
        columns=None,
    )
    assert outcome.exit_code == 0, outcome.output
    assert json.loads(outcome.stdout)["question"].startswith("Should a five-person startup")


def test_dash_reads_stdin_even_when_the_file_has_a_question(tmp_path):
    outcome = cli(
        "confer",
        DEMO,
        "--max-rounds",
        "1",
        "--json",
        "-q",
        "-",
        "--db",
        str(tmp_path / "r.db"),
        input="Tea or coffee?\n",
        columns=None,
    )
    assert outcome.exit_code == 0, outcome.output
    assert json.loads(outcome.stdout)["question"] == "Tea or coffee?"


def test_stdin_is_the_last_source(tmp_path):
    file = tmp_path / "p.yaml"
    file.write_text("members:\n  - name: a\n    model: demo/sage\n")
    outcome = cli(
        "confer",
        str(file),
        "--max-rounds",
        "1",
        "--json",
        "--db",
        str(tmp_path / "r.db"),
        input="From the pipe?\n",
        columns=None,
    )
    assert outcome.exit_code == 0, outcome.output
    assert json.loads(outcome.stdout)["question"] == "From the pipe?"


def test_plain_progress_says_the_question(tmp_path):
    outcome = cli(
        "confer", DEMO, "--max-rounds", "1", "-q", "Which queue?", "--db", str(tmp_path / "r.db"), columns=None
    )
    assert outcome.exit_code == 0, outcome.output
    assert "Which queue?" in outcome.stderr.splitlines()[0] + outcome.stderr.splitlines()[1]
