"""The calls a confer run makes, stage by stage, for `panel estimate` (`panel_cli.protocols.plans`)."""

from __future__ import annotations

from panel_cli.config import Panel
from panel_cli.protocols.confer import engine as confer
from panel_cli.protocols.confer.settings import ConferSettings
from panel_cli.protocols.plans import Bound, Calls, RunPlan, StagePlan, fewest_rounds, rounds_label, user


def plan_calls(panel: Panel, question: str, bound: Bound) -> RunPlan:
    members = panel.members
    answer = StagePlan("answer", "0", [answer_calls(panel, question, bound, index) for index in range(len(members))])
    authors = confer.assign_labels(panel.member_names, {m.name: "" for m in members})
    block = dict.fromkeys(authors, "")
    own = {name: label for label, name in authors.items()}
    quoted = sum(bound(m) for m in members)
    settings = ConferSettings.of(panel)
    low, high = fewest_rounds(settings.max_rounds, settings.until_convergence), settings.max_rounds
    votes = [
        Calls(
            m, low, high, user(confer.vote_prompt(question, block, own[m.name])), quoted=quoted, schema=confer.PeerVote
        )
        for m in members
    ]
    if len(members) < 2:  # a lone member holds no vote (`check_confer`)
        return RunPlan([answer])
    return RunPlan([answer, StagePlan("vote", rounds_label(1, high), votes)])


def answer_calls(panel: Panel, question: str, bound: Bound, index: int) -> Calls:
    """The same one answer per member in either order; answering in turn, member `index` is
    shown (at the most) every answer before its own."""
    member = panel.members[index]
    if ConferSettings.of(panel).answer_order == "parallel" or index == 0:
        return Calls(member, 1, 1, user(confer.answer_prompt(question)), tools=True)
    earlier = panel.members[:index]
    block = dict.fromkeys(confer.assign_labels(panel.member_names, {m.name: "" for m in earlier}), "")
    return Calls(
        member,
        1,
        1,
        user(confer.answer_prompt(question)),
        longest=user(confer.answer_prompt(question, block)),
        quoted=sum(bound(m) for m in earlier),
        tools=True,
    )
