"""The calls a vote or decide run makes, for `panel estimate` (`panel_cli.protocols.plans`)."""

from __future__ import annotations

from typing import Literal

from panel_cli.config import Panel
from panel_cli.protocols.plans import Bound, Calls, RunPlan, StagePlan, user
from panel_cli.protocols.posterior import Evidence
from panel_cli.protocols.stopping import ask_order, confident, next_wave, settled
from panel_cli.protocols.vote import engine as vote
from panel_cli.protocols.vote.ballots import BallotReply
from panel_cli.protocols.vote.tally import Ballot, tally


def plan_calls(panel: Panel, question: str, bound: Bound) -> RunPlan:
    """Every member's ballot; under `stop:` only the first wave's are sure (the fewest the rule
    may ask: `first_wave`), the others may never be asked. A decision's leader may be asked."""
    protocol: Literal["vote", "decide"] = "decide" if panel.protocol == "decide" else "vote"
    chosen = vote.plan_vote(panel, protocol)
    prompt = user(vote.ballot_prompt(question, chosen.options))
    sure = first_wave(panel, chosen)
    calls = [Calls(m, 1 if m.name in sure else 0, 1, prompt, schema=BallotReply) for m in panel.members]
    stages = [StagePlan("vote", None, calls)]
    if chosen.leader is not None:
        counted = tally([], chosen.options, chosen.method, threshold=chosen.threshold, quorum=chosen.quorum)
        asked = user(vote.leader_prompt(question, chosen.options, counted))
        stages.append(StagePlan("leader", None, [Calls(chosen.leader, 0, 1, asked, schema=BallotReply)]))
    return RunPlan(stages)


def first_wave(panel: Panel, chosen: vote.VotePlan) -> set[str]:
    """The members a vote asks whatever they answer: everyone without a stopping rule; under
    `decided`, the first wave (`next_wave` before any ballot), heaviest weight first; under
    `confident(x)`, the fewest of the heaviest whose agreeing ballots would reach x (everyone
    when none would)."""
    order = [panel.members[place] for place in ask_order([member.weight for member in panel.members])]
    if chosen.stop is None:
        return {member.name for member in order}
    weights = [member.weight for member in order]
    if chosen.stop.kind == "decided" and chosen.leader is None:
        rules = chosen.count_rules()
        size = next_wave([], weights, chosen.options, chosen.method, **rules)
        return {member.name for member in order[: max(size, 1)]}
    if chosen.stop.kind == "decided":
        # A decision whose leader would choose asks everyone: only a winner stops it early.
        rules = chosen.count_rules()
        for size in range(1, len(order)):
            cast = [
                Ballot(voter=f"{place}", choice=chosen.options[0], weight=w) for place, w in enumerate(weights[:size])
            ]
            found = settled(cast, weights[size:], chosen.options, chosen.method, **rules)
            if found.decided and found.winner is not None:
                return {member.name for member in order[:size]}
        return {member.name for member in order}
    for size in range(1, len(order)):
        agreeing = [Evidence(chosen.options[0], weight) for weight in weights[:size]]
        if confident(agreeing, len(chosen.options), chosen.stop.at_least or 1.0).decided:
            return {member.name for member in order[:size]}
    return {member.name for member in order}
