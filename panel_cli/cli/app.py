"""The `panel` command: the Typer app, its command groups, and the one top-level error handler.

`panel --help` must cost little more than any Typer CLI's help, so nothing here imports the
store, the config models or litellm. Command modules import those inside the command
function; `panel history`, whose module imports the store at the top, is registered as a
`LazyGroup` that imports it only when a command line reaches it. Typer builds a Click command
from every command of an app at each start, reading each parameter; here only the command a
line names is built (`CommandsOnDemand`), at the top and in `history`, and help, which lists
them all, builds them all.
"""

from __future__ import annotations

import copy
import functools
import importlib
import os
import signal
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, TypeGuard

import typer
from typer.core import MarkupMode, TyperCommand, TyperGroup
from typer.models import DefaultPlaceholder

from panel_cli.cli.closed_pipes import flush_quietly, keep_going_when_readers_leave
from panel_cli.cli.commands import PanelCommand, PanelGroup
from panel_cli.cli.signals import Interrupted, ctrl_c_as_interrupted, owning_the_process
from panel_cli.errors import PanelError
from panel_cli.exit_status import ExitStatus

if TYPE_CHECKING:
    from typer import _click as click

# history_app's and eval_app's own help, repeated here so that `panel --help` need not import
# them; tests/cli/test_app.py checks that the two agree.
HISTORY_HELP = "List and inspect the runs kept in the transcript store."
EVAL_HELP = "Measure the panel against one member alone on questions with known answers, and keep every eval."


def adopt(sub_app: typer.Typer) -> None:
    """Build a sub-app's group and commands with panel's classes where it uses Typer's
    defaults (`Typer.command` records `TyperCommand` when given no class)."""
    if isinstance(sub_app.info.cls, DefaultPlaceholder) or sub_app.info.cls is None:
        sub_app.info.cls = PanelGroup
    for command in sub_app.registered_commands:
        if command.cls is None or command.cls is TyperCommand:
            command.cls = PanelCommand


class CommandSettings(TypedDict):
    """The app's settings Typer builds each of its commands with."""

    pretty_exceptions_short: bool
    rich_markup_mode: MarkupMode


