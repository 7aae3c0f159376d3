"""The calls an ensemble run makes, stage by stage, for `panel estimate` (`panel_cli.protocols.plans`)."""

from __future__ import annotations

from panel_cli.config import Panel
from panel_cli.protocols.council import engine as council
from panel_cli.protocols.ensemble import engine as ensemble
from panel_cli.protocols.plans import Bound, Calls, RunPlan, StagePlan, user


def plan_calls(panel: Panel, question: str, bound: Bound) -> RunPlan:
    members = panel.members
    chosen = ensemble.plan_ensemble(panel)
    # majority under `stop: decided` asks every member but the last for sure, the last only if it matters.
    sure = len(members) - 1 if chosen.mode == "majority" and panel.stop_rule is not None and len(members) > 1 else None
    prompt = user(council.answer_prompt(question))
    stages = [
        StagePlan(
            "answer",
            None,
            [
                Calls(m, 0 if sure is not None and i >= sure else 1, 1, prompt, tools=True)
                for i, m in enumerate(members)
            ],
        )
    ]
    notes = []
    if chosen.mode == "race":
        notes.append(
            "race: every member is asked at once; the calls cancelled when the first answers may still be billed in part."
        )
    if chosen.judge is not None:
        prompt = user(ensemble.judge_prompt(question, ""))
        judged = Calls(
            chosen.judge,
            len(members),
            len(members),
            prompt,
            quoted=max(bound(m) for m in members),
            schema=ensemble.JudgeScore,
        )
        stages.append(StagePlan("judge", None, [judged]))
    if chosen.aggregator is not None:
        prompt = user(ensemble.aggregate_prompt(question, [""] * len(members)))
        written = Calls(chosen.aggregator, 1, 1, prompt, quoted=sum(bound(m) for m in members), tools=True)
        stages.append(StagePlan("synthesis", None, [written]))
    return RunPlan(stages, notes)
