"""supervise (docs/protocols.md#supervise): workers deliver their own tasks, a critic approves or rejects, the
rejected workers correct their work in their own conversation, then a chairman consolidates.

Round 1: every worker gets the overall goal and its own task, and delivers. Each round the
critic reviews every deliverable and answers strict JSON: `verdict` (APPROVED or REJECTED)
and `feedback` by worker. On REJECTED, the workers it gives feedback to are called again,
in their own conversation (every earlier message kept), with that feedback: their
corrections are the next round, which the critic reviews in turn. `max_rounds` bounds the
correction rounds (2 unless the panel sets it), so the critic reviews at most
`max_rounds + 1` times. A critic reply that cannot be used is asked for once more, saying
why; a second one stops the loop with a warning, and the deliverables go to consolidation
as they are.

The critic's reply is hostile model output: a verdict other than APPROVED or REJECTED, or
a rejection with feedback for no real worker, is an invalid reply; feedback for a name that
is no worker is ignored with a warning. Every deliverable and every piece of feedback quoted
to another model is fenced (`render_labelled`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from panel_cli.config import Member, Panel
from panel_cli.errors import ConfigError, ConfigProblem, UserError
from panel_cli.events import VerdictGiven, WarningRaised
from panel_cli.llm.brief import RequestBrief, quote
from panel_cli.llm.gateway import CallResult, Gateway
from panel_cli.located_yaml import field_name
from panel_cli.protocols.base import (
    DEFAULT_STAGE_TIMEOUT,
    DEFAULT_SYNTHESIS_TIMEOUT,
    Emit,
    Finding,
    ProtocolResult,
    ProtocolRules,
    chairman_setting,
)
from panel_cli.protocols.stages import (
    Synthesis,
    failure_reason,
    gather_each,
    open_stage,
    out_of_budget,
    synthesis_stage,
)
from panel_cli.protocols.supervise.settings import SuperviseSettings
from panel_cli.tasks import Task, mark, render_labelled

DELIVERABLE = "Deliverable"
FEEDBACK = "Feedback for"
NO_DELIVERABLES = "Supervision failed: no worker delivered anything"

Verdict = Literal["APPROVED", "REJECTED"]
# How the review loop ended: the critic approved; it still rejected after the last
# correction round; it gave no valid verdict twice; there was nothing to review; or the
# run's budget refused a call before the critic was done.
LoopEnd = Literal["approved", "round_cap", "no_verdict", "no_deliverables", "budget"]


class CriticVerdict(BaseModel):
    """The strict JSON asked of the critic. The verdict's case and spaces are forgiven; any
    other word is not. A reply holding a second object with another verdict (a worker's
    `{"verdict": "APPROVED"}`, quoted) holds two verdicts (`panel_cli.llm.structured`)."""

    decisive: ClassVar[tuple[str, ...]] = ("verdict",)

    verdict: Verdict = Field(description="APPROVED if every deliverable can be consolidated as it is, else REJECTED")
    feedback: dict[str, str] = Field(
        default_factory=dict, description="worker name -> what that worker must fix; only the workers to correct"
    )

    @field_validator("verdict", mode="before")
    @classmethod
    def _plain_word(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value


class Delivery(BaseModel):
    """What one worker delivered in one round (1: its task; later: a correction), or why not."""

    worker: str
    round: int
    text: str | None = None
    success: bool
    error_kind: str | None = None
    error: str | None = None
    duration: float = 0.0


class Review(BaseModel):
    """The critic's reading of one round. `verdict` is None when neither of its two replies
    could be used (`problem` says why). `feedback` holds real workers only; `ignored` the
    names it gave feedback to that are no worker."""

    round: int
    critic: str
    verdict: Verdict | None
    feedback: dict[str, str] = Field(default_factory=dict)
    rejected: list[str] = Field(default_factory=list)
    ignored: list[str] = Field(default_factory=list)
    attempts: int
    problem: str | None = None


class SuperviseRound(BaseModel):
    """One round: the deliveries made in it (every worker in round 1, the rejected ones
    after) and the critic's review of the deliverables as they then stood."""

    index: int
    deliveries: list[Delivery]
    review: Review | None = None


class WorkerOutcome(BaseModel):
    """A worker at the end: its last deliverable (None if it never delivered), how many
    corrections it was asked for, and whether the critic's last review accepted it (nobody,
    when that review gave no usable verdict)."""

    name: str
    model: str
    task: str
    deliverable: str | None
    corrections: int
    approved: bool


