"""A stored run drawn again: its events, read back from the store, fed to the view a live run
uses. `panel history show` draws them all at once as the protocol's tables; `panel history
replay` plays them with their stored timing. Nothing here calls a model or touches the network:
the events hold everything a view draws."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from itertools import pairwise
from typing import Any, TextIO

from pydantic import ValidationError
from rich.console import Console

from panel_cli.events import BaseEvent, parse_event
from panel_cli.view.base import View
from panel_cli.view.live import LiveView
from panel_cli.view.plain import PlainView

Sleep = Callable[[float], Awaitable[Any]]


def stored_events(payloads: Iterable[dict[str, Any]]) -> list[BaseEvent]:
    """The events a live run emitted, rebuilt from their stored payloads. One this version of
    panel cannot read (a type a newer panel wrote) is left out, as a live view passes over an
    event it does not know: the rest of the run still draws."""
    events = []
    for payload in payloads:
        try:
            events.append(parse_event(payload))
        except ValidationError:
            continue
    return events


def pauses(events: Sequence[BaseEvent], speed: float | None) -> list[float]:
    """The wait before each event: the stored time since the one before, divided by `speed`
    (None: no wait at all). A clock that stepped back waits nothing rather than failing."""
    if speed is None:
        return [0.0] * len(events)
    return [0.0, *(max(0.0, current.ts - previous.ts) / speed for previous, current in pairwise(events))][: len(events)]


async def play(view: View, events: Sequence[BaseEvent], *, speed: float | None = None, sleep: Sleep = asyncio.sleep) -> None:
    """Feed `events` to `view` with their pauses. The view is closed however this ends, so
    Ctrl-C in the middle of a replay leaves the terminal as it found it (cursor shown, the
    stage in progress printed)."""
    try:
        for wait, event in zip(pauses(events, speed), events, strict=True):
            if wait > 0:
                await sleep(wait)
            await view(event)
    finally:
        view.close()


def draw(console: Console, events: Sequence[BaseEvent]) -> None:
    """Every stage of a run printed once as the protocol's own tables, then the final answer
    and its summary: the live view with no live area and no header (the caller prints its own)."""
    asyncio.run(play(LiveView(console, animate=False, header=False), events))


def draw_plain(stream: TextIO, events: Sequence[BaseEvent]) -> None:
    """The same run as the plain lines a run off a terminal writes."""
    asyncio.run(play(PlainView(stream), events))
