"""Every protocol's command, built from its spec (`panel_cli.protocols.registry`): the panel
file, `-q`, the protocol's own options, the options every run takes; then the run, prepared and
executed by the run core, its result shown, and its exit code (docs/exit-codes.md).

`panel run FILE` parses the rest of its command line with the command of the file's protocol
and runs it through the same `run_protocol`, so the two never differ.
"""

from __future__ import annotations

import inspect
import json
import shlex
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import typer
from typer.core import DEFAULT_MARKUP_MODE, TyperCommand

from panel_cli.cli import completion, options
from panel_cli.cli.commands import PanelCommand, SpreadWordsCommand
from panel_cli.exit_status import ExitStatus
from panel_cli.protocols.registry import CommandOption, PanelSource, ProtocolSpec
from panel_cli.runs.controls import RunControls

if TYPE_CHECKING:
    from panel_cli.config import Panel
    from panel_cli.protocols.gates import Gate
    from panel_cli.runs.ask import FinishedRun
    from panel_cli.runs.loader import GatewayLoader
    from panel_cli.runs.resume import Continuation
    from panel_cli.view.environment import Environment

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

    command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]  # typeshed's functions lack the __signature__ inspect.signature reads
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
    elif option.field is not None and option.kind == "text":
        settings["autocompletion"] = completion.field_values(option.field)  # a Literal's values
    if option.kind == "words":
        settings["show_default"] = False
        return _keyword(option.name, list[str] | None, typer.Option(None, *flags, **settings))
    default = False if option.kind == "flag" else None
    return _keyword(option.name, _KINDS[option.kind], typer.Option(default, *flags, **settings))


def run_protocol(protocol: ProtocolSpec, values: Mapping[str, Any], env: Environment | None = None) -> None:
    """A protocol's command line, parsed (`values`, by parameter name; one left out is not
    given), run to its end: the panel, its checks, every missing key before any prompt, the
    question, then the run (or its estimate with `--dry-run`), drawn and written on `env`'s
    streams (default: the process's own). Exits 1 when the run reaches no answer, or as its
    gate says with `--gate`."""
    from panel_cli.cli.questions import question_for
    from panel_cli.cli.signals import on_sigterm_exit
    from panel_cli.runs.panels import panel_for_run
    from panel_cli.runs.prepare import check_keys, ready_to_call
    from panel_cli.view.environment import Environment

    on_sigterm_exit()
    env = env or Environment()
    controls = RunControls(**{name: values[name] for name in RUN_CONTROL_NAMES if values.get(name) is not None})
    given = {option.name: values.get(option.name) for option in protocol.options}
    panel_file: Path | None = values.get("panel_file")
    quiet = bool(values.get("quiet"))
    chosen = panel_for_run(protocol, panel_file, given, demo=bool(values.get("demo")), attach=values.get("attach"))
    loader = gateway_loader(env, shown=not quiet)
    loader.start(chosen.panel)
    if not controls.dry_run:
        check_keys(chosen.panel)
        warn_of_keys(env, chosen.panel)

    def before_prompt() -> None:
        """The keys only litellm can judge (and the models it routes), before a question is typed."""
        if not controls.dry_run:
            ready_to_call(loader, chosen.panel)

    question = question_for(
        chosen.panel, panel_file, values.get("question"), stdin=env.stdin, before_prompt=before_prompt
    )
    execute(
        env,
        loader,
        chosen.panel,
        question,
        warnings=chosen.warnings,
        gate=chosen.gate,
        json_mode=bool(values.get("json_mode")),
        quiet=quiet,
        no_stream=bool(values.get("no_stream")),
        db=values.get("db"),
        controls=controls,
    )


def gateway_loader(env: Environment, *, shown: bool = True) -> GatewayLoader:
    """litellm's import for a command: a spinner on a terminal's stderr while the command waits for it."""
    from panel_cli.runs.loader import GatewayLoader

    return GatewayLoader(waiting=lambda: env.waiting("Loading the model gateway…", shown=shown))


