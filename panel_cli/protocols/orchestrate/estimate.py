"""The calls an orchestrate run makes, stage by stage, for `panel estimate` (`panel_cli.protocols.plans`)."""

from __future__ import annotations

from panel_cli.config import Panel
from panel_cli.events import PlannedTask
from panel_cli.protocols.orchestrate import engine as orchestrate
from panel_cli.protocols.orchestrate.plan import MAX_TASKS
from panel_cli.protocols.orchestrate.settings import OrchestrateSettings
from panel_cli.protocols.plans import Bound, Calls, Messages, RunPlan, StagePlan, chair_calls, rounds_label, user


def plan_calls(panel: Panel, question: str, bound: Bound) -> RunPlan:
    team = orchestrate.team_of(panel)
    attempts = OrchestrateSettings.of(panel).max_plan_attempts
    planner, workers = team.planner, team.workers
    opening = user(orchestrate.plan_prompt(question, workers))
    replan = [
        *opening,
        {"role": "assistant", "content": ""},
        *user(orchestrate.replan_prompt("the plan could not be read")),
    ]
    planned = Calls(
        planner,
        1,
        attempts,
        opening,
        quoted=bound(planner),
        longest=replan,
        schema=orchestrate.PlanShape,
    )
    stages = [StagePlan("plan", rounds_label(1, attempts), [planned])]
    # At most, a subtask builds on every other one, and its title and description take up the
    # whole plan: a loose bound, which the model's context window caps.
    others = [f"t{index}" for index in range(2, MAX_TASKS + 1)]
    widest = max(bound(w) for w in workers)
    subtasks = []
    for worker in workers:
        alone = PlannedTask(task_id="t1", worker=worker.name)
        prompt = user(orchestrate.task_prompt(question, alone, {}, {}))
        built_on = PlannedTask(task_id="t1", worker=worker.name, depends_on=others)
        longest = user(
            orchestrate.task_prompt(question, built_on, dict.fromkeys(others, ""), {task: task for task in others})
        )
        quoted = bound(planner) + len(others) * widest
        subtasks.append(Calls(worker, 0, MAX_TASKS, prompt, quoted=quoted, longest=longest, tools=True))
    stages.append(StagePlan(orchestrate.SUBTASK_STAGE, None, subtasks, pooled=(1, MAX_TASKS)))

    def records(count: int) -> Messages:
        done = [
            orchestrate.TaskRecord(
                id=f"t{index}", worker=workers[0].name, title="", depends_on=[], status="succeeded", output=""
            )
            for index in range(1, count + 1)
        ]
        return user(orchestrate.synthesis_prompt(question, done))

    stages.append(
        StagePlan("synthesis", None, chair_calls(team.chairmen, records(1), MAX_TASKS * widest, records(MAX_TASKS)))
    )
    notes = [
        f"The planner decides how many subtasks there are (1 to {MAX_TASKS}) and which worker does each: "
        "a worker's high is what it would cost if every subtask were its own."
    ]
    return RunPlan(stages, notes)
