"""`panel run FILE [OPTIONS]`: run a panel with the protocol its file names (`protocol:`).

The options after FILE are those of the protocol's own command (`panel confer --help`, …):
they are parsed by that command's parser, and the run goes through the same `run_protocol`.
"""

from __future__ import annotations

from pathlib import Path

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

    command = protocol_command(spec(load_panel(panel_file).protocol))
    with command.make_context(ctx.command_path, [str(panel_file), *ctx.args], parent=ctx) as parsed:
        command.invoke(parsed)


# Everything after FILE belongs to the protocol's command, which parses (and refuses) it.
CONTEXT_SETTINGS = {"allow_extra_args": True, "ignore_unknown_options": True}
