"""What every view is (an EventBus subscriber that can be closed), and which one a run gets."""

from __future__ import annotations

from typing import Protocol, TextIO

from rich.console import Console

from panel_cli.events import BaseEvent
from panel_cli.view.live import LiveView
from panel_cli.view.plain import PlainView


class View(Protocol):
    """Fed by events only (never by the store or the model gateway), so a replay of stored
    events draws a run exactly as it was drawn live."""

    async def __call__(self, event: BaseEvent) -> None: ...

    def close(self) -> None:
        """Stop drawing and flush. Safe to call twice, and after an exception."""


class NullView:
    """For `--json` and `--quiet`: stdout carries the result alone, so nothing is drawn."""

    async def __call__(self, event: BaseEvent) -> None:
        return None

    def close(self) -> None:
        return None


def make_view(console: Console, *, json_mode: bool, quiet: bool, err_stream: TextIO) -> View:
    """`--json` and `--quiet` draw nothing; a terminal gets the live view; a pipe gets plain
    progress lines on `err_stream`, leaving stdout to the answer."""
    if json_mode or quiet:
        return NullView()
    if console.is_terminal:
        return LiveView(console)
    return PlainView(err_stream)
