"""orchestrate (docs/protocols.md#orchestrate): a planner splits the question into a graph of subtasks for the
panel's workers, each subtask runs as soon as its own dependencies are done, and a chairman
writes the answer from the outputs that succeeded.

Who does what: a member named as `planner` or `chairman` coordinates, and every other member
is a worker whose name is its kind (`research`, `analysis`, …). When no member is left to
work, the default workers research, analysis and writing join, on the planner's model, each
with its own system prompt. The planner is `planner`, else the chairman (itself the first
member when none is named).

The plan is model output: `plan.py` validates it, and an invalid plan goes back to the
planner with the exact error, up to `max_plan_attempts` times. Scheduling is not in waves:
every subtask is an asyncio task that waits on its dependencies' completion futures, so a
slow branch never holds up a fast one. A subtask whose dependency failed is skipped, never
called. The prompts and the team are pure and sit at the top; the engine is below.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal, TypedDict

from pydantic import BaseModel, Field

from panel_cli.config import Member, Panel
from panel_cli.events import (
    PlanAccepted,
    PlannedTask,
    PlanProposed,
    PlanRejected,
    TaskFailed,
    TaskFinished,
    TaskSkipped,
    TaskStarted,
    WarningRaised,
)
from panel_cli.llm.brief import RequestBrief, quote
from panel_cli.llm.gateway import Gateway
from panel_cli.protocols.base import (
    DEFAULT_STAGE_TIMEOUT,
    DEFAULT_SYNTHESIS_TIMEOUT,
    Emit,
    Finding,
    ProtocolResult,
    ProtocolRules,
    chairman_setting,
)
from panel_cli.protocols.orchestrate.plan import MAX_TASKS, PLAN_DECISIVE, PlanError, read_plan
from panel_cli.protocols.orchestrate.settings import OrchestrateSettings
from panel_cli.protocols.stages import (
    ChairFailure,
    failure_reason,
    gather_each,
    open_stage,
    out_of_budget,
    stage_deadline,
    synthesis_stage,
)
from panel_cli.tasks import Task, mark, render_labelled
from panel_cli.wording import plural

OUTPUT_NOUN = "Output"
# The stage of the subtasks, in events and call records; its time limit is `timeouts.task`.
SUBTASK_STAGE = "subtasks"
PREVIEW_CHARS = 200
NOTHING_TO_SYNTHESISE = "No subtask succeeded; there is nothing to synthesise"

# The default workers, each with its own system prompt; also the prompt of a member whose
# name is one of these kinds and who has no `system` of its own.
DEFAULT_WORKERS: dict[str, str] = {
    "research": (
        "You are the research worker of a team. You gather the facts a question needs: what is known, "
        "with figures, dates and sources where they matter, and what could not be confirmed. Report "
        "findings plainly; the analysis and the final writing are other workers' jobs."
    ),
    "analysis": (
        "You are the analysis worker of a team. You reason over the facts and data you are given: "
        "compare the options, find the trends and trade-offs, quantify what you can, and say where "
        "the evidence runs out. Give each conclusion with the reasoning behind it."
    ),
    "writing": (
        "You are the writing worker of a team. You turn the material you are given into clear, "
        "well-organised prose for the reader the question implies: headings where they help, every "
        "claim backed by the material, no filler."
    ),
}
# What the planner is told each default worker does.
WORKER_ROLES: dict[str, str] = {
    "research": "gathers facts, figures and sources",
    "analysis": "compares, quantifies and draws conclusions from data",
    "writing": "writes the material up as clear prose for the reader",
}
ROLE_CHARS = 160

TaskStatus = Literal["succeeded", "failed", "skipped"]


def worker_system(kind: str) -> str:
    """The system prompt of a worker that brings none of its own."""
    return DEFAULT_WORKERS.get(kind.casefold()) or (
        f"You are the {kind} worker of a team. Do the subtask you are given fully and concretely, as a "
        f"specialist in {kind}; other workers do the rest, and a coordinator combines the results."
    )


def worker_role(worker: Member) -> str:
    """One line on what a worker does, for the planner: its own system prompt's opening, else
    its kind's."""
    if worker.system and worker.system != worker_system(worker.name):
        text = " ".join(worker.system.split())
        return text if len(text) <= ROLE_CHARS else text[: ROLE_CHARS - 1].rstrip() + "…"
    return WORKER_ROLES.get(worker.name.casefold(), f"does the {worker.name} part of the work")


