"""The stage every protocol is built from: announce it, bound it by its time limit, and run
one piece of work per member (or per response, per subtask) concurrently.

A protocol module then says only what its stages ask and how it reads the replies."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

from panel_cli.config import Member
from panel_cli.events import BaseEvent, StageStarted
from panel_cli.llm.gateway import CallResult, Gateway

T = TypeVar("T")
Item = TypeVar("Item")
Emit = Callable[[BaseEvent], Awaitable[Any]]


def stage_deadline(seconds: float | None) -> float | None:
    """A stage's end as a `loop.time()` instant, which the gateway never lets a call pass."""
    return None if seconds is None else asyncio.get_running_loop().time() + seconds


@dataclass(frozen=True)
class Stage:
    """A stage under way: its name and round, as its calls report them, and its deadline."""

    name: str
    round: int | None
    deadline: float | None


async def open_stage(
    emit: Emit,
    name: str,
    *,
    members: Sequence[str],
    limit: float | None,
    round: int | None = None,
    block: dict[str, str] | None = None,
) -> Stage:
    """Announce a stage (who takes part, and the labelled block it shows them, if any) and
    start its clock."""
    await emit(StageStarted(stage=name, round=round, members=list(members), block=block or {}))
    return Stage(name, round, stage_deadline(limit))


async def gather_each(items: Iterable[Item], work: Callable[[Item], Awaitable[T]], *, at_once: int | None = None) -> list[T]:
    """`work` on every item concurrently, results in the items' order; with `at_once`, no
    more than that many run at the same time (the rest wait their turn)."""
    if at_once is None:
        return list(await asyncio.gather(*(work(item) for item in items)))
    slots = asyncio.Semaphore(at_once)

    async def in_turn(item: Item) -> T:
        async with slots:
            return await work(item)

    return list(await asyncio.gather(*(in_turn(item) for item in items)))


async def broadcast(
    gateway: Gateway,
    emit: Emit,
    members: Sequence[Member],
    messages: list[dict[str, Any]],
    *,
    stage: str,
    limit: float | None,
    round: int | None = None,
    schema: type[BaseModel] | None = None,
) -> list[CallResult]:
    """The same messages to every member at once, in one announced, time-limited stage."""
    current = await open_stage(emit, stage, members=[member.name for member in members], limit=limit, round=round)
    return await gather_each(
        members,
        lambda member: gateway.call(member, messages, stage=stage, round=round, deadline=current.deadline, schema=schema),
    )
