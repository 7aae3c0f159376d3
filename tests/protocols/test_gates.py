"""`--gate`'s rules as pure functions: what a gate's value may be for a panel, and how a result is
judged (docs/exit-codes.md). The runs that reach them are in tests/cli/test_gate.py."""

from __future__ import annotations

import pytest

from panel_cli.config import Panel
from panel_cli.exit_status import ExitStatus
from panel_cli.protocols.supervise.engine import SuperviseResult
from panel_cli.protocols.supervise.gate import expect_approval, judge_supervision
from panel_cli.protocols.vote.engine import DecideResult, VoteResult
from panel_cli.protocols.vote.gate import expect_option, judge_vote


def vote_panel(*options: str) -> Panel:
    members = [{"name": "a", "model": "demo/sage"}, {"name": "b", "model": "demo/skeptic"}]
    return Panel.model_validate({"name": "t", "protocol": "vote", "options": list(options), "members": members})


@pytest.mark.parametrize(("given", "named"), [("MySQL", "MySQL"), ("mysql", "MySQL"), ('"SQL  Server".', "SQL Server")])
def test_a_gate_names_an_option_as_a_ballot_would(given: str, named: str) -> None:
    assert expect_option(vote_panel("PostgreSQL", "MySQL", "SQL Server"), given) == named


def test_a_gate_that_names_no_option_says_which_there_are() -> None:
    with pytest.raises(
        ValueError, match=r"^'Oracle' is not an option of this vote; its options are PostgreSQL, MySQL$"
    ):
        expect_option(vote_panel("PostgreSQL", "MySQL"), "Oracle")


def vote(winner: str | None, reason: str | None = None) -> VoteResult:
    return VoteResult.model_construct(winner=winner, final_answer=winner, failure_reason=reason)


@pytest.mark.parametrize(
    ("result", "status", "reason"),
    [
        (vote("MySQL"), ExitStatus.SUCCESS, "MySQL won"),
        (vote("PostgreSQL"), ExitStatus.FAILURE, "PostgreSQL won, not MySQL"),
        (
            vote(None, "a tie at the top (MySQL, PostgreSQL, 2 votes each)"),
            ExitStatus.UNDECIDED,
            "no option won: a tie at the top (MySQL, PostgreSQL, 2 votes each)",
        ),
        (
            DecideResult.model_construct(winner="MySQL", failure_reason=None, leader="lead", leader_override=True),
            ExitStatus.SUCCESS,
            "MySQL won: the leader lead chose it",
        ),
    ],
)
def test_a_vote_is_judged_by_its_winner(result: VoteResult, status: ExitStatus, reason: str) -> None:
    verdict = judge_vote(result, "MySQL")
    assert (verdict.option, verdict.exit_status, verdict.passed, verdict.reason) == (
        "MySQL",
        status,
        status == ExitStatus.SUCCESS,
        reason,
    )


@pytest.mark.parametrize("given", ["approved", " APPROVED "])
def test_supervise_gates_on_approval_alone(given: str) -> None:
    assert expect_approval(vote_panel("A", "B"), given) == "approved"


def test_supervise_refuses_any_other_gate() -> None:
    with pytest.raises(ValueError, match="^'rejected' is not a verdict supervise gates on; give approved$"):
        expect_approval(vote_panel("A", "B"), "rejected")


@pytest.mark.parametrize(
    ("loop_end", "status"),
    [
        ("approved", ExitStatus.SUCCESS),
        ("round_cap", ExitStatus.FAILURE),
        ("no_verdict", ExitStatus.UNDECIDED),
        ("no_deliverables", ExitStatus.UNDECIDED),
        ("budget", ExitStatus.UNDECIDED),
    ],
)
def test_a_supervision_is_judged_by_how_its_review_loop_ended(loop_end: str, status: ExitStatus) -> None:
    result = SuperviseResult.model_construct(loop_end=loop_end, critic="critic", correction_rounds=2)
    verdict = judge_supervision(result, "approved")
    assert (verdict.exit_status, verdict.passed) == (status, status == ExitStatus.SUCCESS)
    assert verdict.reason
