"""`panel_cli.run`, `arun` and `stream`: a panel run from Python (docs/python.md).

Each builds a `panel_cli.runs.ask.RunRequest` and hands it to the run core's `ask_panel`, the
path every surface shares: the panel is found, changed by the protocol's options and checked
exactly as on the command line (`panel_cli.runs.panels`), and the run is stored in the same
database. Nothing here prints or exits: errors are `panel_cli.errors.PanelError`s carrying the
sentence the command line prints, and a run's events go only to the caller's `on_event`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from panel_cli.api.paths import given_path
from panel_cli.api.result import RunResult
from panel_cli.config import Panel
from panel_cli.errors import PanelFileError
from panel_cli.events import BaseEvent
from panel_cli.runs.ask import FinishedRun, Notice, RunRequest, ask_panel
from panel_cli.runs.controls import RunControls
from panel_cli.runs.panels import is_panel_name, named_panel_file
from panel_cli.store.subscriber import StoreFailure

# A panel as a caller gives it: a panel built in code, a file's path, or a panel's name.
PanelGiven = Panel | str | os.PathLike[str]
P = ParamSpec("P")
T = TypeVar("T")
# A caller's subscriber: called with each notice and event, in order; it may be a coroutine function.
EventHandler = Callable[[BaseEvent | Notice], Awaitable[None] | None]


class RunNotStored(StoreFailure):
    """The run ended, but the store could not keep all of it (exit 1 on the command line).
    `result` is the run's result all the same."""

    def __init__(self, message: str, result: RunResult) -> None:
        super().__init__(message)
        self.result = result


async def arun(
    panel: PanelGiven,
    question: str | None = None,
    *,
    protocol: str | None = None,
    db: str | os.PathLike[str] | None = None,
    max_cost: float | None = None,
    max_calls: int | None = None,
    allow_unknown_prices: bool = False,
    follow_up: str | None = None,
    demo: bool = False,
    attach: Sequence[str | os.PathLike[str]] = (),
    on_event: EventHandler | None = None,
    **options: Any,
) -> RunResult:
    """Run `panel` on `question` and return its result (docs/python.md).

    `panel`: a `Panel` built in code, the path of a panel file, or a panel's name. `question`:
    None for the panel's own. `protocol`: None for the one the panel names (confer when it names
    none). `options`: the protocol's own, by the names its spec gives them (vote's `choices`,
    `method`, `gate`; confer's `max_rounds`; …). `db`: the transcript database (None:
    `$PANEL_DB`, else the default one). `max_cost`, `max_calls`, `allow_unknown_prices`,
    `follow_up` (a run id, or `last`), `demo` and `attach` are the command line's `--max-cost`,
    `--max-calls`, `--allow-unknown-prices`, `--continue`, `--demo` and `--attach`.
    `on_event` hears each notice and each event of the run. Cancelling the task stops the
    run, stored as interrupted (`panel resume ID` continues it)."""
    request = _request(
        panel,
        question,
        protocol=protocol,
        db=db,
        max_cost=max_cost,
        max_calls=max_calls,
        allow_unknown_prices=allow_unknown_prices,
        follow_up=follow_up,
        demo=demo,
        attach=attach,
        options=options,
    )
    return _result(await ask_panel(request, on_event=_awaiting(on_event) if on_event is not None else None))


def _synchronous(coroutine: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """`coroutine` run to its end on an event loop of its own, with the same parameters."""

    @functools.wraps(coroutine)
    def synchronous(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(coroutine(*args, **kwargs))
        name = coroutine.__name__
        raise RuntimeError(
            f"panel_cli.{name[1:]} cannot be called from a running event loop; await panel_cli.{name}(...)."
        )

    return synchronous


run = _synchronous(arun)
run.__name__ = run.__qualname__ = "run"
run.__doc__ = """Run `panel` on `question` and return its result: `arun`, on an event loop of its own,
with the same parameters. Ctrl-C stops the run as on the command line (stored as interrupted)
and KeyboardInterrupt goes on. Called inside a running event loop, it refuses: await `arun`."""


async def stream(
    panel: PanelGiven,
    question: str | None = None,
    *,
    protocol: str | None = None,
    db: str | os.PathLike[str] | None = None,
    max_cost: float | None = None,
    max_calls: int | None = None,
    allow_unknown_prices: bool = False,
    follow_up: str | None = None,
    demo: bool = False,
    attach: Sequence[str | os.PathLike[str]] = (),
    text: bool = False,
    **options: Any,
) -> AsyncIterator[BaseEvent | Notice]:
    """The run `arun` makes, as its notices and events, in order, as they happen; the last is
    `RunFinished` (its `result` is the run's `to_dict()`), `RunFailed` or `RunInterrupted`.
    `text`: also each reply's text as it is written (`CallTextGrew`). Errors are raised from
    the iteration, after the events before them. Leaving the loop early and closing the
    iterator (`contextlib.aclosing`, `aclose()`) stops the run, stored as interrupted."""
    request = _request(
        panel,
        question,
        protocol=protocol,
        db=db,
        max_cost=max_cost,
        max_calls=max_calls,
        allow_unknown_prices=allow_unknown_prices,
        follow_up=follow_up,
        demo=demo,
        attach=attach,
        options=options,
    )
    heard: asyncio.Queue[BaseEvent | Notice | None] = asyncio.Queue()

    async def hear(event: BaseEvent | Notice) -> None:
        heard.put_nowait(event)

    task = asyncio.create_task(ask_panel(request, on_event=hear, follow_text=text))
    task.add_done_callback(lambda _: heard.put_nowait(None))
    try:
        while (event := await heard.get()) is not None:
            yield event
        _result(task.result())
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _request(
    panel: PanelGiven,
    question: str | None,
    *,
    protocol: str | None,
    db: str | os.PathLike[str] | None,
    max_cost: float | None,
    max_calls: int | None,
    allow_unknown_prices: bool,
    follow_up: str | None,
    demo: bool,
    attach: Sequence[str | os.PathLike[str]],
    options: Mapping[str, Any],
) -> RunRequest:
    if question is not None and not isinstance(question, str):
        raise TypeError(f"question is text, not {type(question).__name__}")
    return RunRequest(
        panel=panel_source(panel),
        question=question,
        protocol=protocol,
        options=dict(options),
        demo=demo,
        attach=[given_path(path, "attach") for path in attach],
        controls=RunControls(
            max_cost=max_cost, max_calls=max_calls, allow_unknown_prices=allow_unknown_prices, follow_up=follow_up
        ),
        db=given_path(db, "db") if db is not None else None,
    )


def panel_source(panel: PanelGiven) -> Panel | Path:
    """A panel as the run core takes it: a string that is a panel's name (`is_panel_name`) is
    looked up (`named_panel_file`); any other is a path."""
    if isinstance(panel, Panel):
        return panel
    if isinstance(panel, str) and is_panel_name(panel):
        return named_panel_file(panel)
    if isinstance(panel, str | os.PathLike):
        return given_path(panel, "panel", PanelFileError)
    raise TypeError(f"panel is a path, a panel's name or a panel_cli.Panel, not {type(panel).__name__}")


def _awaiting(handler: EventHandler) -> Callable[[BaseEvent | Notice], Awaitable[None]]:
    """A handler that may be a plain function, as the run core awaits it."""

    async def handle(event: BaseEvent | Notice) -> None:
        answer = handler(event)
        if inspect.isawaitable(answer):
            await answer

    return handle


def _result(finished: FinishedRun) -> RunResult:
    result = RunResult.from_payload(finished.payload)
    if finished.store_failure is not None:
        raise RunNotStored(finished.store_failure.message, result)
    return result
