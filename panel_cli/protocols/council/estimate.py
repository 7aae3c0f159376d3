"""The calls a council run makes, stage by stage, for `panel estimate` (`panel_cli.protocols.plans`)."""

from __future__ import annotations

from panel_cli.config import Panel
from panel_cli.protocols.council import engine as council
from panel_cli.protocols.council.ranking import RankedMember
from panel_cli.protocols.council.settings import CouncilSettings
from panel_cli.protocols.plans import Bound, Calls, RunPlan, StagePlan, chair_calls, user


def plan_calls(panel: Panel, question: str, bound: Bound) -> RunPlan:
    members = panel.members
    chairmen = council.check_council(panel)
    settings = CouncilSettings.of(panel)
    answer = StagePlan(
        "answer", None, [Calls(m, 1, 1, user(council.answer_prompt(question)), tools=True) for m in members]
    )
    labels = council.assign_labels(panel.member_names, set(panel.member_names))
    by_name = {member.name: member for member in members}
    of_member = {name: label for label, name in labels.items()}
    reviews = []
    for member in members:
        shown = [label for label in labels if settings.self_review or labels[label] != member.name]
        keys = {
            label.removeprefix(f"{council.LABEL_NOUN} ") if settings.anonymize else labels[label]: "" for label in shown
        }
        prompt = user(council.review_prompt(question, keys, settings.anonymize))
        reviews.append(Calls(member, 1, 1, prompt, quoted=sum(bound(by_name[labels[label]]) for label in shown)))
    models = {member.name: member.model for member in members}
    written = [council.CouncilReview(reviewer=m.name, evaluation="", success=True) for m in members]
    aggregate = [
        RankedMember(name=m.name, label=of_member[m.name], average_rank=1.0, count=len(members)) for m in members
    ]
    synthesis = council.synthesis_prompt(question, dict.fromkeys(labels, ""), labels, models, written, aggregate)
    quoted = 2 * sum(bound(m) for m in members)
    stages = [
        answer,
        StagePlan("review", None, reviews),
        StagePlan("synthesis", None, chair_calls(chairmen, user(synthesis), quoted)),
    ]
    return RunPlan(stages)
