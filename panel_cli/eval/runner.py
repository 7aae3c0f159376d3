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
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pydantic import ValidationError

from panel_cli.config import Member, Panel, ProtocolName
from panel_cli.errors import UserError
from panel_cli.eval.datasets import Dataset, EvalItem
from panel_cli.eval.grading import JudgeCall, grade, judge_answer
from panel_cli.eval.results import BASELINE, EvalResult, ItemResult, compare, gold_places, score_system, system_theory
from panel_cli.eval.theory import Theory
from panel_cli.events import BaseEvent, Subscriber
from panel_cli.llm.brief import SimulatedVoter, simulated_voters
from panel_cli.llm.demo import oracle_accuracy
from panel_cli.located_yaml import describe_error
from panel_cli.protocols import registry
from panel_cli.protocols.base import Engine
from panel_cli.protocols.checks import check_panel
from panel_cli.protocols.vote.engine import options_block
from panel_cli.redact import redact
from panel_cli.totals import RunTotals

T = TypeVar("T")
DEFAULT_PROTOCOLS: tuple[ProtocolName, ...] = ("confer", "council", "vote")
# Protocols that vote on the question's options rather than answer it in words.
VOTING = frozenset({"vote", "decide"})
# Protocols told the question's options as the panel's `options`: the voting ones, and confer,
# whose log-odds weigh a vote over K = the number of options.
GIVEN_OPTIONS = VOTING | {"confer"}
DEFAULT_CONCURRENCY = 4
JUDGE_PREFIX = "judge:"

MULTIPLE_CHOICE = "Answer with one of the options, exactly as it is written, on the first line."
SHORT_ANSWER = "Give the answer alone on the first line: a word, a number or a short phrase."


@dataclass(frozen=True)
class System:
    """What answers the questions: a protocol on the panel, or the baseline member alone."""

    name: str
    protocol: ProtocolName
    panel: Panel


@dataclass(frozen=True)
class EvalPlan:
    """Everything checked before the first call: the systems (the baseline first), the judge
    if any, and how the grader is described."""

    panel: Panel
    dataset: Dataset
    systems: list[System]
    baseline: Member
    judge: Member | None
    grader: str

    @property
    def called(self) -> Panel:
        """Everyone the eval may call, for the checks made before the first call: the panel,
        and the judge when it is not a member."""
        if self.judge is None or self.judge in self.panel.members:
            return self.panel
        return self.panel.model_copy(update={"members": [*self.panel.members, self.judge]})


class EvalProgress(Protocol):
    """What the command draws while an eval runs."""

    def start(self, system: str, total: int) -> None: ...

    def advance(self, result: ItemResult) -> None: ...


def parse_protocols(value: str | None, dataset: Dataset) -> list[ProtocolName]:
    """`confer,council,vote`; by default those three, without vote when some question has no options."""
    if value is None:
        return [name for name in DEFAULT_PROTOCOLS if name not in VOTING or dataset.multiple_choice]
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
        if protocol in VOTING and not dataset.multiple_choice:
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
    return panel.model_copy(update={"members": [member], "protocol": "ensemble", "mode": "race", **roles})


def plan_eval(
    panel: Panel, dataset: Dataset, *, protocols: str | None, baseline: str | None, grader: str | None
) -> EvalPlan:
    """Check the whole eval before any call: protocols, baseline, grader, and each protocol's
    own checks on this panel (a one-member council stops here, not 60 runs later)."""
    chosen = parse_protocols(protocols, dataset)
    alone = panel.member(baseline, role="baseline") if baseline else panel.members[0]
    judge, described = parse_grader(grader, panel, dataset)
    systems = [System(BASELINE, "ensemble", baseline_panel(panel, alone))]
    for protocol in chosen:
        runs = panel.model_copy(update={"protocol": protocol})
        checked = runs.model_copy(update={"options": dataset.items[0].options}) if protocol in VOTING else runs
        check_panel(checked, protocol)
        systems.append(System(protocol, protocol, runs))
    check_panel(systems[0].panel, "ensemble")
    return EvalPlan(panel=panel, dataset=dataset, systems=systems, baseline=alone, judge=judge, grader=described)


def question_text(item: EvalItem, protocol: ProtocolName) -> str:
    """The question as a run gets it. A vote gets the options as its ballot; every other
    protocol gets them listed in the question, and is asked to put the answer on the first line."""
    if protocol in VOTING:
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


