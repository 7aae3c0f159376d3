"""Hostile text in a panel file: Rich markup and a huge question are printed as data.

Real subprocesses of `panel validate`, which imports no model library, so each is quick."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.helpers import panel_process

TWO = "members:\n  - name: a\n    model: demo/sage\n  - name: b\n    model: demo/skeptic\n"


def validate(file: Path) -> subprocess.CompletedProcess[str]:
    return panel_process("validate", str(file), env={"COLUMNS": "200"})


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
