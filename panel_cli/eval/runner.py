"""The eval runner: every question of a dataset through the baseline (one member answering
alone) and through each protocol, each a real run in the store, then graded and scored.

Each question is a real run: the protocol's own engine, the gateway and the transcript store,
tagged with the eval's id, the system and the question, so the runs can be found and replayed.
The systems run one after the other, so each one's wall time is its own; within a system at
most `concurrency` questions run at once, and the per-endpoint call limits hold across them
(one `SharedCalls` for the whole eval).

A simulated member (`demo/oracle@p`) learns the gold answer from its calls' briefs
(`voters_for`, `panel_cli.llm.brief.simulated_voters`): request metadata that the gateway gives
the demo personas in-process and never sends, so no model's messages ever carry it.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from pydantic import ValidationError

from panel_cli.config import Member, Panel, ProtocolName, weights_file
from panel_cli.errors import UserError
from panel_cli.eval.calibration import Calibration, calibrate, dataset_options, split_items
from panel_cli.eval.confidence import ItemConfidence, item_confidence
from panel_cli.eval.datasets import Dataset, EvalItem
from panel_cli.eval.grading import JudgeCall, grade, judge_answer
from panel_cli.eval.provenance import python_version, source_commit, started_at
from panel_cli.eval.results import (
    BASELINE,
    EvalResult,
    EvalSettings,
    ItemResult,
    Spent,
    SystemPlan,
    deliberation,
    gold_places,
    not_measurable,
    summarize,
    system_stopping,
    system_theory,
    under_stopping,
)
from panel_cli.eval.stopped import stop_for
from panel_cli.eval.stopping import StoppingTheory
from panel_cli.eval.theory import Theory
from panel_cli.events import BaseEvent, Subscriber
from panel_cli.llm.brief import SimulatedVoter, simulated_voters
from panel_cli.located_yaml import describe_error
from panel_cli.models.personas import oracle_accuracy
from panel_cli.protocols import registry
from panel_cli.protocols.base import Engine
from panel_cli.protocols.checks import check_panel
from panel_cli.protocols.confer.settings import ConferSettings
from panel_cli.protocols.vote.ballots import options_block
from panel_cli.protocols.vote.settings import VoteSettings
from panel_cli.redact import redact, redact_obj
from panel_cli.totals import RunTotals

if TYPE_CHECKING:
    from panel_cli.llm.gateway import Gateway
    from panel_cli.runs.execute import SharedCalls

T = TypeVar("T")
DEFAULT_PROTOCOLS: tuple[ProtocolName, ...] = ("confer", "council", "vote")
# A member alone on the calibration questions is the system `alone:NAME`.
ALONE = "alone:"
DEFAULT_CONCURRENCY = 4
JUDGE_PREFIX = "judge:"

MULTIPLE_CHOICE = "Answer with one of the options, exactly as it is written, on the first line."
SHORT_ANSWER = "Give the answer alone on the first line: a word, a number or a short phrase."


@dataclass(frozen=True)
class System:
    """What answers the questions: a protocol on the panel, or one member alone (the baseline,
    or `alone:NAME` measured for calibration). `part`: the questions it answers, the checked
    ones or those calibrated on."""

    name: str
    protocol: ProtocolName
    panel: Panel
    part: Literal["check", "calibration"] = "check"


@dataclass(frozen=True)
class CalibrationPlan:
    """`--calibrate`: every member alone on `items`, its weight over `options` options from its
    count; `held_out` are the questions `--split` keeps for the check (none without it)."""

    items: list[EvalItem]
    held_out: list[EvalItem]
    options: int
    share: float | None
    systems: list[System]


@dataclass(frozen=True)
class EvalPlan:
    """Everything checked before the first call: the systems (the baseline first), the judge
    if any, how the grader is described, and the calibration if one is asked for."""

    panel: Panel
    dataset: Dataset
    systems: list[System]
    baseline: Member
    judge: Member | None
    grader: str
    protocols: list[ProtocolName] = field(default_factory=list)
    calibration: CalibrationPlan | None = None

    @property
    def called(self) -> Panel:
        """Everyone the eval may call, for the checks made before the first call: the panel,
        and the judge when it is not a member."""
        if self.judge is None or self.judge in self.panel.members:
            return self.panel
        return self.panel.model_copy(update={"members": [*self.panel.members, self.judge]})

    @property
    def checked(self) -> list[EvalItem]:
        """The questions the systems are graded on: all of them, or those held out."""
        return self.calibration.held_out if self.calibration is not None else self.dataset.items

    def weighted(self, weights: dict[str, float]) -> EvalPlan:
        """The plan with each member's calibrated weight, for the held-out questions."""
        members = [member.model_copy(update={"weight": weights[member.name]}) for member in self.panel.members]
        panel = self.panel.model_copy(update={"members": members})
        alone = panel.member(self.baseline.name)
        return replace(self, panel=panel, baseline=alone, systems=check_systems(panel, alone, self.protocols))