def warn_of_keys(env: Environment, panel: Panel) -> None:
    """Before litellm loads and before any prompt: each key the run sends to a host that is
    neither this machine nor its provider's (`panel_cli.runs.prepare.key_notices`)."""
    from panel_cli.runs.prepare import key_notices

    notices = key_notices(panel)
    if notices:
        env.warn("\n".join(notices))


def execute(
    env: Environment,
    loader: GatewayLoader,
    panel: Panel,
    question: str,
    *,
    warnings: list[str],
    json_mode: bool,
    quiet: bool,
    db: Path | None,
    controls: RunControls,
    gate: Gate | None = None,
    continuing: Continuation | None = None,
    no_stream: bool = False,
) -> None:
    """Run the panel, drawn on `env`, and exit with its code (docs/exit-codes.md): 0 answer, 1
    no answer, 2 user error, 130 or 143 interrupted; with a `gate`, 0, 1 or 3 as it judges.
    `warnings` (found by the checks) are raised inside the run, so they are shown and stored
    with it. `continuing`: the run this one resumes. `no_stream`: answers are not streamed into
    the live view."""
    from panel_cli.cli.signals import run_until_signal
    from panel_cli.runs.ask import run_stored
    from panel_cli.runs.execute import new_run_id
    from panel_cli.runs.followup import resolve_follow_up
    from panel_cli.runs.prepare import prepare_run
    from panel_cli.store.paths import resolve_db_path
    from panel_cli.view.base import make_view

    db_path = resolve_db_path(db)
    if controls.dry_run:
        from panel_cli.cli.dry_run import show_estimate

        follow_up = resolve_follow_up(db_path, controls.follow_up) if controls.follow_up is not None else None
        show_estimate(env, loader, panel, question, json_mode=json_mode, follow_up=follow_up)
        return
    prepared = prepare_run(
        loader,
        panel,
        question,
        warnings=warnings,
        controls=controls,
        db_path=db_path,
        continuing=continuing,
        gate=gate,
    )
    run_id = new_run_id()

    async def run() -> FinishedRun:
        """The run, and what the store could not keep of it: the answer is shown either way."""
        view = make_view(env, json_mode=json_mode, quiet=quiet)
        try:
            return await run_stored(
                prepared,
                db_path=db_path,
                view=view,
                run_id=run_id,
                # Only a person watching the live view gains from streaming; a resume never streams.
                stream=not (json_mode or no_stream) and continuing is None and getattr(view, "follows_text", False),
            )
        except BaseException as exc:
            for note in getattr(exc, "__notes__", ()):  # what the store could not keep
                env.say(note)
            raise

    resume = shlex.join(["panel", "resume", run_id, *(["--db", str(db)] if db is not None else [])])
    report(env, run_until_signal(run, run_id, resume), json_mode=json_mode, quiet=quiet)


GATE_WORDS = {ExitStatus.SUCCESS: "passed", ExitStatus.FAILURE: "failed", ExitStatus.UNDECIDED: "undecided"}


def report(env: Environment, finished: FinishedRun, *, json_mode: bool, quiet: bool) -> None:
    """A run's result on stdout (its JSON, or the answer when no live view drew it), why it has
    no answer or how its gate judged it on stderr, then its exit code."""
    payload = finished.payload
    run_id = payload["run_id"]
    answer = payload["final_answer"]
    if json_mode:
        env.stdout.write(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    elif answer is not None and (quiet or not env.console.is_terminal):
        env.stdout.write(answer.rstrip() + "\n")
    gate = payload.get("gate")
    if gate is not None:
        status = ExitStatus(gate["exit_status"])
        env.say(f"gate {GATE_WORDS[status]}: {gate['reason']} (run {run_id}).")
    elif not payload["reached_answer"]:
        env.say(f"{payload['failure_reason'] or 'the panel reached no answer'} (run {run_id}).")
        status = ExitStatus.FAILURE
    else:
        status = ExitStatus.SUCCESS
    if finished.store_failure is not None:
        env.say(finished.store_failure.message)
        status = ExitStatus.FAILURE
    if status != ExitStatus.SUCCESS:
        raise typer.Exit(status)
