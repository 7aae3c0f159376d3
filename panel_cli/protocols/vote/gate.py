"""`--gate OPTION` on vote and decide: 0 when OPTION wins, 1 when another option does, 3 when
none does (a tie nothing settles, a quorum not met, no ballot counted). A decision's winner is
the leader's choice when the vote itself chose none."""

from __future__ import annotations

from panel_cli.config import Panel
from panel_cli.exit_status import ExitStatus
from panel_cli.protocols.gates import GateRule, GateVerdict, verdict
from panel_cli.protocols.vote.ballots import exact_option
from panel_cli.protocols.vote.engine import DecideResult, VoteResult
from panel_cli.protocols.vote.settings import VoteSettings


def expect_option(panel: Panel, value: str) -> str:
    """The option `value` names (any case, as ballots are read), as the result will spell it."""
    options = [option.strip() for option in VoteSettings.of(panel).options]
    found = exact_option(value, options)
    if found is None:
        listed = ", ".join(options) if options else "none are given"
        raise ValueError(f"'{value}' is not an option of this {panel.protocol}; its options are {listed}")
    return found


def judge_vote(result: VoteResult, option: str) -> GateVerdict:
    if result.winner is None:
        return verdict(option, ExitStatus.UNDECIDED, f"no option won: {result.failure_reason or 'no ballot counted'}")
    if result.winner != option:
        return verdict(option, ExitStatus.FAILURE, f"{result.winner} won, not {option}")
    if isinstance(result, DecideResult) and result.leader_override:
        return verdict(option, ExitStatus.SUCCESS, f"{option} won: the leader {result.leader} chose it")
    return verdict(option, ExitStatus.SUCCESS, f"{option} won")


VOTE_GATE = GateRule(expect=expect_option, judge=judge_vote)
