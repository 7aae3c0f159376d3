"""A stored run drawn again: its events, read back from the store, fed to the view a live run
uses. `panel history show` draws them all at once as the protocol's tables; `panel history
replay` plays them with their stored timing. Nothing here calls a model or touches the network:
the events hold everything a view draws.

`show` draws with no event loop: nothing waits when every pause is zero, and asyncio is a
noticeable part of `show`'s start. Only the views are imported here; a replay imports asyncio
when it plays."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from itertools import pairwise
from typing import IO, TYPE_CHECKING, Any

from pydantic import ValidationError
from rich.console import Console

from panel_cli.events import BaseEvent, parse_event
from panel_cli.view.live import LiveView

if TYPE_CHECKING:
    from panel_cli.view.base import View

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


async def play(
    view: View, events: Sequence[BaseEvent], *, speed: float | None = None, sleep: Sleep | None = None
) -> None:
    """Feed `events` to `view` with their pauses (`sleep`: asyncio's unless given). The view is
    closed however this ends, so Ctrl-C in the middle of a replay leaves the terminal as it
    found it (cursor shown, the stage in progress printed)."""
    try:
        for wait, event in zip(pauses(events, speed), events, strict=True):
            if wait > 0:
                if sleep is None:
                    import asyncio

                    sleep = asyncio.sleep
                await sleep(wait)
            await view(event)
    finally:
        view.close()


def draw(console: Console, events: Sequence[BaseEvent]) -> None:
    """Every stage of a run printed once as the protocol's own tables, then the final answer
    and its summary: the live view with no live area and no header (the caller prints its own)."""
    _run_at_once(play(LiveView(console, animate=False, header=False), events))


def draw_plain(stream: IO[str], events: Sequence[BaseEvent]) -> None:
    """The same run as the plain lines a run off a terminal writes."""
    from panel_cli.view.plain import PlainView

    _run_at_once(play(PlainView(stream), events))


def _run_at_once(drawing: Coroutine[Any, Any, None]) -> None:
    """Run a drawing that never waits (no pause, a view with no live area) to its end."""
    try:
        drawing.send(None)
    except StopIteration:
        return
    drawing.close()
    raise RuntimeError("a view waited while drawing a stored run at once")
