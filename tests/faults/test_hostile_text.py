"""Hostile text: in a panel file (Rich markup and a huge question are printed as data: real
subprocesses of `panel validate`, which imports no model library), in a questions file or a
dataset a person gave (one located sentence, never a crash), and in a member's answer (it
cannot draw the run's fences, in any spelling of the tag).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from panel_cli.batch.questions import read_questions
from panel_cli.cli.app import app
from panel_cli.errors import ConfigError
from panel_cli.eval.datasets import parse_dataset

ROOT = Path(__file__).resolve().parents[2]
TWO = "members:\n  - name: a\n    model: demo/sage\n  - name: b\n    model: demo/skeptic\n"


def validate(file: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "panel_cli", "validate", str(file)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_markup_in_names_and_questions_is_printed_as_written(tmp_path):
    file = tmp_path / "p.yaml"
    file.write_text(
        "name: '[/bold] panel'\nquestion: 'Why does [/INST] end [red]the prompt?'\n"
        "members:\n  - name: '[/INST]'\n    model: demo/sage\n"
    )
    done = validate(file)
    assert done.returncode == 0, done.stderr
    assert "[/bold] panel: confer" in done.stdout
    assert "Why does [/INST] end [red]the prompt?" in done.stdout and "│ [/INST]" in done.stdout


def test_a_100_kb_question_is_shown_as_a_one_line_preview(tmp_path):
    file = tmp_path / "p.yaml"
    file.write_text(f"question: {'word ' * 20_000}\n{TWO}")
    done = validate(file)
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("question:")]
    assert len(line) <= 120 and line.endswith("…")


# -- files a person gave: a questions file and a dataset ----------------------------------------

DEEP_LINE = '{"question": "q?", "answer": "a", "id": ' + "[" * 5000 + "]" * 5000 + "}\n"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (DEEP_LINE, "its JSON is nested deeper than 64 levels (column 104)"),
        (
            '{"question": "q?", "id": ' + "9" * 5000 + "}\n",
            "its JSON holds a number out of range (99999999999999999999… (5000 digits)) (column 26)",
        ),
        (
            '{"question": "q?", "id": ' + "9" * 30 + "}\n",
            "its JSON holds a number out of range (99999999999999999999… (30 digits)) (column 26)",
        ),
    ],
    ids=["deep", "5000-digits", "past-sqlite-integer"],
)
def test_a_questions_line_past_the_bounds_is_one_located_sentence(tmp_path, line, problem):
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"question": "fine?"}\n' + line, encoding="utf-8")
    panel = tmp_path / "p.yaml"
    panel.write_text(TWO)
    with pytest.raises(ConfigError) as caught:
        CliRunner().invoke(
            app,
            ["batch", str(panel), "--questions", str(questions), "--db", str(tmp_path / "r.db")],
            catch_exceptions=False,
        )
    assert caught.value.exit_code == 2
    assert caught.value.message == f"{questions}, line 2: {problem}."


def test_a_lone_surrogate_in_a_questions_line_is_replaced(tmp_path):
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"id": "q\\ud800", "question": "caf\\udc00e?"}\n', encoding="utf-8")
    (question,) = read_questions(questions)
    assert (question.id, question.question) == ("q\ufffd", "caf\ufffde?")


def test_a_dataset_line_past_the_bounds_is_one_located_sentence():
    text = "\n".join(
        [json.dumps({"question": "q?", "answer": "a"}), DEEP_LINE.strip(), '{"question": "\\ud800?", "answer": 1}']
    )
    with pytest.raises(ConfigError) as caught:
        parse_dataset(text, "d.jsonl")
    assert caught.value.message == "d.jsonl, line 2: its JSON is nested deeper than 64 levels (column 104)."
    (first, third) = parse_dataset("\n".join(text.splitlines()[::2]), "d.jsonl")
    assert third.question == "\ufffd?"
