"""Off a terminal, nothing a run prints is cut to 80 columns: progress lines, the answer, an
estimate's and an eval's tables keep every id and name whole, at the width `COLUMNS` gives or,
without it, with no limit. Each command runs in-process, its output a pipe."""

from __future__ import annotations

import re
from pathlib import Path

from panel_cli.store.reader import TranscriptReader
from tests.helpers import cli

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
LONG_NAME = "a-rather-long-baseline-member-name-for-this-eval"


def test_progress_lines_and_the_answer_are_whole(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    outcome = cli("council", "--demo", "-q", "Which database for a billing service?", "--db", str(db), columns=None)
    assert outcome.exit_code == 0, outcome.output

    with TranscriptReader.open(db) as reader:
        (run,) = reader.list_runs()
        answer = reader.get_run(run.id).final_answer
    assert answer is not None and max(len(line) for line in answer.splitlines()) > 80
    assert outcome.stdout == answer.rstrip() + "\n", "the answer as written, no line folded"
    lines = outcome.stderr.splitlines()
    assert lines[0].endswith(f"run {run.id}") and len(run.id) == 12
    members = lines[0].split("members: ")[1].split("  run ")[0].split(", ")
    aggregate = next(line for line in lines if line.startswith("aggregate ranking: "))
    assert len(aggregate) > 80 and aggregate.count("avg") == len(members) >= 4, "one line, every member in it"


def test_an_estimate_is_as_wide_as_its_lines() -> None:
    outcome = cli("estimate", str(CONFIGS / "council.yaml"), columns=None)
    assert outcome.exit_code == 0, outcome.output
    lines = outcome.stdout.splitlines()
    note = next(line for line in lines if line.startswith("- max_tokens is unset"))
    assert note.endswith("(the output ≤ column of the model table)."), "a note is one line, not folded at 80"
    assert "demo/historian" in next(line for line in lines if "historian" in line and "│" in line)

    narrow = cli("estimate", str(CONFIGS / "council.yaml"), columns=60)
    assert narrow.exit_code == 0 and max(len(line) for line in narrow.stdout.splitlines()) <= 60


def test_an_eval_table_names_every_system_whole(tmp_path: Path) -> None:
    panel = (CONFIGS / "jury.yaml").read_text().replace("{name: v1,", f"{{name: {LONG_NAME},")
    (tmp_path / "jury.yaml").write_text(panel)
    args = ["eval", str(tmp_path / "jury.yaml"), "--dataset", "builtin:general", "--limit", "2"]
    outcome = cli(*args, "--db", str(tmp_path / "runs.db"), columns=None)
    assert outcome.exit_code == 0, outcome.output

    lines = outcome.stdout.splitlines()
    assert lines[0] == "Eval of jury on builtin:general: 2 questions, graded by option match"
    row = next(line for line in lines if line.startswith("baseline ("))
    assert row.startswith(f"baseline ({LONG_NAME})") and re.search(r"\d+\.\d\ds$", row), row
    assert all(line == line.rstrip() for line in lines), "no line padded out to a width"

    narrow = cli(*args, "--db", str(tmp_path / "again.db"), columns=70)
    assert narrow.exit_code == 0 and max(len(line) for line in narrow.stdout.splitlines()) <= 70
