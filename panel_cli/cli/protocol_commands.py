"""Every protocol's command, built from its spec (`panel_cli.protocols.registry`): the panel
file, `-q`, the protocol's own options, the options every run takes; then the run, prepared and
executed by the run core, its result shown, and its exit code (docs/exit-codes.md).

`panel run FILE` parses the rest of its command line with the command of the file's protocol
and runs it through the same `run_protocol`, so the two never differ.
"""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import typer
from rich.console import Console
from typer.core import DEFAULT_MARKUP_MODE, TyperCommand

from panel_cli.cli import completion, options
from panel_cli.cli.commands import PanelCommand, SpreadWordsCommand
from panel_cli.exit_status import ExitStatus
from panel_cli.protocols.registry import CommandOption, PanelSource, ProtocolSpec
from panel_cli.runs.controls import RunControls

if TYPE_CHECKING:
    from panel_cli.config import Panel
    from panel_cli.runs.loader import GatewayLoader
    from panel_cli.runs.resume import Continuation
    from panel_cli.store.subscriber import StoreFailure, TranscriptStore

# The parameters every protocol command takes after its own options, by name.
COMMON = ("json_mode", "quiet", "no_stream", "db", "demo", "attach")
_KINDS: dict[str, Any] = {"text": str | None, "int": int | None, "float": float | None, "flag": bool}


def protocol_command(
    protocol: ProtocolSpec, *, pretty_exceptions_short: bool = True, rich_markup_mode: Any = DEFAULT_MARKUP_MODE
) -> TyperCommand:
    """The Click command of `protocol`, as Typer builds it from a signature made of the spec."""
    own = [_parameter(option) for option in protocol.options]
    clashes = {parameter.name for parameter in own} & {"panel_file", "question", *COMMON, *RUN_CONTROL_NAMES}
    if clashes:
        raise ValueError(f"protocol {protocol.name}: option names {sorted(clashes)} are taken by every command")
    parameters = [
        _keyword("panel_file", Path | None, options.panel_file_argument(protocol.source is PanelSource.FILE)),
        _keyword("question", str | None, options.QUESTION),
        *own,
        _keyword("json_mode", bool, options.JSON),
        _keyword("quiet", bool, options.QUIET),
        _keyword("no_stream", bool, options.NO_STREAM),
        _keyword("db", Path | None, options.DB),
        _keyword("demo", bool, options.DEMO),
        _keyword("attach", list[Path] | None, options.ATTACH),
        *(_keyword(name, kind, option) for name, (kind, option) in options.RUN_CONTROLS.items()),
    ]

    def command(**values: Any) -> None:
        run_protocol(protocol, values)

    command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    command.__doc__ = "\n\n".join(text for text in (protocol.summary, protocol.description) if text)
    words = tuple(option.flag for option in protocol.options if option.kind == "words")
    info = typer.models.CommandInfo(
        name=protocol.name, callback=command, cls=SpreadWordsCommand if words else PanelCommand
    )
    built = cast(
        TyperCommand,
        typer.main.get_command_from_info(
            info, pretty_exceptions_short=pretty_exceptions_short, rich_markup_mode=rich_markup_mode
        ),
    )
    if isinstance(built, SpreadWordsCommand):
        built.spread_flags = words
    return built


RUN_CONTROL_NAMES = tuple(field.name for field in fields(RunControls))
assert set(RUN_CONTROL_NAMES) == set(options.RUN_CONTROLS)


def _keyword(name: str, kind: Any, default: Any) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=kind)


def _parameter(option: CommandOption) -> inspect.Parameter:
    """A spec's option as Typer reads it: a parameter whose default is a `typer.Option`."""
    flags = [option.flag, *([option.short] if option.short else [])]
    settings: dict[str, Any] = {"help": option.help}
    if option.minimum is not None:
        settings["min"] = option.minimum
    if option.maximum is not None:
        settings["max"] = option.maximum
    if option.metavar is not None:
        settings["metavar"] = option.metavar
    if option.completion is not None:
        settings["autocompletion"] = getattr(completion, option.completion)
    if option.kind == "words":
        settings["show_default"] = False
        return _keyword(option.name, list[str] | None, typer.Option(None, *flags, **settings))
    default = False if option.kind == "flag" else None
    return _keyword(option.name, _KINDS[option.kind], typer.Option(default, *flags, **settings))


