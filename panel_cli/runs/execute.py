"""The run itself: gateway, engine, event bus, and the subscribers handed in (the store, a
view), from RunStarted to the end the store records (finished, no_answer, failed or
interrupted). No printing, no exit: the command line, batch and eval each decide what to show.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from panel_cli.config import Panel
from panel_cli.events import (
    EventBus,
    MemberInfo,
    RunFailed,
    RunFinished,
    RunInterrupted,
    RunStarted,
    Subscriber,
    WarningRaised,
)
from panel_cli.protocols.base import Engine, drawn, rules_of
from panel_cli.run_keys import FENCE_TAG_KEY, GATE_KEY, PARENT_ID_KEY, RESUMED_FROM_KEY, TAGS_KEY
from panel_cli.runs.outcome import RunEnvelope, RunOutcome, ledger_fields
from panel_cli.tasks import fence_tag, new_fence_tag
from panel_cli.tools.equip import equipped
from panel_cli.totals import RunTotals

if TYPE_CHECKING:
    from panel_cli.llm.budget import Budget
    from panel_cli.llm.gateway import Emit, Gateway
    from panel_cli.protocols.gates import Gate
    from panel_cli.runs.followup import FollowUp
    from panel_cli.runs.prepare import PreparedRun
    from panel_cli.runs.resume import Continuation
    from panel_cli.view.base import View


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def run_config(
    panel: Panel,
    fence: str,
    *,
    continuing: Continuation | None = None,
    follow_up: FollowUp | None = None,
    tags: Mapping[str, str] | None = None,
    gate: Gate | None = None,
) -> dict[str, Any]:
    """The run's config as RunStarted records it, assembled here once: the fields the panel's
    file and command line set (no default), then what the run core adds (`panel_cli.run_keys`):
    its fence tag, the run it resumes, the run it follows up, its tags (given, else those of
    the run it resumes) and the outcome its gate waits for. Rebuilt from the
    panel's part, a resumed run's panel is the same panel, down to which fields were set: a
    protocol that tells a set field from a default (supervise's `max_rounds`, a stage limit set
    to `none`) behaves as it did."""
    config = panel.model_dump(mode="json", exclude_unset=True)
    config[FENCE_TAG_KEY] = fence
    if continuing is not None:
        config[RESUMED_FROM_KEY] = continuing.run_id
    if follow_up is not None:
        config[PARENT_ID_KEY] = follow_up.parent_id
    if not tags and continuing is not None:
        tags = continuing.tags  # a resumed run of a batch stays the batch's
    if tags:
        config[TAGS_KEY] = dict(tags)
    if gate is not None:
        config[GATE_KEY] = gate.outcome
    return config


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
    tags: Mapping[str, str] | None = None,
    gate: Gate | None = None,
) -> RunOutcome:
    """Run an engine inside the run envelope, so a store or view always sees how it ended.

    `warnings` found before the run (a field the protocol ignores, …) are raised first, so
    they are shown, stored and counted like the engine's own. Every quoted text of the run is
    fenced with one random tag, recorded in the run's config with any seed the protocol draws,
    so that `continuing` (a resumed run) can fence and draw exactly as the run it continues.
    `follow_up`: the earlier run this one continues, whose thread every call gets first.
    `gate`: judges the result, for the envelope's `gate` (`--gate`)."""
    totals = RunTotals()
    bus.subscribe(totals)
    started = time.perf_counter()
    panel = drawn(panel)
    gateway.prepare(panel.callable_members())
    tag = continuing.fence_tag if continuing is not None and continuing.fence_tag else new_fence_tag()
    if follow_up is not None:
        gateway.follow(follow_up.turns)
    stamped = await bus.emit(
        RunStarted(
            protocol=panel.protocol,
            panel=panel.name,
            question=question,
            members=[MemberInfo(name=m.name, model=m.model) for m in panel.members],
            config=run_config(panel, tag, continuing=continuing, follow_up=follow_up, tags=tags, gate=gate),
            headline=rules_of(panel.protocol).headline_of(panel),
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
            **ledger_fields(totals),
            warnings=list(totals.warnings),
            excluded_members=dict(gateway.excluded),
            budget_exhausted=gateway.budget_exhausted,
            budget=gateway.budget.report() if gateway.budget is not None else None,
            parent_id=follow_up.parent_id if follow_up is not None else None,
            gate=gate.judge(result) if gate is not None else None,
        ),
        result=result,
    )
    await bus.emit(
        RunFinished(final_answer=result.final_answer, reached_answer=result.reached_answer, result=outcome.payload())
    )
    return outcome


