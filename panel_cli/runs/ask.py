"""A run asked for whole, from a panel and a question to its stored result, by a caller that owns
its own output: the Python API (`panel_cli.run`), a server. `ask_panel` is the entry.

It never prints and never exits. What it has to say goes to the one subscriber the caller
hands in (`on_event`): a `Notice` before the run starts (a key sent to a host that is not its
provider's), then every event of the run, scrubbed of its secrets, as the store gets them.
Bad input raises a `panel_cli.errors.UserError` (a `PanelFileError`, `OptionError`,
`MissingKeyError`, `BudgetError`, …) before any call, with the sentence the command line
prints. Cancelling the task that awaits it stops the run as Ctrl-C does: the calls in flight
are recorded as cancelled, the run is stored as `interrupted` (`panel resume ID` continues it)
and CancelledError goes on. Any number may run at once on one event loop: they share litellm's
clients and the endpoints' limits (`calls_in_flight`).

The command line prepares its runs itself (a question may be typed at a prompt, once the keys
are known to be there), then stores them through `run_stored`, as `ask_panel` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from panel_cli.config import Panel, clean_question, load_panel, resolve_question
from panel_cli.errors import UserError
from panel_cli.events import BaseEvent
from panel_cli.protocols.registry import ProtocolSpec, is_protocol, spec, unknown_protocol
from panel_cli.redact import redact_obj
from panel_cli.runs.controls import NO_CONTROLS, RunControls, check_controls
from panel_cli.runs.panels import RunPanel, panel_for_run
from panel_cli.untrusted import utf8_text

if TYPE_CHECKING:
    from panel_cli.runs.execute import SharedCalls
    from panel_cli.runs.outcome import RunOutcome
    from panel_cli.runs.prepare import PreparedRun
    from panel_cli.store.subscriber import StoreFailure, TranscriptStore
    from panel_cli.view.base import View


@dataclass(frozen=True)
class Notice:
    """Something a run says before it starts, outside its events (the store keeps those): one
    line for a person to read."""

    message: str
    type: Literal["notice"] = "notice"


# The one subscriber of a run asked for whole: its notices, then its events.
OnEvent = Callable[[BaseEvent | Notice], Awaitable[None]]


@dataclass(frozen=True)
class RunRequest:
    """A run as a caller asks for it, checked by `plan_run`. `panel`: a panel file, or a panel
    built in code. `question`: None for the panel's own (`question`, `question_file`).
    `protocol`: None for the one the panel names (confer when it names none). `options`: the
    protocol's own options by name, as its spec declares them (`choices`, `method`,
    `max_rounds`, `gate`, …), each a value of its kind. `demo`: every member a demo persona.
    `attach`: files every member gets. `controls`: the spending cap and the run followed up.
    `db`: the transcript database (None: `$PANEL_DB`, else the default)."""

    panel: Panel | Path
    question: str | None = None
    protocol: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    demo: bool = False
    attach: Sequence[Path] = ()
    controls: RunControls = NO_CONTROLS
    db: Path | str | None = None


@dataclass(frozen=True)
class PlannedRun:
    """A request checked: the protocol, its panel (options applied, gate armed) and the question."""

    protocol: ProtocolSpec
    chosen: RunPanel
    question: str


@dataclass(frozen=True)
class FinishedRun:
    """A run that ended. `payload`: its result as `--json` prints it, scrubbed of the run's
    secrets (the `outcome` is not: show the payload). `store_failure`: what the store could not
    keep of it (None: it kept all of it)."""

    outcome: RunOutcome
    payload: dict[str, Any]
    store_failure: StoreFailure | None = None


def plan_run(request: RunRequest) -> PlannedRun:
    """Everything about a request that can be checked without a key or a call, in one sentence
    for the first problem (UserError)."""
    check_controls(request.controls)
    if request.controls.dry_run:
        raise UserError("A run asked for whole is made, not estimated: leave dry_run out.")
    found = load_panel(request.panel) if isinstance(request.panel, Path) else request.panel
    protocol = _protocol(request.protocol or found.protocol)
    chosen = panel_for_run(protocol, found, request.options, demo=request.demo, attach=list(request.attach))
    return PlannedRun(protocol=protocol, chosen=chosen, question=question_of(chosen.panel, request.question))


def _protocol(name: str) -> ProtocolSpec:
    if not isinstance(name, str) or not is_protocol(name):
        raise UserError(unknown_protocol(str(name)) + ".")
    return spec(name)


def question_of(panel: Panel, given: str | None) -> str:
    """The question given, else the panel's `question`, else its `question_file` (relative to
    the panel's file). Never stdin: a caller in Python owns its streams."""
    if given is not None:
        question = clean_question(utf8_text(given, "The question"))
        if not question:
            raise UserError("The question is empty; give one, or None to ask the panel's own.")
        return question
    if not (panel.question and panel.question.strip()) and not panel.question_file:
        raise UserError("No question: give one, or give the panel a question or question_file.")
    folder = Path(panel.source_file).parent if panel.source_file else None
    return resolve_question(panel, folder, None, lambda: None)