def run_protocol(protocol: ProtocolSpec, values: Mapping[str, Any]) -> None:
    """A protocol's command line, parsed (`values`, by parameter name; one left out is not
    given), run to its end: the panel, its checks, every missing key before any prompt, the
    question, then the run (or its estimate with `--dry-run`). Exits 1 when the run reaches no
    answer."""
    from panel_cli.cli.questions import question_for
    from panel_cli.cli.signals import on_sigterm_exit
    from panel_cli.runs.loader import GatewayLoader
    from panel_cli.runs.panels import panel_for_run
    from panel_cli.runs.prepare import check_keys, ready_to_call

    on_sigterm_exit()
    controls = RunControls(**{name: values[name] for name in RUN_CONTROL_NAMES if values.get(name) is not None})
    given = {option.name: values.get(option.name) for option in protocol.options}
    panel_file: Path | None = values.get("panel_file")
    chosen = panel_for_run(protocol, panel_file, given, demo=bool(values.get("demo")), attach=values.get("attach"))
    loader = GatewayLoader()
    loader.start(chosen.panel)
    if not controls.dry_run:
        check_keys(chosen.panel)

    def before_prompt() -> None:
        """The keys only litellm can judge (and the models it routes), before a question is typed."""
        if not controls.dry_run:
            stderr = Console(stderr=True)
            ready_to_call(loader, chosen.panel, console=stderr, show_progress=stderr.is_terminal)

    question = question_for(chosen.panel, panel_file, values.get("question"), before_prompt=before_prompt)
    execute(
        loader,
        chosen.panel,
        question,
        warnings=chosen.warnings,
        json_mode=bool(values.get("json_mode")),
        quiet=bool(values.get("quiet")),
        no_stream=bool(values.get("no_stream")),
        db=values.get("db"),
        controls=controls,
    )


def execute(
    loader: GatewayLoader,
    panel: Panel,
    question: str,
    *,
    warnings: list[str],
    json_mode: bool,
    quiet: bool,
    db: Path | None,
    controls: RunControls,
    continuing: Continuation | None = None,
    no_stream: bool = False,
) -> None:
    """Run the panel and exit with its code (docs/exit-codes.md): 0 answer, 1 no answer, 2 user
    error, 130 or 143 interrupted. `warnings` (found by the checks) are raised inside the run,
    so they are shown and stored with it. `continuing`: the run this one resumes. `no_stream`:
    answers are not streamed into the live view."""
    from panel_cli.cli.signals import run_until_signal
    from panel_cli.redact import redact, redact_obj
    from panel_cli.runs.execute import new_run_id, run_panel
    from panel_cli.runs.followup import resolve_follow_up
    from panel_cli.runs.outcome import RunOutcome
    from panel_cli.runs.prepare import prepare_run
    from panel_cli.store.paths import resolve_db_path
    from panel_cli.store.subscriber import TranscriptStore
    from panel_cli.view.base import make_view
    from panel_cli.view.output import output_console

    console = output_console()
    db_path = resolve_db_path(db)
    if controls.dry_run:
        from panel_cli.cli.estimate import show_estimate

        follow_up = resolve_follow_up(db_path, controls.follow_up) if controls.follow_up else None
        show_estimate(loader, panel, question, json_mode=json_mode, console=console, follow_up=follow_up)
        return
    # With --json, stdout carries the result alone: progress, if any, goes to a terminal on stderr.
    progress = Console(stderr=True) if json_mode else console
    prepared = prepare_run(
        loader,
        panel,
        question,
        warnings=warnings,
        controls=controls,
        db_path=db_path,
        continuing=continuing,
        console=progress,
        show_progress=progress.is_terminal and not quiet,
    )
    run_id = new_run_id()

    async def run() -> tuple[RunOutcome, StoreFailure | None]:
        """The run, and what the store could not keep of it: the answer is shown either way."""
        store = await TranscriptStore.open(db_path)
        view = make_view(console, json_mode=json_mode, quiet=quiet, err_stream=sys.stderr)
        try:
            outcome = await run_panel(
                prepared,
                store=store,
                view=view,
                run_id=run_id,
                # Only a person watching the live view gains from streaming; a resume never streams.
                stream=not (json_mode or no_stream) and continuing is None and getattr(view, "follows_text", False),
            )
        except BaseException:
            if failure := await closed(store):
                sys.stderr.write(f"panel: {failure.message}\n")
            raise
        return outcome, await closed(store)

    outcome, store_failure = run_until_signal(run, run_id)
    result = outcome.result
    if json_mode:
        payload = redact_obj(outcome.payload(), prepared.secrets)
        sys.stdout.write(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    elif result.final_answer is not None and (quiet or not console.is_terminal):
        sys.stdout.write(redact(result.final_answer.rstrip(), prepared.secrets) + "\n")
    if not result.reached_answer:
        reason = redact(result.failure_reason or "the panel reached no answer", prepared.secrets)
        sys.stderr.write(f"panel: {reason} (run {run_id}).\n")
    if store_failure is not None:
        sys.stderr.write(f"panel: {store_failure.message}\n")
    if store_failure is not None or not result.reached_answer:
        raise typer.Exit(ExitStatus.FAILURE)


async def closed(store: TranscriptStore) -> StoreFailure | None:
    """Close `store`; what it could not write, if anything."""
    from panel_cli.store.subscriber import StoreFailure

    try:
        await store.close()
    except StoreFailure as failure:
        return failure
    return None