@dataclass(frozen=True)
class Resumed:
    """What an eval's earlier sessions took: each system's wall time, what its runs that left no
    graded item cost, and how many sessions it has had, this one counted."""

    wall_times: Mapping[str, float] = field(default_factory=dict)
    unkept: Mapping[str, Spent] = field(default_factory=dict)
    sessions: int = 1


def resumption(stored: EvalResult) -> tuple[list[ItemResult], Resumed]:
    """What going on with a stored eval keeps: every graded item but those whose run failed
    outright (they run again, and what they cost is counted as unkept), and what its sessions
    so far took."""
    done: list[ItemResult] = []
    unkept = dict(stored.unkept)
    for item in stored.items:
        if item.error is None:
            done.append(item)
        else:
            unkept[item.system] = unkept.get(item.system, Spent()).plus(item.calls, item.tokens, item.cost)
    return done, Resumed(wall_times=dict(stored.wall_times), unkept=unkept, sessions=stored.sessions + 1)


def votes_on_options(protocol: ProtocolName) -> bool:
    return registry.spec(protocol).votes_on_options


class EvalProgress(Protocol):
    """What the command draws while an eval runs."""

    def start(self, system: str, total: int) -> None: ...

    def advance(self, result: ItemResult) -> None: ...


def parse_protocols(value: str | None, dataset: Dataset) -> list[ProtocolName]:
    """`confer,council,vote`; by default those three, without vote when some question has no
    options (a protocol whose spec votes on options needs them)."""
    if value is None:
        return [name for name in DEFAULT_PROTOCOLS if not votes_on_options(name) or dataset.multiple_choice]
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        raise UserError("--protocols needs at least one protocol, separated by commas (e.g. confer,council,vote).")
    chosen: list[ProtocolName] = []
    for name in names:
        protocol = next((known for known in registry.names() if known == name), None)
        if protocol is None:
            raise UserError(f"--protocols: '{name}' is not a protocol; choose from {', '.join(registry.names())}.")
        if protocol in chosen:
            raise UserError(f"--protocols: '{name}' is given twice.")
        chosen.append(protocol)
    for protocol in chosen:
        if votes_on_options(protocol) and not dataset.multiple_choice:
            missing = [item for item in dataset.items if not item.multiple_choice]
            raise UserError(
                f"--protocols: {protocol} votes on options, and {len(missing)} question{'s' if len(missing) != 1 else ''} of "
                f"{dataset.source} {'have' if len(missing) != 1 else 'has'} none (the first: '{missing[0].id}')."
            )
    return chosen


def parse_grader(value: str | None, panel: Panel, dataset: Dataset) -> tuple[Member | None, str]:
    """The judge (None for automatic grading) and how the grading is described. The judge is
    a member of the panel, or any model (an alias or a litellm id), which then judges without
    taking part: a judge that is also a panellist grades its own answers."""
    if value is None or value.strip() == "auto":
        kinds = {item.multiple_choice for item in dataset.items}
        automatic = (
            "option match" if kinds == {True} else "exact match" if kinds == {False} else "option or exact match"
        )
        return None, automatic
    text = value.strip()
    name = text[len(JUDGE_PREFIX) :].strip() if text.startswith(JUDGE_PREFIX) else ""
    if not name:
        raise UserError(f"--grader: '{value}' is not a grader; use auto or judge:<member or model>.")
    if name in panel.member_names:
        return panel.member(name), f"{JUDGE_PREFIX}{name}"
    try:
        return Member.model_validate({"name": name, "model": name}), f"{JUDGE_PREFIX}{name}"
    except ValidationError as exc:
        problem = describe_error(dict(exc.errors()[0]))
        members = ", ".join(panel.member_names)
        raise UserError(
            f"--grader: '{name}' is neither a member of panel '{panel.name}' ({members}) nor a model: {problem}."
        ) from None


