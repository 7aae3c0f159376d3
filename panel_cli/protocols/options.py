"""Command options several protocols share, declared once: each protocol's spec lists them
among its own (`panel_cli.protocols.<name>.__init__`).

Like the specs, they stay light: the panel model (`panel_cli.config`) is imported only when an
option changes a panel, so `panel --help` reads every spec without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from panel_cli.protocols.registry import CommandOption

if TYPE_CHECKING:
    from panel_cli.config import Panel

MEMBERS = CommandOption(
    name="members",
    flag="--members",
    help="Members, comma-separated: aliases or litellm model ids (no file needed), or names from the file.",
    completion="member_names",
)


def chairman(help: str = "Who writes the final answer; several, comma-separated, are tried in order.") -> CommandOption:
    return CommandOption(name="chairman", flag="--chairman", help=help, completion="member_names")


def timeout(stages: tuple[str, ...], help: str = "Time limit per stage, like 90s, 3m or none.") -> CommandOption:
    """`--timeout`: the same limit for each of `stages`, keeping the file's other stage limits."""
    from functools import partial

    return CommandOption(name="timeout", flag="--timeout", help=help, change=partial(_with_timeout, stages))


def _with_timeout(stages: tuple[str, ...], panel: Panel, value: str) -> Panel:
    from panel_cli.config import parse_duration

    return panel.with_stage_limits(stages, parse_duration(value))


def stop(help: str) -> CommandOption:
    """`--stop decided` or `--stop 'confident(0.95)'`: ask members a few at a time and stop early
    (docs/protocols.md#stopping-early); `all` asks everyone, whatever the file says."""
    return CommandOption(name="stop", flag="--stop", help=help, field="stop", metavar="RULE", noun="stopping rule")


def max_rounds(help: str) -> CommandOption:
    return CommandOption(
        name="max_rounds", flag="--max-rounds", help=help, kind="int", field="max_rounds", minimum=1, maximum=50
    )


def no_convergence(help: str) -> CommandOption:
    return CommandOption(
        name="no_convergence",
        flag="--no-convergence",
        help=help,
        kind="flag",
        field="until_convergence",
        flag_value=False,
    )
