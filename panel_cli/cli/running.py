"""Wiring one protocol run: panel -> engine -> events -> (view, store), then the output and
exit code. Every protocol command ends here, so they all behave alike. `run_panel` is the run
itself, with no printing and no exit, for commands that make many runs (`panel batch`).

A run with a member that is not a demo persona starts litellm's import (about 6 s) in a
background thread as soon as its panel is known, and makes the checks that need no model
meanwhile (every missing key). Only then does it wait for litellm and make the checks that
need it. A run of demo personas alone never imports litellm.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from panel_cli.cli.options import RunControls
from panel_cli.cli.signals import on_sigterm_exit, run_until_signal
from panel_cli.config import Panel, resolve_question
from panel_cli.errors import MissingKeyError, UserError
from panel_cli.events import BaseEvent, EventBus, RunStarted, Subscriber
from panel_cli.redact import redact, redact_obj, secret_values
from panel_cli.store.rows import TAGS_KEY

if TYPE_CHECKING:
    from panel_cli.followup import FollowUp
    from panel_cli.llm.budget import Budget
    from panel_cli.llm.gateway import Emit, Gateway
    from panel_cli.protocols.base import Continuation, Engine, RunOutcome
    from panel_cli.view.base import View

# A question piped on stdin larger than this is a mistake (a binary, a log), not a question.
STDIN_LIMIT = 1 << 20
KEY_ADVICE = ("Set it, or try the panel offline with --demo.", "Set them, or try the panel offline with --demo.")


class GatewayLoader:
    """litellm's import, in a thread, started once a run's panel is known to need it (`start`)."""

    def __init__(self) -> None:
        self._module: ModuleType | None = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def start(self, panel: Panel) -> None:
        """Start the import if a member of the panel is not a demo persona (once)."""
        from panel_cli.llm.routes import needs_litellm

        if needs_litellm(panel.callable_members()):
            self._begin()

    def _begin(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._load, name="panel-load-litellm", daemon=True)
            self._thread.start()

    def _load(self) -> None:
        from panel_cli.llm.gateway import load_litellm

        try:
            self._module = load_litellm()
        except BaseException as exc:  # re-raised in the main thread, where it can be reported
            self._error = exc

    def wait(self, console: Console, show_progress: bool) -> ModuleType:
        """litellm, once imported; a caller that needs it whatever the panel (an estimate
        counts tokens with it) starts the import here if nothing did."""
        self._begin()
        assert self._thread is not None
        if self._thread.is_alive() and show_progress:
            with console.status("Loading the model gateway…", spinner="dots"):
                self._thread.join()
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._module is not None
        return self._module


def begin_run() -> GatewayLoader:
    """Call first in a protocol command: SIGTERM exits like Ctrl-C from now on. litellm starts
    loading once the run's panel is known (`execute`, `ready_to_call`), if a member needs it."""
    on_sigterm_exit()
    return GatewayLoader()


def declared_protocol(panel: Panel) -> str | None:
    """The protocol a panel file names, or None when it names none (read before a command
    sets the protocol it runs)."""
    return panel.protocol if "protocol" in panel.model_fields_set else None


def read_stdin() -> str | None:
    """The question piped on stdin; on a terminal, asked for at a prompt. Called only when no
    other source gives a question, so a pipe meant for something else is never read."""
    stream = sys.stdin
    if stream is None or stream.closed:
        return None
    if stream.isatty():
        return typer.prompt("Question", err=True)
    try:
        text = stream.read(STDIN_LIMIT + 1)
    except UnicodeDecodeError:
        raise UserError("The question on stdin is not UTF-8 text.") from None
    except OSError:
        return None
    if len(text) > STDIN_LIMIT:
        raise UserError(
            f"The question on stdin is longer than {STDIN_LIMIT:,} characters; put a shorter one in question_file."
        )
    return text


def question_for(panel: Panel, panel_file: Path | None, given: str | None) -> str:
    return resolve_question(panel, panel_file.parent if panel_file else None, given, read_stdin)


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def _preflight(panel: Panel) -> None:
    """Every missing key at once, before litellm has even loaded."""
    from panel_cli.llm.providers import missing_keys

    missing = missing_keys(panel.callable_members())
    if missing:
        raise MissingKeyError(_listed(missing, KEY_ADVICE))


def check_routable(litellm: ModuleType, panel: Panel) -> None:
    """That litellm can route every model of the panel; every one it cannot, at once."""
    from panel_cli.llm.catalog import check_with_litellm

    unknown = [
        f"Member '{member.name}': {problem}"
        for member in panel.callable_members()
        if (problem := check_with_litellm(litellm, member.model, member.api_base)) is not None
    ]
    if unknown:
        raise UserError(_listed(unknown))


def _litellm_checks(litellm: ModuleType, panel: Panel) -> None:
    """What only litellm can tell, before the first call: that it can route every model, and
    the keys of providers our own table does not know."""
    from panel_cli.llm.providers import missing_keys_litellm

    check_routable(litellm, panel)
    missing = missing_keys_litellm(litellm, panel.callable_members())
    if missing:
        raise MissingKeyError(_listed(missing, KEY_ADVICE))


