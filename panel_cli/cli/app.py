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
import importlib
import os
import sys
from collections.abc import Iterator, MutableMapping
from functools import cached_property
from typing import Any, cast

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption
from typer.models import CommandInfo, DefaultPlaceholder

from panel_cli.cli import batch as batch_command
from panel_cli.cli import confer as confer_command
from panel_cli.cli import council as council_command
from panel_cli.cli import delphi as delphi_command
from panel_cli.cli import ensemble as ensemble_command
from panel_cli.cli import estimate as estimate_command
from panel_cli.cli import eval as eval_command
from panel_cli.cli import init as init_command
from panel_cli.cli import inspect as inspect_commands
from panel_cli.cli import orchestrate as orchestrate_command
from panel_cli.cli import resume as resume_command
from panel_cli.cli import run as run_command
from panel_cli.cli import supervise as supervise_command
from panel_cli.cli import vote as vote_command
from panel_cli.cli.signals import KeepsSignalHandlers, owning_the_process
from panel_cli.errors import PanelError

# history_app's own help, repeated here so that `panel --help` need not import it;
# tests/cli/test_app.py checks that the two agree.
HISTORY_HELP = "List and inspect the runs kept in the transcript store."


class PlainFlags:
    """Typer's Rich help prints a value type after every option, flags included
    (`--json <bool>`), though a flag takes no value. A blank metavar prints nothing.
    Done on the command rather than on each option, so that Typer's own flags (`--help`,
    `--install-completion`) and every command module's flags read alike."""

    def get_params(self, ctx: typer.Context) -> list[Any]:
        params: list[Any] = super().get_params(ctx)  # type: ignore[misc]
        for param in params:
            if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
                param.metavar = ""
        return params


class PanelCommand(PlainFlags, KeepsSignalHandlers, TyperCommand):
    """A command of `panel`: Typer's, with plain flags in its help, leaving the process's signal
    handlers as it found them."""


class PanelGroup(PlainFlags, TyperGroup):
    """A command group of `panel`: Typer's, with plain flags in its help."""


def adopt(sub_app: typer.Typer) -> None:
    """Build a sub-app's group and commands with panel's classes where it uses Typer's
    defaults (`Typer.command` records `TyperCommand` when given no class)."""
    if isinstance(sub_app.info.cls, DefaultPlaceholder) or sub_app.info.cls is None:
        sub_app.info.cls = PanelGroup
    for command in sub_app.registered_commands:
        if command.cls is None or command.cls is TyperCommand:
            command.cls = PanelCommand


class CommandsOnDemand(MutableMapping[str, TyperCommand]):
    """A Typer app's commands by name, each built the first time it is looked up. Click looks
    up only the command a line names; listing the names builds nothing; help, which shows
    every command's one-line help, builds them all."""

    def __init__(self, typer_app: typer.Typer) -> None:
        self._typer_app = typer_app
        self._infos: dict[str, CommandInfo] = {
            info.name or typer.main.get_command_name(info.callback.__name__): info  # type: ignore[union-attr]
            for info in typer_app.registered_commands
        }
        self._built: dict[str, TyperCommand] = {}

    def __getitem__(self, name: str) -> TyperCommand:
        if name not in self._built:
            built = typer.main.get_command_from_info(
                self._infos[name],
                pretty_exceptions_short=self._typer_app.pretty_exceptions_short,
                rich_markup_mode=self._typer_app.rich_markup_mode,
            )
            self._built[name] = cast(TyperCommand, built)  # `adopt` gave every command a TyperCommand class
        return self._built[name]

    def __setitem__(self, name: str, command: TyperCommand) -> None:
        self._infos.pop(name, None)
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self._infos.pop(name, None)
        self._built.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._infos or name in self._built

    def __iter__(self) -> Iterator[str]:
        return iter({**self._infos, **self._built})

    def __len__(self) -> int:
        return len({**self._infos, **self._built})


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
        self, info_name: str | None, args: list[str], parent: typer.Context | None = None, **extra: Any
    ) -> typer.Context:
        return self.group.make_context(info_name, args, parent=parent, **extra)


class SpreadOptionsCommand(vote_command.SpreadOptions, PanelCommand):
    """`panel vote` and `panel decide`: `--options A B C` takes every word up to the next flag."""


class RootGroup(PanelGroup):
    """The `panel` group: the commands registered on `root_commands`, each built when a command
    line names it, then the lazily loaded groups."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        registered_on_app = dict(self.commands)  # a command registered on `app` itself still counts
        self.commands = CommandsOnDemand(root_commands)
        self.commands.update(registered_on_app)
        self.add_command(LazyGroup("history", "panel_cli.cli.history:history_app", help=HISTORY_HELP))


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


root_commands.command("confer", cls=PanelCommand)(confer_command.confer)
root_commands.command("council", cls=PanelCommand)(council_command.council)
root_commands.command("ensemble", cls=PanelCommand)(ensemble_command.ensemble)
root_commands.command("delphi", cls=PanelCommand)(delphi_command.delphi)
root_commands.command("supervise", cls=PanelCommand)(supervise_command.supervise)
root_commands.command("estimate", cls=PanelCommand)(estimate_command.estimate)
root_commands.command("orchestrate", cls=PanelCommand)(orchestrate_command.orchestrate)
root_commands.command("validate", cls=PanelCommand)(inspect_commands.validate)
root_commands.command("models", cls=PanelCommand)(inspect_commands.models)
root_commands.command("run", cls=PanelCommand)(run_command.run)
root_commands.command("resume", cls=PanelCommand)(resume_command.resume)
root_commands.command("init", cls=PanelCommand)(init_command.init)
root_commands.command("vote", cls=SpreadOptionsCommand)(vote_command.vote)
root_commands.command("decide", cls=SpreadOptionsCommand)(vote_command.decide)
root_commands.command("batch", cls=PanelCommand)(batch_command.batch)
root_commands.command("eval", cls=PanelCommand)(eval_command.eval_command)


def _say(message: str) -> None:
    """Each line of a message on its own `panel:` line: several problems read as a list. A
    key quoted in an unexpected error is scrubbed like everywhere else."""
    from panel_cli.redact import redact, secret_values

    for line in redact(message, secret_values()).splitlines() or [""]:
        sys.stderr.write(f"panel: {line}\n")


def _is_usage_error(exc: Exception) -> bool:
    """Click's usage errors (Typer vendors its own click in recent versions, so match by shape)."""
    return any(cls.__name__ == "ClickException" for cls in type(exc).__mro__)


def main() -> None:
    """Entry point: every known error becomes one sentence and its exit code (SPEC §4).

    The program name is fixed so that `python -m panel_cli` prints the same usage lines
    and answers the same completion variable (`_PANEL_COMPLETE`) as the `panel` script."""
    try:
        with owning_the_process():
            code = app(prog_name="panel", standalone_mode=False)
    except (KeyboardInterrupt, typer.Abort):
        _say("interrupted.")
        code = 130
    except PanelError as exc:
        _say(exc.message)
        code = exc.exit_code
    except Exception as exc:
        if _is_usage_error(exc):
            exc.show()  # type: ignore[attr-defined]
            code = exc.exit_code  # type: ignore[attr-defined]
        elif os.environ.get("PANEL_TRACEBACK"):
            raise
        else:
            _say(
                f"unexpected error: {type(exc).__name__}: {exc} (run with --traceback or PANEL_TRACEBACK=1 for details)."
            )
            code = 1
    sys.exit(code if isinstance(code, int) else 0)
