"""The calls a supervise run makes, round by round, for `panel estimate` (`panel_cli.protocols.plans`)."""

from __future__ import annotations

from panel_cli.config import Member, Panel
from panel_cli.protocols.plans import Bound, Calls, Messages, RunPlan, StagePlan, chair_calls, rounds_label, user
from panel_cli.protocols.supervise import engine as supervise


def plan_calls(panel: Panel, question: str, bound: Bound) -> RunPlan:
    team = supervise.plan_supervision(panel)
    workers, critic, corrections = team.workers, team.critic, team.corrections
    stages = [
        StagePlan("work", "1", [Calls(w, 1, 1, user(supervise.work_prompt(question, w)), tools=True) for w in workers])
    ]
    empty = {w.name: "" for w in workers}
    delivered = sum(bound(w) for w in workers)
    reviews = corrections + 1
    first = user(supervise.critic_prompt(question, workers, empty, 1, reviews, {}))
    # The longest critique: the last round's, with the feedback before it, asked once more
    # after a reply that could not be used.
    last = user(supervise.critic_prompt(question, workers, empty, reviews, reviews, empty if corrections else {}))
    longest = [
        *last,
        {"role": "assistant", "content": ""},
        *user(supervise.retry_prompt("its verdict could not be read")),
    ]
    quoted = delivered + (2 if corrections else 1) * bound(critic)
    critique = Calls(critic, 1, 2 * reviews, first, quoted=quoted, longest=longest, schema=supervise.CriticVerdict)
    stages.append(StagePlan("critique", rounds_label(1, reviews), [critique]))
    if corrections:

        def conversation(worker: Member, count: int) -> Messages:
            """A worker's own conversation at its `count`th correction: every earlier message kept."""
            messages = user(supervise.work_prompt(question, worker))
            for index in range(2, count + 2):
                messages += [
                    {"role": "assistant", "content": ""},
                    *user(supervise.correction_prompt(worker.name, "", index)),
                ]
            return messages

        fixes = [
            Calls(
                w,
                0,
                corrections,
                conversation(w, 1),
                quoted=corrections * (bound(w) + bound(critic)),
                longest=conversation(w, corrections),
                tools=True,
            )
            for w in workers
        ]
        stages.append(StagePlan("correction", rounds_label(2, reviews), fixes))
    approved = supervise.Review(round=1, critic=critic.name, verdict="APPROVED", attempts=1)
    rejected = supervise.Review(
        round=reviews, critic=critic.name, verdict="REJECTED", feedback=empty, rejected=list(empty), attempts=1
    )
    prompt = user(supervise.synthesis_prompt(question, workers, empty, approved, 0))
    longest = user(supervise.synthesis_prompt(question, workers, empty, rejected, corrections))
    stages.append(StagePlan("synthesis", None, chair_calls(team.chairmen, prompt, delivered + bound(critic), longest)))
    return RunPlan(stages)