def default_workers(models: Sequence[Member], taken: Sequence[str] = ()) -> list[Member]:
    """research, analysis and writing, on the given models in turn, each with its own system
    prompt. A kind whose name is `taken` (by a member or a role) gets a `-worker` suffix, so
    every call is told apart by name."""
    workers = []
    for index, (kind, system) in enumerate(DEFAULT_WORKERS.items()):
        name = kind if kind not in taken else f"{kind}-worker"
        workers.append(models[index % len(models)].model_copy(update={"name": name, "system": system}))
    return workers


def _named_roles(panel: Panel) -> set[str]:
    """The members named by `planner` or `chairman`: they coordinate rather than work."""
    chairs = panel.chairman if isinstance(panel.chairman, list) else [panel.chairman]
    return {entry for entry in [panel.planner, *chairs] if isinstance(entry, str)}


@dataclass(frozen=True)
class Team:
    """Who plans, who synthesises (backups in order), and who works. `default_workers`: no
    member was left to work, so the default three joined."""

    planner: Member
    chairmen: list[Member]
    workers: list[Member]
    default_workers: bool


def team_of(panel: Panel) -> Team:
    chairmen = panel.chairmen()
    planner = panel.role("planner") or chairmen[0]
    roles = _named_roles(panel)
    workers = [
        member if member.system else member.model_copy(update={"system": worker_system(member.name)})
        for member in panel.members
        if member.name not in roles
    ]
    if workers:
        return Team(planner, chairmen, workers, default_workers=False)
    taken = [member.name for member in panel.callable_members()]
    return Team(planner, chairmen, default_workers([planner], taken), default_workers=True)


def _check_orchestrate(panel: Panel) -> list[Finding]:
    team_of(panel)
    return []


def _orchestrate_settings(panel: Panel) -> list[tuple[str, str]]:
    team = team_of(panel)
    planner = team.planner.name + (" (the chairman; none is named)" if panel.planner is None else "")
    workers = ", ".join(worker.name for worker in team.workers)
    if team.default_workers:
        workers += " (the default set, on the planner's model)"
    return [
        ("planner", planner),
        chairman_setting(panel, team.chairmen),
        ("workers", workers),
        ("max_plan_attempts", str(OrchestrateSettings.of(panel).max_plan_attempts)),
    ]


RULES = ProtocolRules(
    fields=frozenset({"planner", "chairman"}),
    # `plan` limits each plan attempt, `task` each subtask from its start, `synthesis` the chairman.
    timeouts={"plan": DEFAULT_STAGE_TIMEOUT, "task": DEFAULT_STAGE_TIMEOUT, "synthesis": DEFAULT_SYNTHESIS_TIMEOUT},
    check=_check_orchestrate,
    settings=_orchestrate_settings,
    headline=("planner", "chairman"),
)


class SubtaskShape(BaseModel):
    """One subtask, as the planner is asked to write it (read by `plan.read_plan`)."""

    task_id: str = Field(description="a short unique id such as t1")
    worker: str = Field(description="one of the workers, exactly as listed")
    title: str
    description: str = Field(description="what the worker must do, specific enough to act on")
    depends_on: list[str] = Field(description="task_ids whose outputs this subtask needs")
    priority: int = Field(description="1 starts first among subtasks ready together")


class PlanShape(BaseModel):
    """A plan's shape, for the schema the planner is given; `plan.read_plan` reads the reply."""

    decisive: ClassVar[tuple[str, ...]] = PLAN_DECISIVE

    subtasks: list[SubtaskShape]