def _listed(problems: list[str], advice: tuple[str, str] | None = None) -> str:
    """One problem per line, so none hides behind the first, then the advice (singular or
    plural) on a line of its own."""
    lines = [problem if problem.endswith(".") else problem + "." for problem in problems]
    if advice is not None:
        lines.append(advice[0] if len(lines) == 1 else advice[1])
    return "\n".join(lines)


def run_secrets(panel: Panel) -> list[str]:
    """What this run must never write down or draw: keys named like secrets, every key a member
    uses, and the values of the `${VAR}`s its panel file expanded."""
    from panel_cli.llm.providers import keys_in_use

    members = panel.callable_members()
    names = [member.api_key_env for member in members if member.api_key_env]
    return secret_values(names, known=[*keys_in_use(members), *panel.expanded_values])


class TaggingBus(EventBus):
    """The run's EventBus, which also writes the run's tags into RunStarted's config, so
    they are stored with the run and replayed with it."""

    def __init__(
        self, run_id: str, subscribers: list[Subscriber], *, secrets: Sequence[str], tags: Mapping[str, str] | None
    ) -> None:
        super().__init__(run_id, subscribers, secrets=secrets)
        self.tags = dict(tags or {})

    async def emit(self, event: BaseEvent) -> BaseEvent:
        if self.tags and isinstance(event, RunStarted):
            event = event.model_copy(update={"config": {**event.config, TAGS_KEY: self.tags}})
        return await super().emit(event)


def ready_to_call(loader: GatewayLoader, panel: Panel, *, console: Console, show_progress: bool) -> list[str]:
    """The checks every run makes before its first call, in the cheapest order: every
    missing key at once, before litellm has even loaded; then, once it has, that it can route
    every model. Returns the run's secrets (`run_secrets`). Call it once per panel. A panel of
    demo personas alone needs no litellm, and skips its checks."""
    from panel_cli.llm.routes import needs_litellm

    loader.start(panel)
    _preflight(panel)
    secrets = run_secrets(panel)
    if needs_litellm(panel.callable_members()):
        _litellm_checks(loader.wait(console, show_progress=show_progress), panel)
    return secrets


class SharedCalls:
    """What runs in flight at once (a batch) share: one semaphore per endpoint, so the
    panel's per-endpoint `concurrency` holds across every run rather than within each; and
    litellm's pooled HTTP clients, which belong to the whole process. Closing them while
    another run is mid-call would break that call, so they are closed once, by `aclose`,
    when every run is over. An endpoint's limit is sized by the first run to call it (runs
    of different panels on one endpoint share the first panel's `concurrency` for it)."""

    def __init__(self) -> None:
        self.limits: dict[str, asyncio.Semaphore] = {}
        self._last: Gateway | None = None

    def gateway(
        self,
        emit: Emit,
        panel: Panel,
        continuing: Continuation | None,
        budget: Budget | None = None,
        *,
        stream: bool = False,
    ) -> Gateway:
        from panel_cli.llm.gateway import Gateway

        answered = continuing.answered if continuing is not None else None
        self._last = Gateway(
            emit,
            defaults=panel.defaults,
            concurrency=panel.concurrency,
            answered=answered,
            limits=self.limits,
            budget=budget,
            stream=stream,
        )
        return self._last

    async def aclose(self) -> None:
        """Close litellm's clients (any gateway closes them all) for a later run to open fresh ones."""
        if self._last is not None:
            await self._last.aclose()


async def run_panel(
    engine: Engine,
    panel: Panel,
    question: str,
    *,
    store: Subscriber | None,
    secrets: Sequence[str],
    view: View | None = None,
    shared: SharedCalls | None = None,
    warnings: Sequence[str] = (),
    tags: Mapping[str, str] | None = None,
    run_id: str | None = None,
    continuing: Continuation | None = None,
    budget: Budget | None = None,
    follow_up: FollowUp | None = None,
    stream: bool = False,
) -> RunOutcome:
    """One run of `engine` on `panel` and `question`, as a coroutine: no printing, no exit.

    Takes: `store`, an open `TranscriptStore` (or any subscriber; None stores nothing) that
    the caller closes, and that any number of concurrent runs may share; `secrets`, from
    `ready_to_call`, scrubbed from every event before the store or view sees it; `view`, drawn
    from this run's events and closed when it ends (None: nothing drawn); `shared`, the
    endpoint limits and HTTP clients of runs in flight at once (None: the run's own, closed
    when it ends); `warnings`, raised inside the run so they are shown and stored with it;
    `tags`, short strings kept in the run's config under `tags` (a batch id goes to its
    own column); `run_id`, given when the caller must know it before the run ends (a new one
    otherwise); `continuing`, the run this one resumes; `budget`, its spending cap (one per
    run: `panel_cli.llm.budget.run_budget`); `follow_up`, the earlier run it continues
    (`panel_cli.followup.resolve_follow_up`); `stream`, answers stream into the `view` as
    they are written (only a view that `follows_text` draws them).

    Guarantees: the run is stored as it happens and ends in the store as finished,
    no_answer, failed (the engine raised: re-raised here) or interrupted (cancelled:
    CancelledError re-raised). The outcome's result is NOT scrubbed of `secrets`: redact
    what you print or write (`redact_obj(outcome.payload(), secrets)`)."""
    from panel_cli.protocols.base import run_engine

    subscribers: list[Subscriber] = [subscriber for subscriber in (store, view) if subscriber is not None]
    bus = TaggingBus(run_id or new_run_id(), subscribers, secrets=secrets, tags=tags)
    calls = shared or SharedCalls()
    try:
        gateway = calls.gateway(bus.emit, panel, continuing, budget, stream=stream)
        return await run_engine(
            engine, panel, question, gateway, bus, warnings, continuing=continuing, follow_up=follow_up
        )
    finally:
        if view is not None:
            view.close()
        if shared is None:
            await calls.aclose()


