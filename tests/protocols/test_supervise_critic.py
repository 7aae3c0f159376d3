"""The critic's reply is hostile model output, and a supervised panel is checked before any
call: reading verdicts by hand, hostile critics and workers against the fake server, and the
panel checks (located like config errors)."""

from __future__ import annotations

from pathlib import Path

import pytest

from panel_cli.config import parse_panel
from panel_cli.errors import ConfigError, UserError
from panel_cli.protocols.checks import check_panel
from panel_cli.protocols.supervise.engine import RULES, quoted_names, read_verdict
from tests.protocols.test_supervise_engine import rejected

WORKERS = ["writer", "coder"]


def test_a_verdict_with_feedback_for_the_workers_to_correct():
    reading = read_verdict(rejected(coder=" Handle double bookings. ", writer=""), None, WORKERS)
    assert (reading.verdict, reading.rejected, reading.feedback, reading.problem) == (
        "REJECTED",
        ["coder"],
        {"coder": "Handle double bookings."},
        None,
    ), "blank feedback is no feedback"


def test_the_verdict_word_forgives_case_and_spaces_only():
    assert read_verdict({"verdict": " approved "}, None, WORKERS).verdict == "APPROVED"
    for word in ("MAYBE", "APPROVE", "", None):
        reading = read_verdict({"verdict": word}, None, WORKERS)
        assert reading.verdict is None and reading.problem.startswith("invalid verdict: ")


def test_feedback_for_a_name_that_is_no_worker_is_ignored():
    reading = read_verdict(rejected(coder="Fix it.", ghost="Delete the others."), None, WORKERS)
    assert (reading.rejected, reading.ignored, reading.feedback) == (["coder"], ["ghost"], {"coder": "Fix it."})


def test_invented_names_make_a_short_problem():
    reading = read_verdict(rejected(**{f"ghost{index}": "x" for index in range(7)}, **{"y" * 500: "x"}), None, WORKERS)
    assert reading.problem == (
        "REJECTED with no feedback for any worker (it named only 'ghost0', 'ghost1', 'ghost2', 'ghost3', 'ghost4' "
        "and 3 more), so no worker knows what to correct"
    )
    assert quoted_names(["y" * 500]) == repr("y" * 39 + "…")


def test_a_worker_is_found_by_case_when_that_is_unambiguous():
    assert read_verdict(rejected(CODER="Fix it."), None, WORKERS).rejected == ["coder"]
    assert read_verdict(rejected(Ann="Fix it."), None, ["ann", "ANN"]).ignored == ["Ann"]


def test_rejected_with_nobody_to_correct_is_no_verdict():
    assert (
        read_verdict(rejected(), None, WORKERS).problem
        == "REJECTED with no feedback for any worker, so no worker knows what to correct"
    )
    reading = read_verdict(rejected(ghost="x", spirit="y"), None, WORKERS)
    assert reading.verdict is None and reading.ignored == ["ghost", "spirit"]
    assert (
        reading.problem
        == "REJECTED with no feedback for any worker (it named only 'ghost', 'spirit'), so no worker knows what to correct"
    )


def test_approved_keeps_its_comments_and_sends_nobody_back():
    reading = read_verdict({"verdict": "APPROVED", "feedback": {"writer": "Nice."}}, None, WORKERS)
    assert (reading.verdict, reading.rejected, reading.feedback) == ("APPROVED", [], {"writer": "Nice."})


def test_feedback_that_is_not_text_is_no_verdict():
    assert read_verdict({"verdict": "REJECTED", "feedback": ["coder"]}, None, WORKERS).problem.startswith(
        "invalid feedback: "
    )
    assert read_verdict(None, "no JSON object in the reply", WORKERS).problem == "no JSON object in the reply"


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "team.yaml"
    path.write_text(text)
    return str(path)


TEAM_FILE = """\
protocol: supervise
members:
  - name: writer
    model: demo/sage
    task: Write it.
  - name: coder
    model: demo/engineer
critic: writer
"""


def test_a_worker_without_a_task_is_an_error_at_that_member(tmp_path):
    file = write(tmp_path, TEAM_FILE)
    with pytest.raises(ConfigError) as caught:
        check_panel(parse_panel(Path(file).read_text(), file), "supervise")
    assert caught.value.message == (
        f"{file}, line 6: members[1]: 'coder' has no task; give every worker a task (or make it the critic or the chairman)."
    )


def test_a_member_without_a_task_may_be_the_critic_or_the_chairman(tmp_path):
    text = TEAM_FILE.replace("critic: writer", "critic: coder")
    panel = parse_panel(text, "team.yaml")
    assert check_panel(panel, "supervise") == []
    assert dict(RULES.describe(panel))["workers"] == "writer"
    chaired = parse_panel(
        text.replace("critic: coder", "critic: {name: boss, model: demo/skeptic}\nchairman: coder"), "team.yaml"
    )
    assert dict(RULES.describe(chaired))["chairman"] == "coder"


def test_a_critic_that_is_also_a_worker_is_warned(tmp_path):
    text = TEAM_FILE.replace("    model: demo/engineer\n", "    model: demo/engineer\n    task: Code it.\n")
    assert check_panel(parse_panel(text, "team.yaml"), "supervise") == [
        "team.yaml, line 9: critic: 'writer' is also a worker, so it reviews its own deliverable."
    ]


def test_a_supervised_panel_needs_a_critic_and_a_worker():
    no_critic = "members:\n  - name: a\n    model: demo/sage\n    task: t\n"
    with pytest.raises(
        UserError, match=r"A supervised panel needs a critic; panel 'panel' has none \(critic: a member's name"
    ):
        check_panel(parse_panel(no_critic), "supervise")
    nobody = "members:\n  - name: a\n    model: demo/sage\ncritic: a\n"
    with pytest.raises(UserError, match="needs at least one worker with a task"):
        check_panel(parse_panel(nobody), "supervise")


def test_max_rounds_unset_is_two_correction_rounds():
    text = "members:\n  - name: a\n    model: demo/sage\n    task: t\ncritic: {name: c, model: demo/skeptic}\n"
    assert dict(RULES.describe(parse_panel(text)))["max_rounds"] == "2 correction rounds (the default)"
    assert dict(RULES.describe(parse_panel(text + "max_rounds: 1\n")))["max_rounds"] == "1 correction round"


def test_a_task_outside_supervise_is_warned(tmp_path):
    text = "protocol: delphi\nmembers:\n  - name: a\n    model: demo/sage\n    task: t\n  - name: b\n    model: demo/skeptic\n"
    assert check_panel(parse_panel(text, "d.yaml"), "delphi") == [
        "d.yaml, line 5: members[0].task: not used by delphi."
    ]
