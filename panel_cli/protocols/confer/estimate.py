"""The calls a confer run makes, stage by stage, for `panel estimate` (`panel_cli.protocols.plans`)."""

from __future__ import annotations

from panel_cli.config import Panel
from panel_cli.protocols.confer import engine as confer
from panel_cli.protocols.confer.settings import ConferSettings
from panel_cli.protocols.confer.stopping import next_answerers
from panel_cli.protocols.plans import Bound, Calls, RunPlan, StagePlan, rounds_label, user


def plan_calls(panel: Panel, question: str, bound: Bound) -> RunPlan:
    """Every member's answer and its vote in each round. With `until_convergence` the rounds
    may end after the first (a round that moves no answer). Under `stop: decided` only the
    first wave of answers is sure, and no vote at all (the answers given may all agree)."""
    members = panel.members
    settings = ConferSettings.of(panel)
    sure = len(members) if panel.stop_rule is None else next_answerers([], len(members), settings.options).size
    answers = [answer_calls(panel, question, bound, index, sure=index < sure) for index in range(len(members))]
    answer = StagePlan("answer", "0", answers)
    authors = confer.assign_labels(panel.member_names, {m.name: "" for m in members})
    block = dict.fromkeys(authors, "")
    own = {name: label for label, name in authors.items()}
    quoted = sum(bound(m) for m in members)
    high = settings.max_rounds
    low = 0 if panel.stop_rule is not None else 1 if settings.until_convergence else high
    votes = [
        Calls(
            m, low, high, user(confer.vote_prompt(question, block, own[m.name])), quoted=quoted, schema=confer.PeerVote
        )
        for m in members
    ]
    if len(members) < 2:  # a lone member holds no vote (`check_confer`)
        return RunPlan([answer])
    return RunPlan([answer, StagePlan("vote", rounds_label(1, high), votes)])


def answer_calls(panel: Panel, question: str, bound: Bound, index: int, *, sure: bool = True) -> Calls:
    """The same one answer per member in either order (`sure`: asked whatever the others
    answer); answering in turn, member `index` is shown (at the most) every answer before its own."""
    member = panel.members[index]
    low = 1 if sure else 0
    if ConferSettings.of(panel).answer_order == "parallel" or index == 0:
        return Calls(member, low, 1, user(confer.answer_prompt(question)), tools=True)
    earlier = panel.members[:index]
    block = dict.fromkeys(confer.assign_labels(panel.member_names, {m.name: "" for m in earlier}), "")
    return Calls(
        member,
        low,
        1,
        user(confer.answer_prompt(question)),
        longest=user(confer.answer_prompt(question, block)),
        quoted=sum(bound(m) for m in earlier),
        tools=True,
    )