async def ask_panel(
    request: RunRequest, *, on_event: OnEvent | None = None, follow_text: bool = False, run_id: str | None = None
) -> FinishedRun:
    """Check, prepare and make the run `request` asks for, store it, and return how it ended.

    `on_event` hears each `Notice`, then each event of the run in order (an exception it raises
    fails the run); with `follow_text` also each reply's text as it is written (`CallTextGrew`).
    `run_id`: given when the caller must know it before the run ends. litellm is imported in a
    thread, only for a panel with a member that is not a demo persona, and the loop serves
    others meanwhile. See the module's docstring for errors and cancellation."""
    from panel_cli.models.routes import needs_litellm
    from panel_cli.runs.loader import GatewayLoader
    from panel_cli.runs.prepare import check_keys, key_notices, prepare_run
    from panel_cli.store.paths import resolve_db_path

    planned = plan_run(request)
    panel = planned.chosen.panel
    loader = GatewayLoader()
    loader.start(panel)
    check_keys(panel)
    if on_event is not None:
        for notice in key_notices(panel):
            await on_event(Notice(notice))
    if needs_litellm(panel.callable_members()):
        await loader.loaded()
    db_path = resolve_db_path(request.db)
    prepared = prepare_run(
        loader,
        panel,
        planned.question,
        warnings=planned.chosen.warnings,
        controls=request.controls,
        db_path=db_path,
        gate=planned.chosen.gate,
    )
    view = Forwarded(on_event, follows_text=follow_text) if on_event is not None else None
    async with calls_in_flight() as shared:
        return await run_stored(prepared, db_path=db_path, view=view, run_id=run_id, stream=follow_text, shared=shared)


@dataclass
class _InFlight:
    calls: SharedCalls
    runs: int = 0


# The runs `ask_panel` has under way, by event loop: they share their calls (`calls_in_flight`).
_IN_FLIGHT: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _InFlight] = weakref.WeakKeyDictionary()


@contextlib.asynccontextmanager
async def calls_in_flight() -> AsyncIterator[SharedCalls]:
    """What the runs under way on this event loop share (a server's requests, an `asyncio.gather`
    of runs): litellm's HTTP clients, which belong to the process, closed once the last of them
    ends rather than by the first under the others' calls; and one limit per endpoint, so a
    panel's `concurrency` holds across them."""
    from panel_cli.runs.execute import SharedCalls

    loop = asyncio.get_running_loop()
    flight = _IN_FLIGHT.setdefault(loop, _InFlight(SharedCalls()))
    flight.runs += 1
    try:
        yield flight.calls
    finally:
        flight.runs -= 1
        if not flight.runs:
            del _IN_FLIGHT[loop]
            await flight.calls.aclose()


async def run_stored(
    prepared: PreparedRun,
    *,
    db_path: Path,
    view: View | None = None,
    run_id: str | None = None,
    stream: bool = False,
    shared: SharedCalls | None = None,
) -> FinishedRun:
    """A prepared run (`panel_cli.runs.execute.run_panel`), stored in `db_path` and drawn by
    `view`; `shared`: what it shares with the runs under way beside it. When the run raises,
    what the store could not keep of it is a note on the exception (`add_note`), which goes on."""
    from panel_cli.runs.execute import run_panel
    from panel_cli.store.subscriber import TranscriptStore

    store = await TranscriptStore.open(db_path)
    try:
        outcome = await run_panel(prepared, store=store, view=view, shared=shared, run_id=run_id, stream=stream)
    except BaseException as exc:
        if failure := await closed(store):
            exc.add_note(failure.message)
        raise
    failure = await closed(store)
    return FinishedRun(outcome=outcome, payload=redact_obj(outcome.payload(), prepared.secrets), store_failure=failure)


async def closed(store: TranscriptStore) -> StoreFailure | None:
    """Close `store`; what it could not write, if anything."""
    from panel_cli.store.subscriber import StoreFailure

    try:
        await store.close()
    except StoreFailure as failure:
        return failure
    return None


class Forwarded:
    """A run's events handed on to a caller's subscriber, as a view the run closes at its end."""

    def __init__(self, on_event: OnEvent, *, follows_text: bool) -> None:
        self.on_event = on_event
        self.follows_text = follows_text

    async def __call__(self, event: BaseEvent) -> None:
        await self.on_event(event)

    def close(self) -> None:
        return None
