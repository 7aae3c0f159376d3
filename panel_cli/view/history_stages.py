"""Every stage of a stored run drawn once, as the live view drew it while the run went.

The live view reads each event by its fields, so it draws the stored payloads as they are,
each read by attribute (`Stored`), never rebuilt as its event model: building the models would
cost `panel history show` most of its time, and a stored run needs none of them. A run holding
an event whose tables read its model (a vote's ballots, orchestrate's plan) is drawn from its
rebuilt events (`view/replay.py`), as is one whose payloads cannot be read.
tests/cli/test_history_protocols.py checks that every protocol is drawn exactly as the live
view drew it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console

from panel_cli.view.live import LiveView


class Stored(dict[str, Any]):
    """A stored payload read as the event it was: its fields as attributes, a nested object as
    another `Stored`, and still a dict for what the views read as one (a tally's scores, an
    aggregate ranking's entries)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return _stored(self[name])
        except KeyError:
            raise AttributeError(name) from None


def _stored(value: Any) -> Any:
    if isinstance(value, dict) and not isinstance(value, Stored):
        return Stored(value)
    if isinstance(value, list):
        return [_stored(item) for item in value]
    return value


# A vote's board and orchestrate's plan are drawn from their event models (a vote's tally is
# read by the vote's own model), so a run holding these is drawn from its rebuilt events.
NEEDS_EVENT_MODELS: frozenset[str] = frozenset(
    {
        "plan_rejected",
        "plan_accepted",
        "task_started",
        "task_finished",
        "task_failed",
        "task_skipped",
        "vote_opened",
        "vote_received",
        "quorum_reached",
        "vote_tallied",
        "leader_chose",
    }
)


def draw_stages(console: Console, payloads: Sequence[dict[str, Any]]) -> None:
    """The stages as the protocol's own tables, then the final answer and its summary: the live
    view with no live area and no header (the caller prints its own)."""
    stored = [Stored(payload) for payload in payloads]
    if _as_stored(stored):
        # Drawn aside first: a payload the tables cannot read (a damaged row) sends the whole
        # run to the rebuilt events, which leave it out, rather than print half of it twice.
        try:
            with console.capture() as captured:
                view = LiveView(console, animate=False, header=False)
                for event in stored:
                    view.draw(event)  # type: ignore[arg-type]
                view.close()
        except (AttributeError, KeyError, TypeError, ValueError):
            pass
        else:
            console.file.write(captured.get())
            return
    from panel_cli.view.replay import draw, stored_events

    draw(console, stored_events(payloads))


def _as_stored(payloads: Sequence[Stored]) -> bool:
    """Whether every event can be drawn from its payload as it is."""
    return all(
        isinstance(payload.get("type"), str) and payload["type"] not in NEEDS_EVENT_MODELS for payload in payloads
    )
