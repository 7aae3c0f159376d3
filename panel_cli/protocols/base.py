"""What every protocol shares: the engine signature, stage deadlines, the result envelope, and
the run around an engine (run started, then finished / failed / interrupted)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from panel_cli.config import Panel
from panel_cli.events import (
    BaseEvent,
    EventBus,
    MemberInfo,
    RunFailed,
    RunFinished,
    RunInterrupted,
    RunStarted,
    WarningRaised,
)
from panel_cli.llm.budget import BudgetReport
from panel_cli.llm.gateway import AnsweredCall, Gateway
from panel_cli.tasks import fence_tag, new_fence_tag
from panel_cli.tools.equip import equipped
from panel_cli.totals import RunTotals

if TYPE_CHECKING:
    from panel_cli.followup import FollowUp

Emit = Callable[[BaseEvent], Awaitable[Any]]

# A field a check has something to say about: its location in the panel, and the problem.
Finding = tuple[tuple[str | int, ...], str]

# SPEC: a stage of answers, votes or reviews waits at most 5 minutes unless the panel says otherwise.
DEFAULT_STAGE_TIMEOUT = 300.0

# What RunStarted's config holds beside the panel: the run's fence tag, the run a resumed run
# continues, and the tags of a run made by `panel batch` or `panel eval` (the store reads them
# as store.rows.TAGS_KEY). A resumed run rebuilds its panel from the config without them.
FENCE_TAG_KEY = "fence_tag"
RESUMED_FROM_KEY = "resumed_from"
# The run a follow-up (`--continue`) continues; the store keeps it as store.rows.PARENT_ID_KEY.
PARENT_ID_KEY = "parent_id"
TAGS_KEY = "tags"
RUN_KEYS = frozenset({FENCE_TAG_KEY, RESUMED_FROM_KEY, TAGS_KEY, PARENT_ID_KEY})


class ProtocolResult(BaseModel):
    """Every result says what the final answer is, or (when there is none) why not."""

    final_answer: str | None
    failure_reason: str | None = None

    @property
    def reached_answer(self) -> bool:
        return self.final_answer is not None


class RunEnvelope(BaseModel):
    """The fields every protocol's result starts with, in this order (SPEC §4), so a script
    reads any run the same way. `excluded_members` names each member that failed for good
    and was not called again, with the reason. `budget_exhausted`: the run's spending cap
    (`--max-cost`, `--max-calls`) refused a call and the protocol ended with what it had;
    `budget` has the caps and the spend (null for a run without a cap)."""

    run_id: str
    protocol: str
    question: str
    final_answer: str | None
    reached_answer: bool
    duration_s: float
    calls: int
    tokens: int | None
    cost: float | None
    warnings: list[str]
    excluded_members: dict[str, str]
    budget_exhausted: bool = False
    budget: BudgetReport | None = None
    parent_id: str | None = None


class RunOutcome(BaseModel):
    envelope: RunEnvelope
    result: ProtocolResult

    def payload(self) -> dict[str, Any]:
        """The envelope, then the protocol's own fields: what `--json` prints and the store keeps."""
        return {
            **self.envelope.model_dump(mode="json"),
            **self.result.model_dump(mode="json", exclude={"final_answer"}),
        }


@dataclass(frozen=True)
class ProtocolRules:
    """What a protocol reads from a panel: `panel validate` shows it, and a check warns about
    what a run would ignore.

    `fields` are the panel fields it uses beyond those every protocol shares; `timeouts` its
    stages and each one's default limit (None: no limit); `member_fields` the member fields
    beyond the common ones (`weight`); `check` raises UserError for a panel it cannot run and
    returns the fields it will ignore all the same, each as (location, problem); `settings`
    are what `panel validate` shows of a panel, as (name, value) pairs. `draw` returns the
    panel with whatever the run would otherwise draw at random (council's shuffle seed) drawn
    up front, so the run's config records it and a resumed run draws the same."""

    fields: frozenset[str]
    timeouts: Mapping[str, float | None]
    member_fields: frozenset[str] = frozenset()
    check: Callable[[Panel], list[Finding]] | None = None
    settings: Callable[[Panel], list[tuple[str, str]]] | None = None
    draw: Callable[[Panel], Panel] | None = None

    def limit(self, panel: Panel, stage: str) -> float | None:
        """A stage's time limit: the panel's, else this protocol's default."""
        return panel.timeouts.get(stage, self.timeouts[stage])

    def describe(self, panel: Panel) -> list[tuple[str, str]]:
        own = self.settings(panel) if self.settings else []
        limits = ", ".join(f"{stage} {describe_duration(self.limit(panel, stage))}" for stage in self.timeouts)
        return [*own, ("timeouts", limits)]


def yes_no(value: bool) -> str:
    return "yes" if value else "no"