class SuperviseResult(ProtocolResult):
    loop_end: LoopEnd
    approved: bool = Field(description="the critic approved every deliverable")
    critic: str
    workers: list[WorkerOutcome]
    rounds: list[SuperviseRound]
    correction_rounds: int = Field(description="correction rounds run")
    max_rounds: int = Field(description="the most correction rounds allowed")
    synthesis: Synthesis | None


@dataclass(frozen=True)
class Supervision:
    """Who does what in a supervised run, settled before any call."""

    workers: list[Member]
    critic: Member
    chairmen: list[Member]
    corrections: int


def correction_rounds(panel: Panel) -> int:
    """`max_rounds`: supervise's own, whose default (2) is not confer's and delphi's (3)."""
    return SuperviseSettings.of(panel).max_rounds


def _located(panel: Panel, problems: list[Finding]) -> UserError:
    """Problems at fields of the panel: located in its file, or named by field without one."""
    if panel.source_file is None:
        return UserError("\n".join(f"{field_name(loc)}: {problem}." for loc, problem in problems))
    return ConfigError.listing(
        [ConfigProblem(panel.source_file, panel.line_of(loc), field_name(loc), problem) for loc, problem in problems]
    )


def plan_supervision(panel: Panel) -> Supervision:
    """The workers are the members with a task. A member without one is the critic or a
    chairman named by the panel, or a mistake, reported at that member."""
    critic = panel.role("critic")
    if critic is None:
        raise UserError(
            f"A supervised panel needs a critic; panel '{panel.name}' has none (critic: a member's name, or an inline member)."
        )
    chairmen = panel.chairmen() if panel.chairman is not None else []
    roles = {critic.name, *(chair.name for chair in chairmen)}
    problems: list[Finding] = [
        (
            ("members", index),
            f"'{member.name}' has no task; give every worker a task (or make it the critic or the chairman)",
        )
        for index, member in enumerate(panel.members)
        if not (member.task or "").strip() and member.name not in roles
    ]
    if problems:
        raise _located(panel, problems)
    workers = [member for member in panel.members if (member.task or "").strip()]
    if not workers:
        raise UserError(f"A supervised panel needs at least one worker with a task; panel '{panel.name}' has none.")
    return Supervision(
        workers=workers, critic=critic, chairmen=chairmen or panel.chairmen(), corrections=correction_rounds(panel)
    )


def _supervise_findings(panel: Panel) -> list[Finding]:
    plan = plan_supervision(panel)
    if any(worker.name == plan.critic.name for worker in plan.workers):
        return [(("critic",), f"'{plan.critic.name}' is also a worker, so it reviews its own deliverable")]
    return []


def _supervise_settings(panel: Panel) -> list[tuple[str, str]]:
    plan = plan_supervision(panel)
    critic = plan.critic.name + (" (inline)" if plan.critic not in panel.members else "")
    unset = "" if "max_rounds" in panel.model_fields_set else " (the default)"
    return [
        ("workers", ", ".join(worker.name for worker in plan.workers)),
        ("critic", critic),
        chairman_setting(panel, plan.chairmen),
        ("max_rounds", f"{plan.corrections} correction round{'s' if plan.corrections != 1 else ''}{unset}"),
    ]


RULES = ProtocolRules(
    fields=frozenset({"critic", "chairman"}),
    # `task` limits each worker's delivery or correction, `review` the critic, `synthesis` the chairman.
    timeouts={"task": DEFAULT_STAGE_TIMEOUT, "review": DEFAULT_STAGE_TIMEOUT, "synthesis": DEFAULT_SYNTHESIS_TIMEOUT},
    member_fields=frozenset({"task"}),
    check=_supervise_findings,
    settings=_supervise_settings,
    headline=("critic", "chairman"),
)


# Prompts -------------------------------------------------------------------------------------


def work_prompt(goal: str, worker: Member) -> str:
    return mark(
        f"Question:\n{goal}\n\n"
        f"You are the worker '{worker.name}' in a supervised team working towards the goal above. Other workers handle "
        "other parts of it, and a critic will review your deliverable.\n\n"
        f"Your task:\n{(worker.task or '').strip()}\n\n"
        "Deliver your part of the work in full.",
        Task.SUPERVISE_WORK,
    )


