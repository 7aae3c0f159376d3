"""Text from outside panel that is not a reply: a provider's error message, a tool server's
words. A reply's lone surrogate (`\\ud800`, valid JSON that no UTF-8 writer takes) and its
terminal controls are cleaned before anything stores or shows it; these texts are cleaned the
same way, or the store write fails and the run is lost."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from panel_cli.errors import UserError
from tests.fakes.openai_server import Step, error, malformed, reply
from tests.helpers import cli, write_panel

HOSTILE = "quota gone \ud800 here \x1b]52;c;cm0gLXJm\x07 now"
CLEANED = "quota gone \ufffd here  now"


def _error_steps() -> list[tuple[str, Step]]:
    body = json.dumps({"error": {"message": HOSTILE, "type": "server_error"}})
    return [(str(status), error(status, HOSTILE)) for status in (400, 401, 404, 429, 500)] + [
        ("200-error-body", malformed(body, status=200))
    ]


def _panel(tmp_path: Path, server) -> Path:
    return write_panel(tmp_path / "p.yaml", server, ["bad", "good"], "question: q?", "defaults: {retries: 0}")


@pytest.mark.parametrize(("status", "step"), _error_steps(), ids=[name for name, _ in _error_steps()])
def test_a_lone_surrogate_in_a_providers_error_keeps_the_run(fake_server, tmp_path, status, step):
    fake_server.script("bad", step)
    fake_server.script("good", reply("the good answer"))
    db = tmp_path / "runs.db"
    outcome = cli("ensemble", str(_panel(tmp_path, fake_server)), "--json", "--db", str(db), columns=None)
    assert outcome.exit_code == 0, (outcome.output, outcome.exception)
    data = json.loads(outcome.stdout)
    assert data["final_answer"].endswith("the good answer")
    with sqlite3.connect(db) as stored:
        (run_status, calls) = stored.execute("SELECT status, calls FROM runs").fetchone()
        errors = stored.execute("SELECT error, detail FROM calls WHERE member = 'bad'").fetchall()
    assert (run_status, calls) == ("finished", 2)
    ((message, detail),) = errors
    assert "\ufffd" in message and "\x1b" not in message, message
    assert "\ufffd" in (detail or "\ufffd") and "\x1b" not in (detail or "")
    if status != "200-error-body":
        assert CLEANED in message


def test_without_json_the_answer_prints_and_the_run_is_stored(fake_server, tmp_path):
    fake_server.script("bad", error(429, HOSTILE))
    fake_server.script("good", reply("the good answer"))
    db = tmp_path / "runs.db"
    outcome = cli("ensemble", str(_panel(tmp_path, fake_server)), "--db", str(db), columns=None)
    assert outcome.exit_code == 0, (outcome.output, outcome.exception)
    assert "the good answer" in outcome.stdout and "\x1b]52" not in outcome.output
    with sqlite3.connect(db) as stored:
        assert stored.execute("SELECT status FROM runs").fetchone() == ("finished",)


@pytest.mark.subprocess
def test_a_tool_servers_last_words_are_cleaned_before_they_are_shown(tmp_path):
    """A server that dies at its start is named with its last line on stderr: that line is
    the server's text, and reaches the terminal in the sentence panel prints."""
    script = tmp_path / "dies.py"
    script.write_text("import sys\nsys.stderr.write('gone \\x1b]52;c;cm0gLXJm\\x07 \\x1b[2J away\\n')\nsys.exit(3)\n")
    file = tmp_path / "p.yaml"
    file.write_text(
        "question: q?\ntools:\n  notes: {command: [python, dies.py]}\n"
        "members:\n  - {name: a, model: demo/sage, tools: [notes]}\n"
    )
    outcome = cli("ensemble", str(file), "--db", str(tmp_path / "runs.db"), columns=None)
    assert outcome.exit_code == 1, (outcome.output, outcome.exception)
    assert "could not start: gone" in outcome.output and "away" in outcome.output
    assert "\x1b" not in outcome.output and "\x07" not in outcome.output


def test_a_file_name_that_is_not_utf8_is_refused_before_the_run(tmp_path):
    """`--attach caf\\xe9.md`: the name arrives as a lone surrogate, which no store takes."""
    name = os.fsdecode(b"caf\xe9.md")
    (tmp_path / name).write_text("notes")
    file = tmp_path / "p.yaml"
    file.write_text("question: q?\nmembers:\n  - {name: a, model: demo/sage}\n")
    db = tmp_path / "runs.db"
    outcome = cli("ensemble", str(file), "--attach", str(tmp_path / name), "--db", str(db))
    assert isinstance(outcome.exception, UserError), (outcome.output, outcome.exception)
    assert outcome.exception.message == (
        f"--attach {tmp_path}/caf\ufffd.md: its name is not UTF-8 text; rename the file to attach it."
    )
    assert not db.exists() or not sqlite3.connect(db).execute("SELECT count(*) FROM runs").fetchone()[0]