def baseline_panel(panel: Panel, member: Member) -> Panel:
    """One member answering alone: ensemble's race with that member, one call with the answer
    prompt every protocol's members get first."""
    roles: dict[str, Any] = {"chairman": None, "critic": None, "planner": None, "leader": None, "aggregator": None}
    return panel.model_copy(update={"members": [member], "protocol": "ensemble", "mode": "race", "stop": None, **roles})


def check_systems(panel: Panel, alone: Member, protocols: Sequence[ProtocolName]) -> list[System]:
    """The baseline, then each protocol on the panel, under the panel's stopping rule when the
    protocol reads it (`stop_for`): a `confident` rule leaves confer and council asking everyone."""
    systems = [System(BASELINE, "ensemble", baseline_panel(panel, alone))]
    systems += [
        System(protocol, protocol, panel.model_copy(update={"protocol": protocol, "stop": stop_for(protocol, panel)}))
        for protocol in protocols
    ]
    return systems


def plan_eval(
    panel: Panel,
    dataset: Dataset,
    *,
    protocols: str | None,
    baseline: str | None,
    grader: str | None,
    calibrate: bool = False,
    split: float | None = None,
    seed: int = 0,
) -> EvalPlan:
    """Check the whole eval before any call: protocols, baseline, grader, the calibration, and
    each protocol's own checks on this panel (a one-member council stops here, not 60 runs later)."""
    if split is not None and not calibrate:
        raise UserError("--split holds out questions from --calibrate; give --calibrate too.")
    if calibrate and split is None and protocols is not None:
        raise UserError(
            "--calibrate without --split measures the members alone and runs no protocol, so nothing is graded "
            "on what it was calibrated on; add --split 0.5 to check the weights on held-out questions."
        )
    chosen = parse_protocols(protocols, dataset) if not calibrate or split is not None else []
    alone = panel.member(baseline, role="baseline") if baseline else panel.members[0]
    judge, described = parse_grader(grader, panel, dataset)
    systems = check_systems(panel, alone, chosen) if not calibrate or split is not None else []
    for system in systems:
        checked = system.panel
        if votes_on_options(system.protocol):
            checked = checked.model_copy(update={"options": dataset.items[0].options})
        check_panel(checked, system.protocol)
    calibration = None
    if calibrate:
        options = dataset_options(dataset, dataset.source)
        on, held_out = split_items(dataset.items, split, seed) if split is not None else (dataset.items, [])
        members = [
            System(f"{ALONE}{member.name}", "ensemble", baseline_panel(panel, member), part="calibration")
            for member in panel.members
        ]
        calibration = CalibrationPlan(items=on, held_out=held_out, options=options, share=split, systems=members)
    return EvalPlan(
        panel=panel,
        dataset=dataset,
        systems=systems,
        baseline=alone,
        judge=judge,
        grader=described,
        protocols=chosen,
        calibration=calibration,
    )


def question_text(item: EvalItem, protocol: ProtocolName) -> str:
    """The question as a run gets it. A protocol that votes on options gets them as its ballot;
    every other gets them listed in the question, and is asked to put the answer on the first line."""
    if votes_on_options(protocol):
        return item.question
    if item.options:
        return f"{item.question}\n\n{options_block(item.options)}\n\n{MULTIPLE_CHOICE}"
    return f"{item.question}\n\n{SHORT_ANSWER}"


def is_simulated(member: Member) -> bool:
    return member.model.startswith("demo/") and oracle_accuracy(member.model.removeprefix("demo/")) is not None


def voters_for(panel: Panel, item: EvalItem, key: str) -> dict[str, SimulatedVoter]:
    """What each simulated member of the panel (chairmen, critic and planner given inline
    included) is told about one question, by name; no other member is told anything."""
    options = tuple(item.options or ())
    return {
        member.name: SimulatedVoter(voter=member.name, key=key, gold=item.answer, options=options)
        for member in panel.callable_members()
        if is_simulated(member)
    }


class EvalRecorder(Protocol):
    """Where an eval is kept as it runs (`panel_cli.store.evals.EvalWriter`): its plan and
    settings first, each graded item as it is graded, the plan again when it changes (after
    calibrating, as each system finishes), and how it ended."""

    def begin(self, result: EvalResult) -> None: ...

    def update(self, result: EvalResult) -> None: ...

    def item(self, item: ItemResult) -> None: ...

    def end(self, status: str) -> None: ...