def correction_prompt(worker: str, feedback: str, round_index: int) -> str:
    """Sent after the worker's own earlier messages, so it corrects its own deliverable."""
    return mark(
        f"The critic reviewed your deliverable and asks for a correction (round {round_index}). Its feedback follows.\n\n"
        f"{render_labelled({worker: feedback}, FEEDBACK)}\n\n"
        "Revise your deliverable to address the feedback, and reply with the complete corrected deliverable.",
        Task.SUPERVISE_CORRECTION,
    )


def _tasks(workers: list[Member]) -> str:
    return "\n".join(f"- {worker.name}: {' '.join((worker.task or '').split())}" for worker in workers)


def _missing(workers: list[Member], deliverables: dict[str, str]) -> str:
    absent = [worker.name for worker in workers if worker.name not in deliverables]
    return f"\n\nNo deliverable from: {', '.join(absent)} (the call failed)." if absent else ""


def critic_prompt(
    goal: str,
    workers: list[Member],
    deliverables: dict[str, str],
    round_index: int,
    last_round: int,
    previous: dict[str, str],
) -> str:
    """Every deliverable under its worker's name, the tasks, and (after round 1) the feedback
    the critic gave last time, so it can check that its points were addressed."""
    earlier = (
        f"\n\nYour feedback in round {round_index - 1}, which the rejected workers have now answered:\n\n{render_labelled(previous, FEEDBACK)}"
        if previous
        else ""
    )
    names = "\n".join(f"- {worker.name}" for worker in workers)
    return mark(
        f"Question:\n{goal}\n\n"
        "You are the critic of a supervised team: each worker was given one part of the goal above. Review every "
        "deliverable against its worker's task and the goal.\n\n"
        f"Review round {round_index} of at most {last_round}.\n\n"
        f"Workers:\n{names}\n\nTasks:\n{_tasks(workers)}\n\n"
        f"{render_labelled(deliverables, DELIVERABLE)}{_missing(workers, deliverables)}{earlier}\n\n"
        'Reply with one JSON object: {"verdict": "APPROVED" or "REJECTED", "feedback": {"<worker>": "<what to fix>"}}. '
        "APPROVED when every deliverable can be consolidated as it is. REJECTED when at least one must be corrected: "
        "then give feedback to each worker that must correct its work, under its exact name, and only to those; a worker "
        "without feedback is accepted as it is.",
        Task.CRITIC,
    )


def retry_prompt(problem: str) -> str:
    return mark(
        f"Your reply could not be used: {problem}. Reply again with only the JSON object described above, "
        'with "verdict" APPROVED or REJECTED and "feedback" for the workers to correct, by their exact names.',
        Task.CRITIC,
    )


def synthesis_prompt(
    goal: str, workers: list[Member], deliverables: dict[str, str], review: Review | None, corrections: int
) -> str:
    """The deliverables as they stand, and how far the critic got with them, so the chairman
    knows which parts were not approved and why."""
    outstanding: dict[str, str]
    if review is None or review.verdict is None:
        status, outstanding = "The critic gave no valid verdict, so the deliverables come as they are.", {}
    elif review.verdict == "APPROVED":
        status, outstanding = f"The critic approved them in round {review.round}.", {}
    else:
        status = f"The critic still rejected some after {corrections} correction round{'s' if corrections != 1 else ''}; its last feedback follows the deliverables."
        outstanding = {name: review.feedback[name] for name in review.rejected}
    unresolved = (
        f"\n\nThe critic's last feedback, not yet addressed:\n\n{render_labelled(outstanding, FEEDBACK)}"
        if outstanding
        else ""
    )
    return mark(
        f"Question:\n{goal}\n\n"
        f"You consolidate the work of a supervised team: each worker had one part of the goal above. {status}\n\n"
        f"Tasks:\n{_tasks(workers)}\n\n"
        f"{render_labelled(deliverables, DELIVERABLE)}{_missing(workers, deliverables)}{unresolved}\n\n"
        "Merge the deliverables into one complete, coherent answer to the goal. Keep what each worker got right, "
        "fix what the critic found wrong, and say plainly what is still missing.",
        Task.SUPERVISE_SYNTHESIS,
    )


# Reading the critic ---------------------------------------------------------------------------


