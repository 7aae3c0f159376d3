"""The Click classes every `panel` command and group is built with."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption

from panel_cli.cli.signals import KeepsSignalHandlers

if TYPE_CHECKING:
    from typer import _click as click

    # To the checker, the Click command a mixin goes before (Typer's own click, which it vendors).
    _Command = click.Command
else:
    _Command = object


class PlainFlags(_Command):
    """Typer's Rich help prints a value type after every option, flags included
    (`--json <bool>`), though a flag takes no value. A blank metavar prints nothing.
    Done on the command rather than on each option, so that Typer's own flags (`--help`,
    `--install-completion`) and every command module's flags read alike."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params = super().get_params(ctx)
        for param in params:
            if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
                param.metavar = ""
        return params


class PanelCommand(PlainFlags, KeepsSignalHandlers, TyperCommand):
    """A command of `panel`: Typer's, with plain flags in its help, leaving the process's signal
    handlers as it found them."""


class PanelGroup(PlainFlags, TyperGroup):
    """A command group of `panel`: Typer's, with plain flags in its help."""


def spread_words(args: list[str], flags: tuple[str, ...]) -> list[str]:
    """`--options A B C` -> `--options A --options B --options C`: every word after one of
    `flags` up to the next word that starts with `-` (a flag, or `--` before positional words)."""
    spread: list[str] = []
    taking: str | None = None
    for index, arg in enumerate(args):
        if arg == "--":
            spread += args[index:]
            break
        if taking is not None and not arg.startswith("-"):
            spread += [taking, arg]
            continue
        taking = arg if arg in flags else None
        if taking is None:
            spread.append(arg)
        elif index + 1 == len(args) or args[index + 1].startswith("-"):
            raise typer.BadParameter(
                f"give the {arg.lstrip('-')} after it, like {arg} PostgreSQL MySQL", param_hint=f"'{arg}'"
            )
    return spread


class SpreadWordsCommand(PanelCommand):
    """A command with options that take every word up to the next flag (`--options A B C`), as a
    person types a list: Click gives an option one value per flag, so the words are spread into
    one flag each before Click parses them. `spread_flags` are those options' flags."""

    spread_flags: tuple[str, ...] = ()

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, spread_words(args, self.spread_flags))
