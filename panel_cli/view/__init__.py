"""Views draw a run from its events: live on a terminal, plain lines elsewhere, or nothing."""

from __future__ import annotations

from typing import TextIO

from rich.console import Console

from panel_cli.view.base import NullView, View
from panel_cli.view.final import render_final
from panel_cli.view.live import LiveView
from panel_cli.view.plain import PlainView
from panel_cli.view.summary import RunTotals

__all__ = ["LiveView", "NullView", "PlainView", "RunTotals", "View", "make_view", "render_final"]


def make_view(console: Console, *, json_mode: bool, quiet: bool, err_stream: TextIO) -> View:
    """`--json` and `--quiet` draw nothing; a terminal gets the live view; a pipe gets plain
    progress lines on `err_stream`, leaving stdout to the answer."""
    if json_mode or quiet:
        return NullView()
    if console.is_terminal:
        return LiveView(console)
    return PlainView(err_stream)