class PlanAttempt(BaseModel):
    """One reply of the planner (or its failed call), and why it was rejected if it was."""

    attempt: int
    accepted: bool
    error: str | None = None


class TaskRecord(BaseModel):
    """A subtask as it ran. Times are Unix seconds; a skipped subtask never started, and
    `blocked_by` is the dependency that did not succeed."""

    id: str
    worker: str
    title: str
    depends_on: list[str]
    status: TaskStatus
    started_at: float | None = None
    ended_at: float | None = None
    duration_s: float | None = None
    output: str | None = None
    error: str | None = None
    blocked_by: str | None = None


class OrchestrateResult(ProtocolResult):
    """orchestrate's result (docs/result.md#orchestrate). `success`: every subtask succeeded
    and the answer was written; an answer built from some of the outputs has `success` false
    and a final answer all the same. Without a valid plan, `plan` is None and `failure_reason`
    carries the planner's last error."""

    success: bool
    planner: str
    chairman: str | None = Field(description="who wrote the final answer")
    workers: list[str]
    plan: list[PlannedTask] | None
    plan_attempts: list[PlanAttempt]
    tasks: list[TaskRecord]
    succeeded: int
    failed: int
    skipped: int
    chair_failures: list[ChairFailure] = Field(default_factory=list)


class _Planned(TypedDict):
    """What every `OrchestrateResult` of a run says, with a plan or without."""

    planner: str
    workers: list[str]
    plan_attempts: list[PlanAttempt]


# Prompts -------------------------------------------------------------------------------------


def plan_prompt(question: str, workers: Sequence[Member]) -> str:
    """The `Workers:` list holds the names alone, one a line, exactly as a plan must write them."""
    names = "\n".join(f"- {worker.name}" for worker in workers)
    roles = "\n".join(f"{worker.name}: {worker_role(worker)}" for worker in workers)
    example = (
        '{"subtasks": [{"task_id": "t1", "worker": "<a worker>", "title": "<short title>", '
        '"description": "<what to do>", "depends_on": [], "priority": 1}]}'
    )
    return mark(
        f"Question:\n{question}\n\n"
        "You plan the work of a team. Split the question into subtasks, each done by one worker, so that "
        "their outputs together answer it; a coordinator then writes the final answer from them.\n\n"
        f"Workers:\n{names}\n\nWhat each worker does:\n{roles}\n\n"
        f"Reply with one JSON object of this form, and nothing after it:\n{example}\n\n"
        "- task_id: unique, 1 to 40 letters, digits, '-', '_' or '.', such as t1.\n"
        "- worker: one of the workers above, written exactly as listed.\n"
        "- depends_on: the task_ids whose outputs the subtask needs; [] when it needs none. No cycles.\n"
        "- Subtasks run as soon as their dependencies are done, so list only the dependencies a subtask "
        "really needs: independent subtasks then run at the same time.\n"
        "- priority: among subtasks ready together, 1 starts first.\n"
        f"- At most {MAX_TASKS} subtasks; a handful is usual. Each description must be specific enough "
        "for the worker to act without asking.",
        Task.PLAN,
    )


def replan_prompt(error: str) -> str:
    return mark(
        f"That plan cannot be used: {error}.\n\n"
        "Reply with the whole corrected plan: one JSON object of the same form, and nothing after it.",
        Task.PLAN,
    )


def task_prompt(question: str, task: PlannedTask, inputs: dict[str, str], titles: dict[str, str]) -> str:
    """The worker sees the question, its own subtask and, fenced, the outputs it depends on."""
    parts = [
        f"Question:\n{question}",
        f"You are the {task.worker} worker of a team answering it. Your subtask is {task.task_id}: {task.title}",
    ]
    if task.description:
        parts.append(task.description)
    if inputs:
        listing = "\n".join(f"- {task_id}: {titles[task_id]}" for task_id in inputs)
        parts.append(
            f"The subtasks yours builds on:\n{listing}\n\nTheir outputs:\n{render_labelled(inputs, OUTPUT_NOUN)}"
        )
    parts.append("Do your subtask, and only it: the other workers do theirs, and a coordinator combines the results.")
    return mark("\n\n".join(parts), Task.ORCHESTRATE_TASK)