class CommandsOnDemand(MutableMapping[str, "click.Command"]):
    """A group's commands by name, each built the first time it is looked up: those a Typer
    app registers, and each protocol's, built from its spec. Click looks up only the command a
    line names; listing the names builds nothing; help, which shows every command's one-line
    help, builds them all."""

    def __init__(
        self, typer_app: typer.Typer, protocols: Iterable[str] = (), modules: Mapping[str, str] | None = None
    ) -> None:
        settings: CommandSettings = {
            "pretty_exceptions_short": typer_app.pretty_exceptions_short,
            "rich_markup_mode": typer_app.rich_markup_mode,
        }
        self._builders: dict[str, Callable[[], click.Command]] = {
            name: functools.partial(build_protocol_command, name, settings) for name in protocols
        }
        for name, path in (modules or {}).items():
            self._builders[name] = functools.partial(build_module_command, name, path, settings)
        for info in typer_app.registered_commands:
            assert info.callback is not None, "a registered command has its function"  # as Typer asserts
            name = info.name or typer.main.get_command_name(info.callback.__name__)
            self._builders[name] = functools.partial(typer.main.get_command_from_info, info, **settings)
        self._built: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._built:
            self._built[name] = self._builders[name]()
        return self._built[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._builders.pop(name, None)
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self._builders.pop(name, None)
        self._built.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._builders or name in self._built

    def __iter__(self) -> Iterator[str]:
        return iter({**self._builders, **self._built})

    def __len__(self) -> int:
        return len({**self._builders, **self._built})


def build_protocol_command(name: str, settings: CommandSettings) -> TyperCommand:
    """A protocol's command, from its spec: imported only when a command line names it (or help lists it)."""
    from panel_cli.cli.protocol_commands import protocol_command
    from panel_cli.protocols.registry import spec

    return protocol_command(spec(name), **settings)


def build_module_command(name: str, path: str, settings: CommandSettings) -> click.Command:
    """A top-level command whose function is `path` ("module:function"), its module imported
    only when a command line names it (or help lists it). A module's `CONTEXT_SETTINGS`, if
    it has them, are the command's."""
    module_name, _, attribute = path.partition(":")
    module = importlib.import_module(module_name)
    info = typer.models.CommandInfo(
        name=name,
        cls=PanelCommand,
        callback=getattr(module, attribute),
        context_settings=getattr(module, "CONTEXT_SETTINGS", None),
    )
    return typer.main.get_command_from_info(info, **settings)


class LazyGroup(TyperGroup):
    """Stands for a Typer sub-app in its parent's command list and in completion, and
    imports the sub-app only when a command line reaches it. The real group then parses,
    helps and runs: `make_context` hands the command line to it, so the context's command
    is the real group from there on."""

    def __init__(self, name: str, import_path: str, help: str) -> None:
        super().__init__(name=name, help=help)
        self.import_path = import_path

    @cached_property
    def group(self) -> TyperGroup:
        """The sub-app's group, its commands built on demand: Typer reads every parameter of
        every command to build one, a cost only the command that runs needs to pay."""
        module_name, _, attribute = self.import_path.partition(":")
        sub_app: typer.Typer = getattr(importlib.import_module(module_name), attribute)
        adopt(sub_app)
        shell = copy.copy(sub_app)
        shell.registered_commands = []
        group = typer.main.get_group(shell)
        group.commands = CommandsOnDemand(sub_app)
        return group

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        return self.group.make_context(info_name, args, parent=parent, **extra)


class RootGroup(PanelGroup):
    """The `panel` group: every protocol's command and those registered on `root_commands`, each
    built when a command line names it, then the lazily loaded groups."""

    def __init__(self, **attrs: Any) -> None:
        from panel_cli.protocols.registry import names

        super().__init__(**attrs)
        registered_on_app = dict(self.commands)  # a command registered on `app` itself still counts
        self.commands = CommandsOnDemand(root_commands, names(), ROOT_COMMANDS)
        self.commands.update(registered_on_app)
        self.add_command(LazyGroup("history", "panel_cli.cli.history:history_app", help=HISTORY_HELP))
        self.add_command(LazyGroup("eval", "panel_cli.cli.eval:eval_app", help=EVAL_HELP))

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        with ctrl_c_as_interrupted():
            return super().make_context(info_name, args, parent=parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with ctrl_c_as_interrupted():
            return super().invoke(ctx)


# The top-level commands. Registered here rather than on `app`, since Typer builds every
# command of an app at each start, and `RootGroup` builds only the one a command line names.
root_commands = typer.Typer()

app = typer.Typer(
    name="panel",
    cls=RootGroup,
    help="Let several language models deliberate together, live in the terminal, every run kept.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def show_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"panel {version('panel-cli')}")
        raise typer.Exit()


@app.callback()
def main_options(
    traceback: bool = typer.Option(False, "--traceback", help="Show the full traceback of an unexpected error."),
    version: bool = typer.Option(
        False,
        "--version",
        is_eager=True,
        expose_value=False,
        callback=show_version,
        help="Show panel's version and exit.",
    ),
) -> None:
    if traceback:
        os.environ["PANEL_TRACEBACK"] = "1"


# The top-level commands by name, each "module:function": a module is imported only when a
# command line names its command (`panel history list` imports none of them).
ROOT_COMMANDS = {
    "estimate": "panel_cli.cli.estimate:estimate",
    "validate": "panel_cli.cli.inspect:validate",
    "models": "panel_cli.cli.inspect:models",
    "run": "panel_cli.cli.run:run",
    "resume": "panel_cli.cli.resume:resume",
    "init": "panel_cli.cli.init:init",
    "batch": "panel_cli.cli.batch:batch",
    "mcp": "panel_cli.cli.mcp_command:mcp",
}


def _say(message: str) -> None:
    """Each line of a message on its own `panel:` line: several problems read as a list. A
    key quoted in an unexpected error is scrubbed like everywhere else. A terminal already
    closed (SIGHUP) hears nothing (`closed_pipes`), and the exit code still says what happened."""
    from panel_cli.redact import redact, secret_values

    for line in redact(message, secret_values()).splitlines() or [""]:
        sys.stderr.write(f"panel: {line}\n")
    sys.stderr.flush()


class _ClickError(Protocol):
    """What a Click exception offers, from whichever click raised it."""

    exit_code: int

    def show(self) -> None: ...


def _is_usage_error(exc: Exception) -> TypeGuard[_ClickError]:
    """Click's usage errors (Typer vendors its own click in recent versions, so match by shape)."""
    return any(cls.__name__ == "ClickException" for cls in type(exc).__mro__)


def main() -> None:
    """Entry point: every known error becomes one sentence and its exit code (docs/exit-codes.md).

    The program name is fixed so that `python -m panel_cli` prints the same usage lines
    and answers the same completion variable (`_PANEL_COMPLETE`) as the `panel` script."""
    keep_going_when_readers_leave()
    try:
        with owning_the_process(), ctrl_c_as_interrupted():
            code = app(prog_name="panel", standalone_mode=False)
    except typer.Abort:  # end of input at the question prompt
        _say("interrupted.")
        code = ExitStatus.SIGINT
    except PanelError as exc:
        if isinstance(exc, Interrupted):
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut this line short
        _say(exc.message)
        code = exc.exit_code
    except Exception as exc:
        if _is_usage_error(exc):
            exc.show()
            code = exc.exit_code
        elif os.environ.get("PANEL_TRACEBACK"):
            raise
        else:
            _say(
                f"unexpected error: {type(exc).__name__}: {exc} (run with --traceback or PANEL_TRACEBACK=1 for details)."
            )
            code = ExitStatus.FAILURE
    lost = flush_quietly()
    code = code if isinstance(code, int) else ExitStatus.SUCCESS
    if lost is not None:
        # The run (if any) ended and was stored as it would have; its output was not seen.
        _say(f"the output could not be written ({lost}).")
        code = code or ExitStatus.FAILURE
    sys.exit(code)
