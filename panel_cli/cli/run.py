"""`panel run FILE [OPTIONS]`: run a panel with the protocol its file names (`protocol:`).

The options after FILE are those of the protocol's own command (`panel confer --help`, …):
they are parsed by that command's parser, and the run goes through the same `run_protocol`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from panel_cli.cli import options


def run(
    ctx: typer.Context,
    panel_file: Path = options.panel_file_argument(),
) -> None:
    """Run a panel with the protocol its file names (protocol: confer, council, …).

    Every option of that protocol's command follows FILE: -q, --json, --quiet, --db, --demo,
    --attach, --max-cost, --max-calls, --dry-run, --continue and its own (panel confer --help, …)."""
    from panel_cli.cli.protocol_commands import protocol_command
    from panel_cli.config import load_panel
    from panel_cli.protocols.registry import spec

    protocol = load_panel(panel_file).protocol
    command = protocol_command(spec(protocol))
    # Parsed as `panel run`, beside `run` under `panel`, so a usage line reads `panel run [OPTIONS] FILE`.
    try:
        with command.make_context(ctx.info_name, [str(panel_file), *ctx.args], parent=ctx.parent) as parsed:
            command.invoke(parsed)
    except Exception as exc:
        if type(exc).__name__ == "NoSuchOption":  # Click's, as Typer vendors it
            _say_whose(exc, panel_file, protocol)
        raise


def _say_whose(refused: Any, panel_file: Path, protocol: str) -> None:
    """An option the file's protocol does not take, but another does: say whose it is, since the
    person wrote it for that protocol (`--tally is confer's option; vote.yaml runs vote`)."""
    from panel_cli.protocols.registry import specs

    flag = refused.option_name
    owners = [other.name for other in specs() if any(flag in (option.flag, option.short) for option in other.options)]
    if not owners:
        return
    whose = f"{owners[0]}'s option" if len(owners) == 1 else f"an option of {', '.join(owners[:-1])} and {owners[-1]}"
    refused.message = f"{flag} is {whose}; {panel_file} runs {protocol} (panel {protocol} -h lists its options)."
    refused.possibilities = None


# Everything after FILE belongs to the protocol's command, which parses (and refuses) it.
CONTEXT_SETTINGS = {"allow_extra_args": True, "ignore_unknown_options": True}