def synthesis_prompt(question: str, records: Sequence[TaskRecord]) -> str:
    """Only the outputs that succeeded are quoted; the others are named, so the chairman knows
    what is missing rather than guessing at it."""
    lines = []
    for record in records:
        state = record.status if record.status == "succeeded" else f"{record.status}: {record.error}"
        lines.append(f"- {record.id} ({record.worker}): {record.title} [{state}]")
    outputs = {
        record.id: record.output for record in records if record.status == "succeeded" and record.output is not None
    }
    missing = len(outputs) < len(records)
    return mark(
        f"Question:\n{question}\n\n"
        "You coordinate a team. The question was split into subtasks, each done by a worker:\n"
        + "\n".join(lines)
        + f"\n\nThe outputs of the subtasks that succeeded:\n{render_labelled(outputs, OUTPUT_NOUN)}\n\n"
        "Write the final answer to the question from these outputs: combine them into one complete, coherent "
        "answer, drop repetition and settle contradictions."
        + (
            " Some subtasks did not succeed: do not invent what they would have found; say what is missing where it matters."
            if missing
            else ""
        ),
        Task.ORCHESTRATE_SYNTHESIS,
    )


def no_plan_reason(attempts: int, error: str) -> str:
    return f"No valid plan after {plural(attempts, 'attempt')}: {error}"


# The engine ----------------------------------------------------------------------------------


async def _plan(
    panel: Panel, team: Team, question: str, gateway: Gateway, emit: Emit
) -> tuple[list[PlanAttempt], list[PlannedTask] | None]:
    """Ask the planner until a plan is valid or the attempts run out. A rejected plan stays in
    the conversation with the exact error after it; a failed call counts as an attempt too."""
    workers = [worker.name for worker in team.workers]
    opening = {"role": "user", "content": plan_prompt(question, team.workers)}
    brief = RequestBrief(task=Task.PLAN, question=question, workers=tuple(workers))
    messages = [opening]
    attempts: list[PlanAttempt] = []
    planner = team.planner
    most = OrchestrateSettings.of(panel).max_plan_attempts
    for attempt in range(1, most + 1):
        stage = await open_stage(emit, "plan", members=[planner.name], limit=RULES.limit(panel, "plan"), round=attempt)
        reply = await gateway.call(
            planner, messages, stage="plan", round=attempt, deadline=stage.deadline, schema=PlanShape, brief=brief
        )
        if not reply.ok:
            error = f"the planner's call failed ({failure_reason(reply.error_kind, reply.error)})"
            messages = [opening]
        else:
            await emit(PlanProposed(attempt=attempt, planner=planner.name))
            try:
                tasks = read_plan(reply.text, workers)
            except PlanError as exc:
                error = exc.message
                if reply.truncated:
                    cap = gateway.defaults.max_response_chars
                    error = f"the reply was longer than {cap:,} characters and was cut, so its JSON is incomplete; send a shorter plan"
                messages = [
                    opening,
                    {"role": "assistant", "content": reply.text},
                    {"role": "user", "content": replan_prompt(error)},
                ]
            else:
                attempts.append(PlanAttempt(attempt=attempt, accepted=True))
                await emit(PlanAccepted(attempt=attempt, planner=planner.name, tasks=tasks))
                return attempts, tasks
        # A planner that failed for good is not called again: its remaining attempts cannot help.
        final = attempt == most or planner.name in gateway.excluded or gateway.budget_exhausted
        attempts.append(PlanAttempt(attempt=attempt, accepted=False, error=error))
        await emit(PlanRejected(attempt=attempt, planner=planner.name, error=error, final=final))
        if final:
            break
    return attempts, None