async def run_eval(
    plan: EvalPlan,
    *,
    store: Subscriber | None,
    secrets: Sequence[str],
    eval_id: str,
    seed: int = 0,
    concurrency: int = DEFAULT_CONCURRENCY,
    progress: EvalProgress | None = None,
    recorder: EvalRecorder | None = None,
    done: Sequence[ItemResult] = (),
    calibration: Calibration | None = None,
    settings: EvalSettings | None = None,
    resumed: Resumed | None = None,
) -> EvalResult:
    """Run every system on its questions, grade, and score: the members alone first when
    calibrating, then the systems with the calibrated weights. A run that fails outright is
    graded wrong and the eval goes on; Ctrl-C cancels every run in flight (each is stored as
    interrupted, and what it had cost is counted) and ends the eval, recorded as interrupted.
    `done` are the items a resumed eval already has (they are kept, not run again),
    `calibration` its weights if it had them, `resumed` what its earlier sessions took."""
    from panel_cli.protocols.base import engine_of
    from panel_cli.runs.execute import SharedCalls

    shared = SharedCalls()
    judge_gateway = shared.gateway(_discard, plan.panel, None) if plan.judge is not None else None
    kept = {(item.system, item.question_id): item for item in done}
    earlier = resumed or Resumed()
    carried = {"wall_times": dict(earlier.wall_times), "unkept": dict(earlier.unkept), "sessions": earlier.sessions}
    result = skeleton(plan, eval_id=eval_id, seed=seed, concurrency=concurrency, settings=settings)
    result = result.model_copy(update={"items": list(kept.values()), **carried})

    def keep(item: ItemResult) -> None:
        result.items.append(item)
        if recorder is not None:
            recorder.item(item)
        if progress is not None:
            progress.advance(item)

    def paid(system: str, totals: RunTotals) -> None:
        """A run cancelled in flight: its calls were paid for, and are counted."""
        spent = result.unkept.get(system, Spent())
        result.unkept[system] = spent.plus(totals.calls, totals.tokens, totals.run_cost)

    async def run_systems(systems: Sequence[System], items: Sequence[EvalItem]) -> None:
        nonlocal result
        for system in systems:
            todo = [item for item in items if (system.name, item.id) not in kept]
            if progress is not None:
                progress.start(system.name, len(todo))
            engine = engine_of(system.protocol)
            started = time.perf_counter()
            jobs = [
                functools.partial(
                    run_item, plan, system, engine, item, store, shared, judge_gateway, secrets, eval_id, seed, paid
                )
                for item in todo
            ]
            try:
                await _bounded(jobs, concurrency, keep)
            finally:
                # Stopped or not, the time it ran is the system's: a resumed eval adds the rest.
                result.wall_times[system.name] = round(
                    result.wall_times.get(system.name, 0.0) + time.perf_counter() - started, 3
                )
            if recorder is not None:
                recorder.update(result)

    status = "interrupted"
    if recorder is not None:
        recorder.begin(result)
    try:
        if plan.calibration is not None:
            if calibration is None:
                await run_systems(plan.calibration.systems, plan.calibration.items)
                calibration = measured_calibration(plan, result.items, eval_id)
            weighted = plan.weighted(calibration.weights()) if plan.systems else plan
            result = skeleton(
                weighted,
                eval_id=eval_id,
                seed=seed,
                concurrency=concurrency,
                settings=settings,
                calibration=calibration,
            ).model_copy(
                update={
                    "items": result.items,
                    "wall_times": result.wall_times,
                    "unkept": result.unkept,
                    "sessions": result.sessions,
                }
            )
            if recorder is not None:
                recorder.update(result)
            plan = weighted
        await run_systems(plan.systems, plan.checked)
        status = "finished"
    except Exception:
        status = "failed"
        raise
    finally:
        await shared.aclose()
        if recorder is not None:
            recorder.update(result)
            recorder.end(status)
    return summarize(result.model_copy(update={"status": status}))


