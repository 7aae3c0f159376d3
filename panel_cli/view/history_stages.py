"""Every stage of a stored run drawn once, as the live view drew it while the run went."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console


def draw_stages(console: Console, payloads: Sequence[dict[str, Any]]) -> None:
    """The stages as the protocol's own tables, then the final answer and its summary."""
    from panel_cli.view.replay import draw, stored_events

    draw(console, stored_events(payloads))