@dataclass
class Reading:
    """One critic reply as read: the verdict and the real workers' feedback, or `problem`."""

    verdict: Verdict | None = None
    feedback: dict[str, str] = field(default_factory=dict)
    rejected: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    problem: str | None = None


def quoted_names(names: list[str], limit: int = 5, width: int = 40) -> str:
    """`'ghost', 'spirit'`: names a model invented, few and short, so a padded reply makes a
    short warning."""
    shown = ", ".join(repr(name if len(name) <= width else name[: width - 1] + "…") for name in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def match_worker(name: str, workers: list[str]) -> str | None:
    """The worker a feedback key names: exactly, else by case alone when that is unambiguous."""
    if name in workers:
        return name
    folded = [worker for worker in workers if worker.casefold() == name.strip().casefold()]
    return folded[0] if len(folded) == 1 else None


def read_verdict(parsed: dict[str, Any] | None, parse_error: str | None, workers: list[str]) -> Reading:
    """Read a verdict defensively. Feedback under a name that is no worker is set aside (and
    reported); blank feedback counts as none. REJECTED with no feedback for any real worker
    says nobody to correct, so it is no usable verdict."""
    if parsed is None:
        return Reading(problem=parse_error or "no JSON object in the reply")
    try:
        verdict = CriticVerdict.model_validate(parsed)
    except ValidationError as exc:
        first = exc.errors()[0]
        return Reading(problem=f"invalid {'.'.join(str(part) for part in first['loc']) or 'object'}: {first['msg']}")
    feedback: dict[str, str] = {}
    ignored: list[str] = []
    for name, text in verdict.feedback.items():
        worker = match_worker(name, workers)
        if worker is None:
            ignored.append(name)
        elif text.strip():
            feedback[worker] = text.strip()
    if verdict.verdict == "APPROVED":
        return Reading(verdict="APPROVED", feedback=feedback, ignored=ignored)
    rejected = [worker for worker in workers if worker in feedback]
    if not rejected:
        named = f" (it named only {quoted_names(ignored)})" if ignored else ""
        return Reading(
            ignored=ignored,
            problem=f"REJECTED with no feedback for any worker{named}, so no worker knows what to correct",
        )
    return Reading(verdict="REJECTED", feedback=feedback, rejected=rejected, ignored=ignored)


# The engine ---------------------------------------------------------------------------------------


@dataclass
class _Worker:
    """A worker's conversation as it happened (every message sent, every reply received) and
    its current deliverable."""

    member: Member
    messages: list[dict[str, Any]] = field(default_factory=list)
    deliverable: str | None = None
    corrections: int = 0


async def _deliver(
    gateway: Gateway,
    emit: Emit,
    worker: _Worker,
    prompt: str,
    brief: RequestBrief,
    stage: str,
    round_index: int,
    deadline: float | None,
) -> Delivery:
    """One call in the worker's own conversation; a reply becomes its deliverable."""
    worker.messages.append({"role": "user", "content": prompt})
    reply = await gateway.call(
        worker.member,
        list(worker.messages),
        stage=stage,
        round=round_index,
        deadline=deadline,
        tools=True,
        brief=brief,
    )
    name = worker.member.name
    if not reply.ok:
        if not reply.skipped:
            reason = failure_reason(reply.error_kind, reply.error)
            kept = "; its previous deliverable stands" if worker.deliverable is not None else ""
            await emit(WarningRaised(message=f"delivered nothing in round {round_index} ({reason}){kept}", member=name))
        return Delivery(
            worker=name,
            round=round_index,
            success=False,
            error_kind=reply.error_kind,
            error=reply.error,
            duration=reply.latency,
        )
    worker.messages.append({"role": "assistant", "content": reply.text})
    worker.deliverable = reply.text.strip()
    return Delivery(worker=name, round=round_index, text=worker.deliverable, success=True, duration=reply.latency)


def _reason(reply: CallResult) -> str:
    """Why a critic reply gave no verdict: the call failed, or its text held no valid object."""
    if not reply.ok:
        return failure_reason(reply.error_kind, reply.error)
    return reply.parse_error or "no JSON object in the reply"


async def _review(
    panel: Panel,
    plan: Supervision,
    goal: str,
    workers: list[_Worker],
    round_index: int,
    previous: dict[str, str],
    gateway: Gateway,
    emit: Emit,
) -> Review:
    """The critic's verdict on the deliverables as they stand; an unusable reply is asked for
    once more, in the same conversation, with what was wrong with it."""
    critic = plan.critic
    names = [worker.member.name for worker in workers]
    deliverables = {worker.member.name: worker.deliverable for worker in workers if worker.deliverable is not None}
    stage = await open_stage(
        emit,
        "critique",
        members=[critic.name],
        limit=RULES.limit(panel, "review"),
        round=round_index,
        block=deliverables,
    )
    prompt = critic_prompt(goal, plan.workers, deliverables, round_index, plan.corrections + 1, previous)
    brief = RequestBrief(task=Task.CRITIC, question=goal, quoted=quote(deliverables), round=round_index)
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    reading = Reading()
    attempts = 0
    while attempts < 2:
        attempts += 1
        reply = await gateway.call(
            critic,
            messages,
            stage="critique",
            round=round_index,
            deadline=stage.deadline,
            schema=CriticVerdict,
            brief=brief,
        )
        reading = read_verdict(reply.parsed, _reason(reply), names) if reply.ok else Reading(problem=_reason(reply))
        if reading.ignored:
            unknown = quoted_names(reading.ignored)
            await emit(
                WarningRaised(
                    message=f"gave feedback to {unknown}, not a worker of this panel; ignored", member=critic.name
                )
            )
        if reading.problem is None or attempts == 2 or critic.name in gateway.excluded or gateway.budget_exhausted:
            break
        await emit(
            WarningRaised(
                message=f"its verdict could not be used ({reading.problem}); asked once more", member=critic.name
            )
        )
        if reply.ok:
            messages += [
                {"role": "assistant", "content": reply.text},
                {"role": "user", "content": retry_prompt(reading.problem)},
            ]
    review = Review(
        round=round_index,
        critic=critic.name,
        verdict=reading.verdict,
        feedback=reading.feedback,
        rejected=reading.rejected,
        ignored=reading.ignored,
        attempts=attempts,
        problem=reading.problem,
    )
    await emit(
        VerdictGiven(
            round=round_index,
            critic=critic.name,
            workers=names,
            verdict=review.verdict,
            feedback=review.feedback,
            rejected=review.rejected,
            problem=review.problem,
        )
    )
    return review


async def _correct(
    gateway: Gateway,
    emit: Emit,
    goal: str,
    workers: list[_Worker],
    feedback: dict[str, str],
    round_index: int,
    limit: float | None,
) -> list[Delivery]:
    """The rejected workers correct their work at once, each in its own conversation."""
    stage = await open_stage(
        emit, "correction", members=[worker.member.name for worker in workers], limit=limit, round=round_index
    )

    async def correct(worker: _Worker) -> Delivery:
        worker.corrections += 1
        asked = feedback[worker.member.name]
        prompt = correction_prompt(worker.member.name, asked, round_index)
        brief = RequestBrief(
            task=Task.SUPERVISE_CORRECTION,
            question=goal,
            assignment=(worker.member.task or "").strip(),
            feedback=asked,
        )
        return await _deliver(gateway, emit, worker, prompt, brief, "correction", round_index, stage.deadline)

    return await gather_each(workers, correct)


async def _review_loop(
    panel: Panel,
    plan: Supervision,
    goal: str,
    workers: list[_Worker],
    rounds: list[SuperviseRound],
    gateway: Gateway,
    emit: Emit,
) -> tuple[LoopEnd, Review | None, int]:
    """Review, correct, review again, until the critic approves, the correction rounds run
    out, or the critic gives no usable verdict. Returns how it ended, the last review and
    the correction rounds run; each round's deliveries and review are added to `rounds`."""
    by_name = {worker.member.name: worker for worker in workers}
    review: Review | None = None
    corrections = 0
    ending = "the deliverables go to consolidation as they stand"
    while True:
        if await out_of_budget(gateway, emit, ending):
            return "budget", review, corrections
        index = rounds[-1].index
        previous = {} if review is None else {name: review.feedback[name] for name in review.rejected}
        review = await _review(panel, plan, goal, workers, index, previous, gateway, emit)
        rounds[-1].review = review
        if review.verdict is None and await out_of_budget(gateway, emit, ending):
            return "budget", review, corrections
        if review.verdict is None:
            await emit(
                WarningRaised(
                    message=f"the critic gave no usable verdict in round {index}, twice ({review.problem}); "
                    "the deliverables go to consolidation as they are",
                    member=plan.critic.name,
                )
            )
            return "no_verdict", review, corrections
        if review.verdict == "APPROVED":
            return "approved", review, corrections
        if corrections == plan.corrections:
            plural = "s" if corrections != 1 else ""
            await emit(
                WarningRaised(
                    message=f"the critic still rejects {', '.join(review.rejected)} after {corrections} correction round{plural}; "
                    "the deliverables go to consolidation as they are"
                )
            )
            return "round_cap", review, corrections
        corrections += 1
        rejected = [by_name[name] for name in review.rejected]
        fixes = await _correct(gateway, emit, goal, rejected, review.feedback, index + 1, RULES.limit(panel, "task"))
        rounds.append(SuperviseRound(index=index + 1, deliveries=fixes))


def deliverables_document(workers: list[_Worker]) -> str | None:
    """Every deliverable under its worker's name: what supervise has when no chairman can
    consolidate (the budget ran out), or None when no worker delivered."""
    given = [worker for worker in workers if worker.deliverable is not None]
    return "\n\n".join(f"### {worker.member.name}\n\n{worker.deliverable}" for worker in given) or None


async def supervise(panel: Panel, question: str, gateway: Gateway, emit: Emit) -> SuperviseResult:
    """When the run's budget refuses a call, the review loop ends (`loop_end: budget`) and
    the deliverables as they stand go to the chairman, if its call (or a backup's) still
    fits; else the final answer is every deliverable under its worker's name."""
    plan = plan_supervision(panel)
    workers = [_Worker(member) for member in plan.workers]

    stage = await open_stage(
        emit, "work", members=[worker.member.name for worker in workers], limit=RULES.limit(panel, "task"), round=1
    )
    deliveries = await gather_each(
        workers,
        lambda worker: _deliver(
            gateway,
            emit,
            worker,
            work_prompt(question, worker.member),
            RequestBrief(task=Task.SUPERVISE_WORK, question=question, assignment=(worker.member.task or "").strip()),
            "work",
            1,
            stage.deadline,
        ),
    )
    rounds = [SuperviseRound(index=1, deliveries=deliveries)]
    loop_end: LoopEnd = "no_deliverables"
    review: Review | None = None
    corrections = 0
    if any(delivery.success for delivery in deliveries):
        loop_end, review, corrections = await _review_loop(panel, plan, question, workers, rounds, gateway, emit)
    else:
        await emit(WarningRaised(message="no worker delivered anything; the critic and the synthesis are skipped"))

    deliverables = {worker.member.name: worker.deliverable for worker in workers if worker.deliverable is not None}
    synthesis: Synthesis | None = None
    if deliverables:
        prompt = synthesis_prompt(question, plan.workers, deliverables, review, corrections)
        brief = RequestBrief(task=Task.SUPERVISE_SYNTHESIS, question=question, quoted=quote(deliverables))
        synthesis = await synthesis_stage(
            gateway, emit, plan.chairmen, prompt, limit=RULES.limit(panel, "synthesis"), brief=brief
        )
    answer = synthesis.text if synthesis is not None and synthesis.success else None
    if synthesis is not None and not synthesis.success and gateway.budget_exhausted:
        answer = deliverables_document(workers)
        await emit(
            WarningRaised(
                message="no chairman's call fit the budget; the deliverables as they stand are the final answer"
            )
        )
    accepted = _accepted(review, [worker.member.name for worker in workers])
    return SuperviseResult(
        final_answer=answer,
        failure_reason=None if answer else NO_DELIVERABLES if synthesis is None else synthesis.text,
        loop_end=loop_end,
        approved=loop_end == "approved",
        critic=plan.critic.name,
        workers=[
            WorkerOutcome(
                name=worker.member.name,
                model=worker.member.model,
                task=(worker.member.task or "").strip(),
                deliverable=worker.deliverable,
                corrections=worker.corrections,
                approved=worker.deliverable is not None and worker.member.name in accepted,
            )
            for worker in workers
        ],
        rounds=rounds,
        correction_rounds=corrections,
        max_rounds=plan.corrections,
        synthesis=synthesis,
    )


def _accepted(review: Review | None, names: list[str]) -> set[str]:
    """The workers the critic's last review let through: everyone on APPROVED, those it gave
    no feedback to on REJECTED, nobody without a verdict."""
    if review is None or review.verdict is None:
        return set()
    return set(names) - set(review.rejected)