async def run_eval(
    plan: EvalPlan,
    *,
    store: Subscriber | None,
    secrets: Sequence[str],
    eval_id: str,
    seed: int = 0,
    concurrency: int = DEFAULT_CONCURRENCY,
    progress: EvalProgress | None = None,
) -> EvalResult:
    """Run every system on every question, grade, and score. A run that fails outright is
    graded wrong and the eval goes on; Ctrl-C cancels every run in flight (each is stored as
    interrupted) and ends the eval."""
    from panel_cli.protocols.registry import engine_of
    from panel_cli.runs.execute import SharedCalls, new_run_id, run_panel
    from panel_cli.runs.prepare import PreparedRun, run_budget

    shared = SharedCalls()
    judge_gateway = shared.gateway(_discard, plan.panel, None) if plan.judge is not None else None
    items = plan.dataset.items

    async def one(system: System, engine: Engine, item: EvalItem) -> ItemResult:
        run_id = new_run_id()
        panel = system.panel
        if system.protocol in GIVEN_OPTIONS:
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
        except Exception as exc:  # the run is stored as failed; one broken question does not end the eval
            error = redact(f"{type(exc).__name__}: {exc}", secrets)
        duration = time.perf_counter() - started
        judged: JudgeCall | None = None
        if plan.judge is not None and judge_gateway is not None:
            judged = await judge_answer(judge_gateway, plan.judge, item, answer, about=f"{system.name} {item.id}")
        result = ItemResult(
            system=system.name,
            question_id=item.id,
            run_id=run_id,
            final_answer=answer,
            grade=judged.grade if judged is not None else grade(answer, item),
            calls=totals.calls,
            tokens=totals.tokens,
            cost=totals.cost,
            duration_s=round(duration, 3),
            error=error,
            judge_tokens=judged.tokens if judged else None,
            judge_cost=judged.cost if judged else None,
        )
        if progress is not None:
            progress.advance(result)
        return result

    scores = []
    by_system: dict[str, list[ItemResult]] = {}
    try:
        for system in plan.systems:
            engine = engine_of(system.protocol)
            if progress is not None:
                progress.start(system.name, len(items))
            started = time.perf_counter()
            results = await _bounded([functools.partial(one, system, engine, item) for item in items], concurrency)
            wall = time.perf_counter() - started
            by_system[system.name] = results
            simulated = all(member.model.startswith("demo/") for member in system.panel.callable_members())
            scores.append(
                score_system(
                    system.name, system.protocol, system.panel.member_names, results, wall, simulated=simulated
                )
            )
    finally:
        await shared.aclose()
    baseline = by_system[BASELINE]
    comparisons = [compare(name, results, baseline) for name, results in by_system.items() if name != BASELINE]
    return EvalResult(
        eval_id=eval_id,
        dataset=plan.dataset.source,
        questions=len(items),
        panel=plan.panel.name,
        baseline=plan.baseline.name,
        grader=plan.grader,
        seed=seed,
        concurrency=concurrency,
        systems=scores,
        comparisons=comparisons,
        theory=eval_theory(plan),
        items=[result for results in by_system.values() for result in results],
    )


def eval_theory(plan: EvalPlan) -> dict[str, Theory]:
    """Each system's theory line, for the systems whose voters are all simulated."""
    places = gold_places(plan.dataset.items)
    lines = {system.name: system_theory(system.protocol, system.panel, places) for system in plan.systems}
    return {name: line for name, line in lines.items() if line is not None}


async def _bounded(jobs: Sequence[Callable[[], Awaitable[T]]], at_once: int) -> list[T]:
    """Every job, at most `at_once` at a time, results in order. Cancelled, it cancels the jobs
    and waits until each has finished cleaning up (its run recorded as interrupted) before it
    returns, so the store is not closed under a run still writing (a TaskGroup waits; a
    gather returns at the first cancelled job)."""
    slots = asyncio.Semaphore(at_once)

    async def in_turn(job: Callable[[], Awaitable[T]]) -> T:
        async with slots:
            return await job()

    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(in_turn(job)) for job in jobs]
    return [task.result() for task in tasks]


async def _discard(event: BaseEvent) -> BaseEvent:
    """The judge's calls are graded, not stored as runs: their verdicts go to the eval's result."""
    return event
