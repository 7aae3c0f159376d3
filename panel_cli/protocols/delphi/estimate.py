"""The calls a delphi run makes, round by round, for `panel estimate` (`panel_cli.protocols.plans`)."""

from __future__ import annotations

from panel_cli.config import Panel
from panel_cli.protocols.delphi import engine as delphi
from panel_cli.protocols.delphi.settings import DelphiSettings
from panel_cli.protocols.plans import (
    Bound,
    Calls,
    Messages,
    RunPlan,
    StagePlan,
    chair_calls,
    fewest_rounds,
    rounds_label,
    user,
)


def plan_calls(panel: Panel, question: str, bound: Bound) -> RunPlan:
    members = panel.members
    chairmen = delphi.check_delphi(panel)
    labels = delphi.expert_labels(panel.member_names)
    first = user(delphi.first_prompt(question, len(members)))
    stages = [StagePlan(delphi.STAGE, "1", [Calls(m, 1, 1, first, tools=True) for m in members])]
    settings = DelphiSettings.of(panel)
    fewest, most = fewest_rounds(settings.max_rounds, settings.until_convergence), settings.max_rounds
    if most > 1:
        block = dict.fromkeys(labels.values(), "")
        quoted = sum(bound(m) for m in members)
        later = [
            Calls(
                m,
                fewest - 1,
                most - 1,
                user(delphi.revision_prompt(question, 2, most, block, labels[m.name])),
                quoted=quoted,
                schema=delphi.Revision,
            )
            for m in members
        ]
        stages.append(StagePlan(delphi.STAGE, rounds_label(2, most), later))

    def transcript(count: int) -> Messages:
        rounds = [
            delphi.DelphiRound(
                index=index,
                contributions=[
                    delphi.Contribution(expert=m.name, label=labels[m.name], round=index, analysis="", success=True)
                    for m in members
                ],
                unchanged=False,
            )
            for index in range(1, count + 1)
        ]
        return user(delphi.synthesis_prompt(question, rounds, converged=count < most))

    quoted = most * sum(bound(m) for m in members)
    stages.append(StagePlan("synthesis", None, chair_calls(chairmen, transcript(fewest), quoted, transcript(most))))
    return RunPlan(stages)