async def run_item(
    plan: EvalPlan,
    system: System,
    engine: Engine,
    item: EvalItem,
    store: Subscriber | None,
    shared: SharedCalls,
    judge_gateway: Gateway | None,
    secrets: Sequence[str],
    eval_id: str,
    seed: int,
    paid: Callable[[str, RunTotals], None] | None = None,
) -> ItemResult:
    """One question through one system: a real run, stored and tagged, then graded, with its
    answer's confidence. Cancelled in flight, it hands what the run had cost to `paid`."""
    from panel_cli.runs.execute import new_run_id, run_panel
    from panel_cli.runs.prepare import PreparedRun, run_budget

    run_id = new_run_id()
    panel = system.panel
    if registry.spec(system.protocol).given_options:
        panel = panel.model_copy(update={"options": item.options or []})
    totals = RunTotals()

    async def record(event: BaseEvent) -> None:
        totals.update(event)
        if store is not None:
            await store(event)

    tags = {"eval": eval_id, "eval_system": system.name, "eval_question": item.id}
    started = time.perf_counter()
    answer: str | None = None
    error: str | None = None
    confidence: ItemConfidence | None = None
    try:
        prepared = PreparedRun(
            engine=engine,
            panel=panel,
            question=question_text(item, system.protocol),
            warnings=(),
            secrets=secrets,
            budget=run_budget(panel, allow_flag=False),
        )
        with simulated_voters(voters_for(panel, item, f"{seed}:{item.id}")):
            outcome = await run_panel(prepared, store=record, shared=shared, tags=tags, run_id=run_id)
        answer = None if outcome.result.final_answer is None else redact(outcome.result.final_answer, secrets)
        confidence = item_confidence(system.protocol, panel, outcome.result)
    except asyncio.CancelledError:
        if paid is not None and totals.calls:
            paid(system.name, totals)
        raise
    except Exception as exc:  # the run is stored as failed; one broken question does not end the eval
        error = redact(f"{type(exc).__name__}: {exc}", secrets)
    duration = time.perf_counter() - started
    judged: JudgeCall | None = None
    if plan.judge is not None and judge_gateway is not None:
        judged = await judge_answer(judge_gateway, plan.judge, item, answer, about=f"{system.name} {item.id}")
    call = judged.record if judged is not None else None
    if call is not None:
        call = call.model_copy(update={"prompt": redact(call.prompt, secrets), "reply": redact(call.reply, secrets)})
    return ItemResult(
        system=system.name,
        question_id=item.id,
        run_id=run_id,
        final_answer=answer,
        grade=judged.grade if judged is not None else grade(answer, item),
        calls=totals.calls,
        tokens=totals.tokens,
        cost=totals.run_cost,
        unpriced_models=list(totals.unpriced),
        duration_s=round(duration, 3),
        error=error,
        judge_tokens=judged.tokens if judged else None,
        judge_cost=judged.cost if judged else None,
        judge_call=call,
        confidence=confidence.confidence if confidence else None,
        confidence_basis=redact(confidence.basis, secrets) if confidence and confidence.basis else None,
        confidence_from=confidence.worked_out_by if confidence else None,
    )


def measured_calibration(plan: EvalPlan, items: Sequence[ItemResult], eval_id: str) -> Calibration:
    """Each member's weight from its answers alone on the calibration questions."""
    assert plan.calibration is not None
    asked = {item.id for item in plan.calibration.items}
    counts = {}
    for member in plan.panel.members:
        graded = [item for item in items if item.system == f"{ALONE}{member.name}" and item.question_id in asked]
        counts[member.name] = (member.model, sum(item.correct for item in graded), len(graded))
    return calibrate(
        counts,
        options=plan.calibration.options,
        eval_id=eval_id,
        dataset=plan.dataset.source,
        dataset_sha256=plan.dataset.sha256,
        questions=len(plan.calibration.items),
    )


def eval_settings(
    plan: EvalPlan,
    secrets: Sequence[str],
    *,
    limit: int | None = None,
    calibrate: str | None = None,
    grader: str | None = None,
    command: Sequence[str] | None = None,
) -> EvalSettings:
    """What a reader needs to repeat the eval, as the plan says it, and where its figures came
    from: when it began, panel's version and commit, Python's and litellm's versions (read
    from the installed metadata: litellm is not imported for it), the command line."""
    panel = plan.panel
    vote, confer = VoteSettings.of(panel), ConferSettings.of(panel)
    return EvalSettings(
        protocols=list(plan.protocols),
        method=vote.method,
        tie_break=vote.tie_break,
        tally=confer.tally,
        answer_order=confer.answer_order,
        weights={member.name: member.weight for member in panel.members},
        weights_from=weights_file(panel.weights) if panel.weights else None,
        models={member.name: member.model for member in plan.called.callable_members()},
        panel_version=package_version("panel-cli"),
        litellm_version=package_version("litellm"),
        python_version=python_version(),
        commit=source_commit(),
        started_at=started_at(),
        command=[redact(part, secrets) for part in command] if command is not None else None,
        limit=limit,
        split=plan.calibration.share if plan.calibration is not None else None,
        calibrate=calibrate,
        grader=grader,
        panel_config=redact_obj(panel.model_dump(mode="json", exclude={"weights"}), secrets),
    )


