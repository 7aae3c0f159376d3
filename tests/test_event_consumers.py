"""No consumer of events can miss an event type: each one handles a type or says it ignores it.

Every consumer dispatches through a table from event type to handler and lists the types it
leaves alone on purpose in its IGNORED, so a type added to `panel_cli.events` fails here, once
for each consumer, until each has decided what to do with it. Replay has no table of its own:
it feeds the stored events to the live and the plain view. The JSON export writes every stored
payload as the store gives it back, whatever its type, so it has nothing to decide.

The call events share their fields through `CallEvent`, and the gateway builds them from a
`CallRoute`; both are checked here to stay in step, and stored payloads to keep their order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from io import StringIO
from typing import Literal, get_type_hints

import pytest

from panel_cli import totals
from panel_cli.events import (
    EVENT_TYPES,
    BaseEvent,
    CallEvent,
    CallRoute,
    CallTextGrew,
    RunStarted,
    ToolCallEvent,
    ToolCallRoute,
)
from panel_cli.export import report
from panel_cli.mcp_server import progress
from panel_cli.store import writer
from panel_cli.store.rows import FIELD_ORDER
from panel_cli.view import live, plain

# What a consumer declares: the event types it handles (by class, or by `type` for the store
# writer, which reads payloads) and those it ignores on purpose.
Declared = tuple[Iterable[type[BaseEvent] | str], Iterable[type[BaseEvent] | str]]

CONSUMERS: dict[str, Declared] = {
    "plain view (view/plain.py)": (plain.LINES, plain.IGNORED),
    "live view (view/live.py)": (live.HANDLERS, live.IGNORED),
    "Markdown and HTML exports (export/report.py)": (report.READERS, report.IGNORED),
    "store writer (store/writer.py)": (writer.ROW_WRITERS, writer.IGNORED),
    "run totals (totals.py)": (totals.COUNTS, totals.IGNORED),
    "MCP progress notifications (mcp_server/progress.py)": (progress.HANDLERS, progress.IGNORED),
}


def unsorted(consumer: str, declared: Declared, types: Mapping[str, type[BaseEvent]] = EVENT_TYPES) -> list[str]:
    """A sentence for each event type `consumer` neither handles nor ignores, or both handles
    and ignores, and for each entry of its tables that is no event type at all."""
    names = {kind: name for name, kind in types.items()}

    def name_of(entry: type[BaseEvent] | str) -> str:
        return entry if isinstance(entry, str) else names.get(entry, entry.__name__)

    handled, ignored = ({name_of(entry) for entry in entries} for entries in declared)
    problems = []
    for name, kind in types.items():
        if name not in handled and name not in ignored:
            problems.append(f"{consumer}: {name} ({kind.__name__}) is neither handled nor ignored")
        elif name in handled and name in ignored:
            problems.append(f"{consumer}: {name} ({kind.__name__}) is both handled and ignored")
    problems += [f"{consumer}: {name} is no event type" for name in sorted((handled | ignored) - set(types))]
    return problems


@pytest.mark.parametrize("consumer", CONSUMERS)
def test_every_consumer_handles_or_ignores_every_event_type(consumer: str) -> None:
    assert unsorted(consumer, CONSUMERS[consumer]) == []


def test_a_type_a_consumer_forgot_is_named() -> None:
    handled = {kind: line for kind, line in plain.LINES.items() if kind is not RunStarted}

    assert unsorted("plain view", (handled, plain.IGNORED)) == [
        "plain view: run_started (RunStarted) is neither handled nor ignored"
    ]


def test_a_type_both_handled_and_ignored_is_named() -> None:
    assert unsorted("live view", (live.HANDLERS, live.IGNORED | {CallTextGrew})) == [
        "live view: call_text_grew (CallTextGrew) is both handled and ignored"
    ]


def test_a_misspelt_type_is_named() -> None:
    assert unsorted("store writer", (writer.ROW_WRITERS, writer.IGNORED | {"call_finsihed"})) == [
        "store writer: call_finsihed is no event type"
    ]


class ThingHappened(BaseEvent):
    type: Literal["thing_happened"] = "thing_happened"


def test_a_new_event_type_fails_for_every_consumer_until_each_decides() -> None:
    types = {**EVENT_TYPES, "thing_happened": ThingHappened}

    for consumer, declared in CONSUMERS.items():
        assert unsorted(consumer, declared, types) == [
            f"{consumer}: thing_happened (ThingHappened) is neither handled nor ignored"
        ]


async def test_the_views_pass_over_an_event_type_they_do_not_know() -> None:
    """Dispatch is by exact type: one in no table reaches no handler (a replay of a run a newer
    panel wrote leaves it out), and the view carries on."""
    view = plain.PlainView(StringIO())

    assert view.line(ThingHappened()) is None
    assert view.line(CallTextGrew(call_id="c", member="m", model="x", stage="answer", text="so far")) is None


def own_fields(model: type[BaseEvent]) -> dict[str, object]:
    return {name: field.annotation for name, field in model.model_fields.items() if name not in BaseEvent.model_fields}


@pytest.mark.parametrize(("base", "route"), [(CallEvent, CallRoute), (ToolCallEvent, ToolCallRoute)])
def test_a_route_has_exactly_its_events_shared_fields(base: type[BaseEvent], route: type) -> None:
    shared = own_fields(base)
    del shared["type"]

    assert get_type_hints(route) == shared


@pytest.mark.parametrize("name", sorted(EVENT_TYPES))
def test_type_comes_first_after_the_envelope_in_every_payload(name: str) -> None:
    assert list(EVENT_TYPES[name].model_fields)[:4] == ["run_id", "seq", "ts", "type"]


@pytest.mark.parametrize("name", sorted(FIELD_ORDER))
def test_the_store_restores_fields_in_the_order_the_event_declares_them(name: str) -> None:
    declared = [field for field in EVENT_TYPES[name].model_fields if field in FIELD_ORDER[name]]

    assert declared == list(FIELD_ORDER[name])
