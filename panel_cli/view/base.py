"""What every view is (an EventBus subscriber that can be closed), and which one a run gets."""

from __future__ import annotations

from typing import Protocol

from panel_cli.events import BaseEvent
from panel_cli.view.environment import Environment
from panel_cli.view.live import LiveView
from panel_cli.view.plain import PlainView


class View(Protocol):
    """Fed by events only (never by the store or the model gateway), so a replay of stored
    events draws a run exactly as it was drawn live."""

    async def __call__(self, event: BaseEvent) -> None: ...

    def close(self) -> None:
        """Stop drawing and flush. Safe to call twice, and after an exception."""


class NullView:
    """For `--quiet`, and `--json` off a terminal: nothing is drawn anywhere."""

    async def __call__(self, event: BaseEvent) -> None:
        return None

    def close(self) -> None:
        return None


def make_view(env: Environment, *, json_mode: bool, quiet: bool) -> View:
    """The view a command hands its run, drawn on `env`'s streams. `--quiet` draws nothing.
    `--json` keeps stdout for the result alone, but a person at a terminal still watches the
    run: the live view goes to stderr when stderr is a terminal, and nothing is drawn when it
    is not. Otherwise a terminal gets the live view, and a pipe gets plain progress lines on
    stderr, leaving stdout to the answer."""
    if quiet:
        return NullView()
    if json_mode:
        return LiveView(env.err_console) if env.err_console.is_terminal else NullView()
    if env.console.is_terminal:
        return LiveView(env.console)
    return PlainView(env.stderr)