def package_version(name: str) -> str:
    """An installed package's version, read from its metadata (litellm is not imported for it)."""
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def skeleton(
    plan: EvalPlan,
    *,
    eval_id: str,
    seed: int,
    concurrency: int,
    settings: EvalSettings | None,
    calibration: Calibration | None = None,
) -> EvalResult:
    """The eval before its items: what runs, on what, and each system's theory line."""
    systems = [*(plan.calibration.systems if plan.calibration is not None else []), *plan.systems]
    if settings is not None and calibration is not None:
        settings = settings.model_copy(update={"weights": calibration.weights()})
    stopping = eval_stopping(plan)
    return EvalResult(
        eval_id=eval_id,
        status="running",
        dataset=plan.dataset.source,
        dataset_sha256=plan.dataset.sha256,
        questions=len(plan.dataset.items),
        panel=plan.panel.name,
        baseline=plan.baseline.name,
        grader=plan.grader,
        seed=seed,
        concurrency=concurrency,
        settings=settings,
        systems=[],
        comparisons=[],
        theory=eval_theory(plan, stopping),
        stopping=stopping,
        calibration=calibration,
        plan=[system_plan(system) for system in systems],
        asked=list(plan.dataset.items),
        items=[],
    )


def system_plan(system: System) -> SystemPlan:
    members = system.panel.callable_members()
    return SystemPlan(
        name=system.name,
        protocol=system.protocol,
        members=system.panel.member_names,
        models={member.name: member.model for member in members},
        simulated=all(member.model.startswith("demo/") for member in members),
        not_measurable=not_measurable(system.protocol, system.panel),
        deliberation=deliberation(system.panel, system.protocol)
        if registry.spec(system.protocol).deliberates
        else None,
        part=system.part,
        stop=system.panel.stop,
    )


def eval_stopping(plan: EvalPlan) -> dict[str, StoppingTheory]:
    """The exact theory of each checked system's stopping rule, on the questions it answers."""
    places = gold_places(plan.checked)
    found = {system.name: system_stopping(system.protocol, system.panel, places) for system in plan.systems}
    return {name: line for name, line in found.items() if line is not None}


def eval_theory(plan: EvalPlan, stopping: dict[str, StoppingTheory] | None = None) -> dict[str, Theory]:
    """Each system's theory line, for the systems whose voters are all simulated, on the
    questions it answers; a system under a stopping rule (its `stopping` line) has the rule's."""
    lines: dict[str, Theory] = {}
    stopping = stopping or {}
    parts = [(plan.systems, plan.checked)]
    if plan.calibration is not None:
        parts.insert(0, (plan.calibration.systems, plan.calibration.items))
    for systems, items in parts:
        places = gold_places(items)
        for system in systems:
            if not_measurable(system.protocol, system.panel) is not None:
                continue
            line = system_theory(system.protocol, system.panel, places)
            if line is not None:
                lines[system.name] = under_stopping(line, stopping.get(system.name))
    return lines


async def _bounded(
    jobs: Sequence[Callable[[], Awaitable[T]]], at_once: int, each: Callable[[T], None] | None = None
) -> list[T]:
    """Every job, at most `at_once` at a time, results in order; `each` is handed every result
    as it comes. Cancelled, it cancels the jobs and waits until each has finished cleaning up
    (its run recorded as interrupted) before it returns, so the store is not closed under a
    run still writing (a TaskGroup waits; a gather returns at the first cancelled job)."""
    slots = asyncio.Semaphore(at_once)

    async def in_turn(job: Callable[[], Awaitable[T]]) -> T:
        async with slots:
            found = await job()
        if each is not None:
            each(found)
        return found

    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(in_turn(job)) for job in jobs]
    return [task.result() for task in tasks]


async def _discard(event: BaseEvent) -> BaseEvent:
    """The judge's calls are graded, not stored as runs: their verdicts go to the eval's result."""
    return event
