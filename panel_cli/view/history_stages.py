"""Every stage of a stored run drawn once, as the live view drew it while the run went.

The live view reads each event by its fields, so it draws the stored payloads as they are,
each read by attribute (`Stored`), never rebuilt as its event model: building the models would
cost `panel history show` most of its time, and a stored run needs none of them (a vote's
board reads its tally, orchestrate's tree its plan, by attribute too). A run whose payloads
cannot be read is drawn from its rebuilt events (`view/replay.py`), which leave out what
cannot be read.
tests/cli/test_history_protocols.py checks that every protocol is drawn exactly as the live
view drew it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console

from panel_cli.view.live import LiveView
from panel_cli.view.stored import Stored


def draw_stages(console: Console, payloads: Sequence[dict[str, Any]], *, stopped: bool = False) -> None:
    """The stages as the protocol's own tables, then the final answer and its summary: the live
    view with no live area and no header (the caller prints its own). `stopped`: the run is no
    longer going (a crash left its last stage open), so a call still out says `no reply`."""
    stored = [Stored(payload) for payload in payloads]
    if _as_stored(stored):
        # Drawn aside first: a payload the tables cannot read (a damaged row) sends the whole
        # run to the rebuilt events, which leave it out, rather than print half of it twice.
        try:
            with console.capture() as captured:
                view = LiveView(console, animate=False, header=False)
                for event in stored:
                    view.draw(event)
                view.close(stopped=stopped)
        except (AttributeError, KeyError, TypeError, ValueError):
            pass
        else:
            console.file.write(captured.get())
            return
    from panel_cli.view.replay import draw, stored_events

    draw(console, stored_events(payloads))


def _as_stored(payloads: Sequence[Stored]) -> bool:
    """Whether every event can be drawn from its payload as it is: each says what it is."""
    return all(isinstance(payload.get("type"), str) for payload in payloads)
