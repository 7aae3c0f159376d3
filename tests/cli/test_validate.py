"""`panel validate` makes the same protocol-aware checks as a run, and shows what a file declares.

Runs in-process: validate exits 2 itself on a bad file, and a run's UserError surfaces as
the CliRunner's exception (in a real process `main` turns it into exit code 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from panel_cli.errors import UserError
from tests.helpers import cli

ROOT = Path(__file__).resolve().parents[2]
TWO = "members:\n  - name: a\n    model: demo/sage\n  - name: b\n    model: demo/skeptic\n"


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_several_files_each_with_its_protocols_settings():
    files = [str(ROOT / "configs" / name) for name in ("demo.yaml", "council.yaml", "ensemble.yaml")]
    outcome = cli("validate", *files)
    assert outcome.exit_code == 0, outcome.output
    for expected in (
        "demo: confer, 4 members",
        "until_convergence: yes",
        "timeouts: answer 1m, vote 1m",
        "council-demo: council, 4 members",
        "chairman: sage, engineer",
        "shuffle: yes, seed 7",
        "timeouts: answer 2m, review 2m, synthesis 2m",
        "mode: consensus",
        "scorer: length",
    ):
        assert expected in outcome.stdout
    assert "True" not in outcome.stdout and "False" not in outcome.stdout


def test_one_bad_file_among_several_fails_the_whole_check(tmp_path):
    bad = write(tmp_path / "bad.yaml", "members: []\n")
    outcome = cli("validate", str(ROOT / "configs" / "demo.yaml"), str(bad))
    assert outcome.exit_code == 2
    assert "demo: confer" in outcome.stdout
    assert f"panel: {bad}, line 1: members:" in outcome.stderr and "1 of 2 files are not valid" in outcome.stderr


@pytest.mark.parametrize(
    ("text", "command", "message"),
    [
        (
            "protocol: council\nquestion: q\nmembers:\n  - name: a\n    model: demo/sage\n",
            "council",
            "A council needs at least 2 members",
        ),
        (f"protocol: vote\nquestion: q\n{TWO}", "run", "A vote needs at least two options to choose between"),
        (
            f"protocol: ensemble\nquestion: q\nmode: consensus\nscorer: judge:zed\n{TWO}",
            "ensemble",
            "The judge 'zed' is not a member",
        ),
    ],
)
def test_what_a_run_refuses_validate_refuses(tmp_path, text, command, message):
    file = write(tmp_path / "p.yaml", text)
    checked = cli("validate", str(file))
    assert checked.exit_code == 2 and message in checked.stderr
    run = cli(command, str(file), "--db", str(tmp_path / "r.db"))
    assert isinstance(run.exception, UserError) and message in run.exception.message


def test_a_missing_question_file_fails_validate_at_its_line(tmp_path):
    file = write(tmp_path / "p.yaml", f"{TWO}question_file: nowhere.md\n")
    outcome = cli("validate", str(file))
    assert outcome.exit_code == 2
    assert f"panel: {file}, line 6: question_file: nowhere.md: no such file." in outcome.stderr


def test_fields_the_protocol_ignores_are_warned_with_their_lines(tmp_path):
    text = f"question: q\nchairman: a\ntimeouts: {{review: 1m}}\n{TWO}    weight: 2\n"
    file = write(tmp_path / "p.yaml", text)
    outcome = cli("validate", str(file))
    assert outcome.exit_code == 0, outcome.output
    warnings = [line for line in outcome.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: {file}, line 2: chairman: not used by confer.",
        f"warning: {file}, line 3: timeouts.review: not used by confer.",
        f"warning: {file}, line 9: members[1].weight: not used by confer.",
    ]


def test_a_file_for_another_protocol_is_run_with_one_warning(tmp_path):
    outcome = cli(
        "confer", str(ROOT / "configs" / "council.yaml"), "--max-rounds", "1", "--json", "--db", str(tmp_path / "r.db")
    )
    assert outcome.exit_code == 0, outcome.output
    result = json.loads(outcome.stdout)
    assert result["protocol"] == "confer"
    (warning,) = result["warnings"]
    assert "the file is written for council; this run uses confer" in warning


def test_every_protocol_a_file_may_name_has_its_rules():
    from panel_cli.protocols.base import ProtocolRules, rules_of
    from panel_cli.protocols.registry import names

    assert names() == ("confer", "council", "decide", "delphi", "ensemble", "orchestrate", "supervise", "vote")
    assert all(isinstance(rules_of(name), ProtocolRules) for name in names())
