"""Asking members a few at a time under a stopping rule (`stop:`, docs/protocols.md#stopping-early).

A stage asks a wave of members at once, looks at what came back, and asks the next wave only
while its protocol's rule (`panel_cli.protocols.stopping`) says the rest could still change the
outcome. The members it never asks are never called: no request, no cost, no row in the
store's `calls`. They are announced (`AskingStopped`) and listed in the result (`Stopping`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel, Field

from panel_cli.config import StopRule
from panel_cli.events import AskingStopped
from panel_cli.protocols.base import Emit
from panel_cli.protocols.stages import gather_each

Item = TypeVar("Item")
T = TypeVar("T")

# Why a stage stops asking before its rule says so: the members left would only be cut off, or
# refused by the spending cap.
CLOSED = "the stage's time limit passed"
SPENT = "the budget ran out"


class StageStop(BaseModel):
    """One stage a stopping rule ended early: who it asked (in the order asked), who it never
    asked, in how many waves, and why it stopped."""

    stage: str
    round: int | None = None
    asked: list[str]
    not_asked: list[str]
    waves: int
    reason: str


class Stopping(BaseModel):
    """What a run's stopping rule did: the rule, the calls it never made (`saved_calls`: the
    members a stage never asked, summed over its stages), and each stage it ended early."""

    rule: str
    saved_calls: int = Field(description="calls never made: members a stage did not ask, over every stage")
    stages: list[StageStop] = Field(default_factory=list)


@dataclass(frozen=True)
class Wave:
    """How many more members to ask at once (0: stop), and why."""

    size: int
    reason: str


@dataclass(frozen=True)
class Asked(Generic[Item, T]):
    """A stage asked in waves: what each member asked gave (in the order asked), who was asked,
    who was not, the waves it took and why it stopped (or why the last wave was asked)."""

    outcomes: list[T]
    asked: list[Item]
    not_asked: list[Item]
    waves: int
    reason: str


async def in_waves(
    order: Sequence[Item],
    work: Callable[[Item], Awaitable[T]],
    plan: Callable[[Sequence[T], int], Wave],
    *,
    at_once: int | None = None,
    closed: Callable[[], str | None] = lambda: None,
) -> Asked[Item, T]:
    """Ask `order` in waves: `plan` sees the outcomes so far and how many members are left, and
    says how many of the next to ask at once. Asking stops when it says 0, when everyone has
    been asked, or when `closed` gives a reason (the stage's time is up, the budget is spent)."""
    outcomes: list[T] = []
    waves = 0
    reason = ""
    while len(outcomes) < len(order):
        left = len(order) - len(outcomes)
        shut = closed()
        if shut is not None:
            reason = shut
            break
        wave = plan(outcomes, left)
        reason = wave.reason
        if wave.size <= 0:
            break
        chosen = order[len(outcomes) : len(outcomes) + min(wave.size, left)]
        outcomes += await gather_each(chosen, work, at_once=at_once)
        waves += 1
    asked = list(order[: len(outcomes)])
    if len(outcomes) == len(order):
        reason = "every member was asked"
    return Asked(outcomes=outcomes, asked=asked, not_asked=list(order[len(outcomes) :]), waves=waves, reason=reason)


async def announce(
    emit: Emit,
    rule: StopRule,
    stage: str,
    round_: int | None,
    asked: Sequence[str],
    not_asked: Sequence[str],
    waves: int,
    reason: str,
) -> StageStop | None:
    """Say that a stage stopped before asking everyone (None when it asked everyone)."""
    if not not_asked:
        return None
    await emit(
        AskingStopped(
            stage=stage,
            round=round_,
            rule=str(rule),
            asked=list(asked),
            not_asked=list(not_asked),
            waves=waves,
            reason=reason,
        )
    )
    return StageStop(
        stage=stage, round=round_, asked=list(asked), not_asked=list(not_asked), waves=waves, reason=reason
    )


def closing(deadline: float | None, spent: Callable[[], bool]) -> Callable[[], str | None]:
    """Why a stage asked in waves can ask no more: its deadline (a `loop.time()` instant) has
    passed, or the spending cap has refused a call (`spent`)."""
    loop = asyncio.get_running_loop()

    def closed() -> str | None:
        if spent():
            return SPENT
        return CLOSED if deadline is not None and loop.time() >= deadline else None

    return closed


def stopping(rule: StopRule | None, stages: Sequence[StageStop | None]) -> Stopping | None:
    """The result's account of a stopping rule: None without one."""
    if rule is None:
        return None
    kept = [stage for stage in stages if stage is not None]
    return Stopping(rule=str(rule), saved_calls=sum(len(stage.not_asked) for stage in kept), stages=kept)