class SharedCalls:
    """What runs in flight at once (a batch) share: one semaphore per endpoint, so the
    panel's per-endpoint `concurrency` holds across every run rather than within each; and
    litellm's pooled HTTP clients, which belong to the whole process. Closing them while
    another run is mid-call would break that call, so they are closed once, by `aclose`,
    when every run is over. An endpoint's limit is sized by the first run to call it (runs
    of different panels on one endpoint share the first panel's `concurrency` for it)."""

    def __init__(self) -> None:
        self.limits: dict[str, asyncio.Semaphore] = {}
        self._last: Gateway | None = None

    def gateway(
        self,
        emit: Emit,
        panel: Panel,
        continuing: Continuation | None = None,
        budget: Budget | None = None,
        *,
        stream: bool = False,
    ) -> Gateway:
        from panel_cli.llm.gateway import Gateway

        answered = continuing.answered if continuing is not None else None
        self._last = Gateway(
            emit,
            defaults=panel.defaults,
            concurrency=panel.concurrency,
            answered=answered,
            limits=self.limits,
            budget=budget,
            stream=stream,
            idle=panel.timeouts.idle,
        )
        return self._last

    async def aclose(self) -> None:
        """Close litellm's clients (any gateway closes them all) for a later run to open fresh ones."""
        if self._last is not None:
            await self._last.aclose()


async def run_panel(
    prepared: PreparedRun,
    *,
    store: Subscriber | None,
    view: View | None = None,
    shared: SharedCalls | None = None,
    tags: Mapping[str, str] | None = None,
    run_id: str | None = None,
    stream: bool = False,
) -> RunOutcome:
    """One run, as a coroutine: no printing, no exit.

    Takes: `prepared`, the run as `panel_cli.runs.prepare.prepare_run` checked it; `store`, an
    open `TranscriptStore` (or any subscriber; None stores nothing) that the caller closes, and
    that any number of concurrent runs may share; `view`, drawn from this run's events and
    closed when it ends (None: nothing drawn); `shared`, the endpoint limits and HTTP clients
    of runs in flight at once (None: the run's own, closed when it ends); `tags`, short
    strings kept in the run's config (a batch id also goes to a column of its own); `run_id`,
    given when the caller must know it before the run ends (a new one otherwise); `stream`,
    answers stream into the `view` as they are written (only a view that `follows_text`
    draws them).

    Guarantees: the run is stored as it happens and ends in the store as finished,
    no_answer, failed (the engine raised: re-raised here) or interrupted (cancelled:
    CancelledError re-raised); its start, each stage and its end are on disk before the run
    goes on (a call's answer, then, before the next stage). A store that cannot write does
    not stop the run: the store's `close` reports it. Every event is scrubbed of the prepared
    secrets before the store or view sees it, but the outcome's result is NOT: redact what
    you print or write (`redact_obj(outcome.payload(), prepared.secrets)`)."""
    subscribers: list[Subscriber] = [subscriber for subscriber in (store, view) if subscriber is not None]
    bus = EventBus(run_id or new_run_id(), subscribers, secrets=prepared.secrets)
    calls = shared or SharedCalls()
    try:
        gateway = calls.gateway(bus.emit, prepared.panel, prepared.continuing, prepared.budget, stream=stream)
        return await run_engine(
            prepared.engine,
            prepared.panel,
            prepared.question,
            gateway,
            bus,
            prepared.warnings,
            continuing=prepared.continuing,
            follow_up=prepared.follow_up,
            tags=tags,
            gate=prepared.gate,
        )
    finally:
        if view is not None:
            view.close()
        if shared is None:
            await calls.aclose()