def capped(panel: Panel, controls: RunControls, *, allow_flag: bool = True) -> Budget | None:
    """The run's budget: `--max-cost` (else the panel's `defaults.max_cost`) and `--max-calls`;
    refuses (exit 2) a cost cap over a member of unknown price unless it is allowed. Commands
    without `--allow-unknown-prices` (`allow_flag` false: batch, eval) say what else to do."""
    from panel_cli.llm.budget import ALLOW_ADVICE, run_budget

    cap = "--max-cost" if controls.max_cost is not None else "defaults.max_cost"
    advice = ALLOW_ADVICE if allow_flag else "take max_cost out of the file's defaults to run them without a cap"
    max_cost = controls.max_cost if controls.max_cost is not None else panel.defaults.max_cost
    return run_budget(
        panel.callable_members(),
        max_cost=max_cost,
        max_calls=controls.max_calls,
        allow_unknown_prices=controls.allow_unknown_prices,
        cap=cap,
        advice=advice,
    )


def execute(
    loader: GatewayLoader,
    engine: Engine,
    panel: Panel,
    question: str,
    *,
    warnings: list[str],
    json_mode: bool,
    quiet: bool,
    db: Path | None,
    continuing: Continuation | None = None,
    controls: RunControls | None = None,
) -> None:
    """Run `engine` and exit with SPEC §4's code: 0 answer, 1 no answer, 2 user error, 130 or
    143 interrupted. `warnings` (found by the checks) are raised inside the run, so they are
    shown and stored with it. `continuing`: the run this one resumes (`panel resume`)."""
    from panel_cli.followup import resolve_follow_up
    from panel_cli.store.db import TranscriptStore, resolve_db_path
    from panel_cli.view.base import make_view

    loader.start(panel)
    console = Console()
    db_path = resolve_db_path(db)
    follow_up = resolve_follow_up(db_path, controls.follow_up) if controls is not None and controls.follow_up else None
    if controls is not None and controls.dry_run:
        from panel_cli.cli.estimate import show_estimate

        show_estimate(loader, panel, question, json_mode=json_mode, console=console, follow_up=follow_up)
        return
    # With --json, stdout carries the result alone: progress, if any, goes to a terminal on stderr.
    progress = Console(stderr=True) if json_mode else console
    secrets = ready_to_call(loader, panel, console=progress, show_progress=progress.is_terminal and not quiet)
    budget = capped(panel, controls or RunControls())
    run_id = new_run_id()

    async def run() -> RunOutcome:
        store = await TranscriptStore.open(db_path)
        view = make_view(console, json_mode=json_mode, quiet=quiet, err_stream=sys.stderr)
        try:
            return await run_panel(
                engine,
                panel,
                question,
                store=store,
                secrets=secrets,
                view=view,
                warnings=warnings,
                run_id=run_id,
                continuing=continuing,
                budget=budget,
                follow_up=follow_up,
                # Only a person watching the live view gains from streaming; a resume never streams.
                stream=not json_mode and continuing is None and getattr(view, "follows_text", False),
            )
        finally:
            await store.close()

    outcome = run_until_signal(run, run_id)
    result = outcome.result
    if json_mode:
        payload = redact_obj(outcome.payload(), secrets)
        sys.stdout.write(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    elif result.final_answer is not None and (quiet or not console.is_terminal):
        sys.stdout.write(redact(result.final_answer.rstrip(), secrets) + "\n")
    if not result.reached_answer:
        reason = redact(result.failure_reason or "the panel reached no answer", secrets)
        sys.stderr.write(f"panel: {reason} (run {run_id}).\n")
        raise typer.Exit(1)


def apply_demo(panel: Panel, demo: bool) -> Panel:
    return panel.as_demo() if demo else panel


def parse_names(value: str | None, option: str) -> list[str] | None:
    if value is None:
        return None
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        raise UserError(f"{option} needs at least one name, separated by commas.")
    return names
