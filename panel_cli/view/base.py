"""What every view is: an EventBus subscriber that can be closed."""

from __future__ import annotations

from typing import Protocol

from panel_cli.events import BaseEvent


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
