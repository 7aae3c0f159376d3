"""`panel mcp`: serve a folder of panels to an MCP client. Parses, checks, and hands over to
`panel_cli.mcp_server`; the MCP SDK is imported only once the command runs."""

from __future__ import annotations

from pathlib import Path

import typer

from panel_cli.cli import options
from panel_cli.mcp_server import DEFAULT_MAX_COST


def mcp(
    panels: Path = typer.Option(
        ...,
        "--panels",
        metavar="DIR",
        file_okay=False,
        exists=True,
        help="The folder of panel files an agent may run, each by its name without .yaml (default.yaml there runs "
        "when it names none, else your default panel). It never gives a panel's YAML.",
    ),
    db: Path | None = options.DB,
    max_cost: float = typer.Option(
        DEFAULT_MAX_COST,
        "--max-cost",
        callback=options.dollars,
        metavar="USD",
        help="The most one run may spend, in US dollars: a run whose lowest estimate is above it is refused with "
        "the estimate; the others make no call past it.",
    ),
    files: Path | None = typer.Option(
        None,
        "--files",
        metavar="DIR",
        file_okay=False,
        exists=True,
        help="A folder an agent may attach text files from, by their path inside it (no symlink out of it). "
        "Without it, no attachments.",
    ),
    allow_unknown_prices: bool = typer.Option(
        False,
        "--allow-unknown-prices",
        help="Let a member whose price litellm does not know run under the cap, counted as free.",
    ),
    http: str | None = typer.Option(
        None,
        "--http",
        metavar="HOST:PORT",
        help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (port 0: a free one). Every request "
        "needs the header Authorization: Bearer TOKEN, TOKEN from $PANEL_MCP_TOKEN or printed on stderr.",
    ),
    allow_remote: bool = typer.Option(
        False, "--allow-remote", help="With --http, listen on an address other than this machine's loopback."
    ),
) -> None:
    """Serve the panels of a folder to an MCP client (Claude Code, Claude Desktop, Cursor).

    Each protocol is a tool named after it (confer, council, vote, …): the agent gives a question, a panel's name and the protocol's options, and gets the run's answer and its JSON result (docs/result.md). Also list_panels, history, and every stored run as a resource (panel://runs/ID). Progress is sent as calls end; a cancelled request leaves its run interrupted, for panel resume.

    Over stdio (the default) the client starts panel mcp; stdout carries the protocol alone, notices go to stderr. Stopped by a signal, it exits 130 or 143, every run in flight kept as interrupted.
    """
    from panel_cli.cli.signals import on_sigterm_exit, run_until_signal
    from panel_cli.errors import UserError
    from panel_cli.mcp_server.server import ServerSettings, serve
    from panel_cli.mcp_server.transports import bearer_token, parse_address
    from panel_cli.store.paths import resolve_db_path

    on_sigterm_exit()
    if allow_remote and http is None:
        raise UserError("--allow-remote goes with --http.")
    address = parse_address(http, allow_remote=allow_remote) if http is not None else None
    token, from_variable = bearer_token() if address is not None else (None, False)
    settings = ServerSettings(
        panels=panels.resolve(),
        db=resolve_db_path(db),
        max_cost=max_cost,
        files=files.resolve() if files is not None else None,
        allow_unknown_prices=allow_unknown_prices,
        secrets=(token,) if token else (),
    )
    run_until_signal(lambda: serve(settings, address, token, show_token=not from_variable), "")