def _record(
    task: PlannedTask,
    status: TaskStatus,
    *,
    output: str | None = None,
    error: str | None = None,
    blocked_by: str | None = None,
    started_at: float | None = None,
    duration: float | None = None,
) -> TaskRecord:
    ended_at = None if started_at is None or duration is None else started_at + duration
    return TaskRecord(
        id=task.task_id,
        worker=task.worker,
        title=task.title,
        depends_on=task.depends_on,
        status=status,
        started_at=started_at,
        ended_at=ended_at,
        duration_s=None if duration is None else round(duration, 3),
        output=output,
        error=error,
        blocked_by=blocked_by,
    )


async def _run_tasks(
    panel: Panel, team: Team, question: str, plan: list[PlannedTask], gateway: Gateway, emit: Emit
) -> list[TaskRecord]:
    """Every subtask at once, each waiting only on its own dependencies' completion futures:
    it starts the moment the last of them succeeds, or is skipped the moment one does not."""
    workers = {worker.name: worker for worker in team.workers}
    titles = {task.task_id: task.title or task.task_id for task in plan}
    limit = RULES.limit(panel, "task")
    loop = asyncio.get_running_loop()
    ended: dict[str, asyncio.Future[TaskRecord]] = {task.task_id: loop.create_future() for task in plan}
    involved = list(dict.fromkeys(task.worker for task in plan))
    await open_stage(emit, SUBTASK_STAGE, members=involved, limit=limit)

    async def blocker(task: PlannedTask) -> TaskRecord | None:
        """The first dependency to end without succeeding, or None once all have succeeded."""
        for next_done in asyncio.as_completed([ended[dep] for dep in task.depends_on]):
            done = await next_done
            if done.status != "succeeded":
                return done
        return None

    async def perform(task: PlannedTask) -> TaskRecord:
        blocked = await blocker(task)
        if blocked is not None:
            reason = f"{blocked.id} {'failed' if blocked.status == 'failed' else 'was skipped'}"
            await emit(TaskSkipped(task_id=task.task_id, worker=task.worker, blocked_by=blocked.id, reason=reason))
            return _record(task, "skipped", error=reason, blocked_by=blocked.id)
        if gateway.budget_exhausted:
            error = "not started: the budget ran out"
            await emit(TaskFailed(task_id=task.task_id, worker=task.worker, duration=0.0, kind="budget", error=error))
            return _record(task, "failed", error=error)
        inputs = {dep: ended[dep].result().output or "" for dep in task.depends_on}
        prompt = [{"role": "user", "content": task_prompt(question, task, inputs, titles)}]
        brief = RequestBrief(
            task=Task.ORCHESTRATE_TASK,
            question=question,
            worker=task.worker,
            subtask=task.task_id,
            title=task.title,
            quoted=quote(inputs),
        )
        await emit(TaskStarted(task_id=task.task_id, worker=task.worker))
        started_at, started = time.time(), time.perf_counter()
        reply = await gateway.call(
            workers[task.worker],
            prompt,
            stage=SUBTASK_STAGE,
            about=task.task_id,
            deadline=stage_deadline(limit),
            tools=True,
            brief=brief,
        )
        duration = time.perf_counter() - started
        if not reply.ok:
            error = failure_reason(reply.error_kind, reply.error)
            await emit(
                TaskFailed(
                    task_id=task.task_id,
                    worker=task.worker,
                    duration=duration,
                    kind=reply.error_kind or "failed",
                    error=error,
                )
            )
            return _record(task, "failed", error=error, started_at=started_at, duration=duration)
        output = reply.text.strip()
        await emit(
            TaskFinished(task_id=task.task_id, worker=task.worker, duration=duration, preview=output[:PREVIEW_CHARS])
        )
        return _record(task, "succeeded", output=output, started_at=started_at, duration=duration)

    async def run(task: PlannedTask) -> TaskRecord:
        try:
            done = await perform(task)
        except BaseException:
            # Dependents must not wait forever on a subtask that never ends: they are cancelled too.
            ended[task.task_id].cancel()
            raise
        ended[task.task_id].set_result(done)
        return done

    # Among subtasks that become ready together, the lower priority number starts first.
    order = sorted(range(len(plan)), key=lambda index: (plan[index].priority, index))
    finished = await gather_each([plan[index] for index in order], run)
    by_id = {done.id: done for done in finished}
    return [by_id[task.task_id] for task in plan]


