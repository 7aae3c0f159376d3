"""Where the question comes from: `-q`, else the file, else stdin (`-q -` forces stdin).

stdin is read only when nothing else gives a question, so `sleep 30 | panel confer FILE`
does not wait for the pipe, and a shell loop's input is not eaten by the first run."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers import cli, cli_ok, cli_refused, start_panel, wait_until

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


@pytest.mark.parametrize("given", ["", "   "])
def test_an_empty_question_given_is_refused_not_replaced_by_the_files(given, tmp_path):
    """`-q "$QUESTION"` with the variable unset must not ask the panel's own question instead."""
    message = cli_refused("confer", DEMO, "-q", given, "--db", str(tmp_path / "r.db"))
    assert message == "-q: the question is empty; give one, or leave -q out to ask the panel's own."
    assert not (tmp_path / "r.db").exists()


# A clipboard write, a right-to-left override and a screen clear: what a terminal obeys.
CONTROLLED = "Tea\x1b]52;c;QUFB\x07 or \u202ecoffee\x1b[2J?"


@pytest.mark.parametrize("source", ["-q", "stdin", "question_file"])
def test_terminal_controls_leave_a_question_from_every_source(source, tmp_path):
    """A file's `question` is cleaned as it is read (located_yaml); `-q`, stdin and a
    `question_file` are cleaned the same, so no view, reply quoting it or export obeys them."""
    db = str(tmp_path / "r.db")
    panel = tmp_path / "p.yaml"
    panel.write_text("members:\n  - name: a\n    model: demo/sage\n  - name: b\n    model: demo/skeptic\n")
    args: list[str] = ["confer", str(panel), "--json", "--db", db]
    if source == "-q":
        args += ["-q", CONTROLLED]
    elif source == "question_file":
        (tmp_path / "q.txt").write_text(CONTROLLED)
        panel.write_text(panel.read_text() + "question_file: q.txt\n")
    outcome = cli(*args, input=CONTROLLED if source == "stdin" else None, columns=None)
    assert outcome.exit_code == 0, outcome.output
    result = json.loads(outcome.stdout)
    assert result["question"] == "Tea or coffee?"
    assert "\x1b" not in result["final_answer"] and "\u202e" not in result["final_answer"]
    shown = cli_ok("history", "show", "last", "--db", db)
    assert "Tea or coffee?" in shown and "\x1b" not in shown and "\u202e" not in shown


def test_a_question_file_of_nothing_but_controls_is_empty(tmp_path):
    (tmp_path / "q.txt").write_text("\x1b[2J\x1b]0;title\x07\n")
    panel = tmp_path / "p.yaml"
    panel.write_text("members:\n  - name: a\n    model: demo/sage\nquestion_file: q.txt\n")
    message = cli_refused("confer", str(panel), "--db", str(tmp_path / "r.db"))
    assert message == f"{panel}, line 4: question_file: q.txt: the file is empty."