def describe_duration(seconds: float | None) -> str:
    """`90s`, `5m`, `1h30m`, or `none`: durations as a panel file writes them."""
    if seconds is None:
        return "none"
    if seconds < 60 or seconds % 60:
        return f"{seconds:g}s"
    minutes = int(seconds // 60)
    hours, minutes = divmod(minutes, 60)
    return (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes or not hours else "")


@dataclass(frozen=True)
class Continuation:
    """What a resumed run takes over from the run it continues: that run's id (recorded as
    `resumed_from`), its fence tag, so every prompt comes out byte for byte as it did then
    and hashes alike (None for a run stored before tags were recorded: a fresh one is drawn),
    and its answered calls by request hash, in the order they ended, which the gateway
    answers from, each once."""

    run_id: str
    fence_tag: str | None
    answered: Mapping[str, Sequence[AnsweredCall]]


class Engine(Protocol):
    async def __call__(self, panel: Panel, question: str, gateway: Gateway, emit: Emit) -> ProtocolResult: ...


def labels_for(count: int) -> list[str]:
    """A, B, …, Z, then AA, AB, … so a panel of any size has labels."""
    out = []
    for index in range(count):
        label, n = "", index
        while True:
            label = chr(ord("A") + n % 26) + label
            n = n // 26 - 1
            if n < 0:
                break
        out.append(label)
    return out


def run_config(panel: Panel) -> dict[str, Any]:
    """The panel as RunStarted records it: the fields its file and the command line set, and
    no default. Rebuilt from this, a resumed run's panel is the same panel, down to which
    fields were set: a protocol that tells a set field from a default (supervise's
    `max_rounds`, a stage limit set to `none`) behaves as it did."""
    return panel.model_dump(mode="json", exclude_unset=True)


def drawn(panel: Panel) -> Panel:
    """The panel with what its protocol draws at random drawn now (`ProtocolRules.draw`)."""
    from panel_cli.protocols.checks import RULES

    draw = RULES[panel.protocol].draw
    return draw(panel) if draw is not None else panel


async def run_engine(
    engine: Engine,
    panel: Panel,
    question: str,
    gateway: Gateway,
    bus: EventBus,
    warnings: Sequence[str] = (),
    *,
    continuing: Continuation | None = None,
    follow_up: FollowUp | None = None,
) -> RunOutcome:
    """Run an engine inside the run envelope, so a store or view always sees how it ended.

    `warnings` found before the run (a field the protocol ignores, …) are raised first, so
    they are shown, stored and counted like the engine's own. Every quoted text of the run is
    fenced with one random tag, recorded in the run's config with any seed the protocol draws,
    so that `continuing` (a resumed run) can fence and draw exactly as the run it continues.
    `follow_up`: the earlier run this one continues (`parent_id` in its config), whose thread
    every call gets first."""
    totals = RunTotals()
    bus.subscribe(totals)
    started = time.perf_counter()
    panel = drawn(panel)
    gateway.prepare(panel.callable_members())
    tag = continuing.fence_tag if continuing is not None and continuing.fence_tag else new_fence_tag()
    config = run_config(panel) | {FENCE_TAG_KEY: tag}
    if continuing is not None:
        config[RESUMED_FROM_KEY] = continuing.run_id
    if follow_up is not None:
        config[PARENT_ID_KEY] = follow_up.parent_id
        gateway.follow(follow_up.turns)
    stamped = await bus.emit(
        RunStarted(
            protocol=panel.protocol,
            panel=panel.name,
            question=question,
            members=[MemberInfo(name=m.name, model=m.model) for m in panel.members],
            config=config,
        )
    )
    for warning in warnings:
        await bus.emit(WarningRaised(message=warning))
    try:
        with fence_tag(tag):
            async with equipped(panel, gateway, bus.emit):
                result = await engine(panel, question, gateway, bus.emit)
    except (asyncio.CancelledError, KeyboardInterrupt):
        await asyncio.shield(bus.emit(RunInterrupted()))
        raise
    except Exception as exc:
        await bus.emit(RunFailed(message=f"{type(exc).__name__}: {exc}"))
        raise
    outcome = RunOutcome(
        envelope=RunEnvelope(
            run_id=stamped.run_id,
            protocol=panel.protocol,
            question=question,
            final_answer=result.final_answer,
            reached_answer=result.reached_answer,
            duration_s=round(time.perf_counter() - started, 3),
            calls=totals.calls,
            tokens=totals.tokens,
            cost=totals.cost,
            warnings=list(totals.warnings),
            excluded_members=dict(gateway.excluded),
            budget_exhausted=gateway.budget_exhausted,
            budget=gateway.budget.report() if gateway.budget is not None else None,
            parent_id=follow_up.parent_id if follow_up is not None else None,
        ),
        result=result,
    )
    await bus.emit(
        RunFinished(final_answer=result.final_answer, reached_answer=result.reached_answer, result=outcome.payload())
    )
    return outcome