def outputs_document(records: list[TaskRecord]) -> str:
    """The outputs of the subtasks that succeeded, each under its title, in plan order: what
    orchestrate has when no chairman can synthesise (the budget ran out)."""
    return "\n\n".join(
        f"### {record.title or record.id}\n\n{record.output or ''}"
        for record in records
        if record.status == "succeeded"
    )


async def orchestrate(panel: Panel, question: str, gateway: Gateway, emit: Emit) -> OrchestrateResult:
    """When the run's budget refuses a call: without a plan yet, the planner is not asked
    again and the run has no answer; during the subtasks, none starts any more (each is
    failed with kind `budget`, and its dependents skipped); the chairman then synthesises from
    the subtasks that succeeded if its call (or a backup's) still fits, else the final answer
    is their outputs, each under its title."""
    _check_orchestrate(panel)
    team = team_of(panel)
    attempts, plan = await _plan(panel, team, question, gateway, emit)
    common: _Planned = {
        "planner": team.planner.name,
        "workers": [worker.name for worker in team.workers],
        "plan_attempts": attempts,
    }
    if plan is None:
        reason = no_plan_reason(len(attempts), attempts[-1].error or "")
        return OrchestrateResult(
            final_answer=None,
            failure_reason=reason,
            success=False,
            chairman=None,
            plan=None,
            tasks=[],
            succeeded=0,
            failed=0,
            skipped=0,
            **common,
        )
    records = await _run_tasks(panel, team, question, plan, gateway, emit)
    counts = {
        status: sum(record.status == status for record in records) for status in ("succeeded", "failed", "skipped")
    }
    if not counts["succeeded"]:
        await emit(WarningRaised(message="no subtask succeeded; the synthesis stage is skipped"))
        return OrchestrateResult(
            final_answer=None,
            failure_reason=NOTHING_TO_SYNTHESISE,
            success=False,
            chairman=None,
            plan=plan,
            tasks=records,
            succeeded=counts["succeeded"],
            failed=counts["failed"],
            skipped=counts["skipped"],
            **common,
        )
    if counts["succeeded"] < len(records):
        await emit(
            WarningRaised(
                message=f"{counts['failed']} failed and {counts['skipped']} skipped of {plural(len(records), 'subtask')}; "
                f"the answer is built from the {counts['succeeded']} that succeeded"
            )
        )
    await out_of_budget(
        gateway, emit, "no further subtask was started; the chairman synthesises what succeeded, if its call fits"
    )
    outputs = {record.id: record.output or "" for record in records if record.status == "succeeded"}
    synthesis = await synthesis_stage(
        gateway,
        emit,
        team.chairmen,
        synthesis_prompt(question, records),
        limit=RULES.limit(panel, "synthesis"),
        brief=RequestBrief(task=Task.ORCHESTRATE_SYNTHESIS, question=question, quoted=quote(outputs)),
    )
    text = synthesis.text if synthesis.success else None
    if not synthesis.success and gateway.budget_exhausted:
        text = outputs_document(records)
        await emit(
            WarningRaised(message="no chairman's call fit the budget; the subtasks' outputs are the final answer")
        )
    return OrchestrateResult(
        final_answer=text,
        failure_reason=None if text is not None else synthesis.text,
        success=synthesis.success and counts["succeeded"] == len(records),
        chairman=synthesis.chairman,
        plan=plan,
        tasks=records,
        chair_failures=synthesis.failures,
        succeeded=counts["succeeded"],
        failed=counts["failed"],
        skipped=counts["skipped"],
        **common,
    )
