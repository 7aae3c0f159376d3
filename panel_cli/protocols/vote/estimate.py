"""The calls a vote or decide run makes, for `panel estimate` (`panel_cli.protocols.plans`)."""

from __future__ import annotations

from typing import Literal

from panel_cli.config import Panel
from panel_cli.protocols.plans import Bound, Calls, RunPlan, StagePlan, user
from panel_cli.protocols.vote import engine as vote
from panel_cli.protocols.vote.ballots import BallotReply
from panel_cli.protocols.vote.tally import tally


def plan_calls(panel: Panel, question: str, bound: Bound) -> RunPlan:
    protocol: Literal["vote", "decide"] = "decide" if panel.protocol == "decide" else "vote"
    chosen = vote.plan_vote(panel, protocol)
    prompt = user(vote.ballot_prompt(question, chosen.options))
    stages = [StagePlan("vote", None, [Calls(m, 1, 1, prompt, schema=BallotReply) for m in panel.members])]
    if chosen.leader is not None:
        counted = tally([], chosen.options, chosen.method, threshold=chosen.threshold, quorum=chosen.quorum)
        asked = user(vote.leader_prompt(question, chosen.options, counted))
        stages.append(StagePlan("leader", None, [Calls(chosen.leader, 0, 1, asked, schema=BallotReply)]))
    return RunPlan(stages)
