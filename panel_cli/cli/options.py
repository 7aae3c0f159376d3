"""Options shared by every protocol command, declared once."""

from __future__ import annotations

from pathlib import Path

import typer

QUESTION = typer.Option(None, "--question", "-q", help="The question; otherwise stdin, then the panel file.")
JSON = typer.Option(False, "--json", help="Print only the result as JSON on stdout.")
QUIET = typer.Option(False, "--quiet", help="No progress; print only the final answer.")
DB = typer.Option(None, "--db", help="Transcript database (default: PANEL_DB, then the user data directory).", dir_okay=False)
DEMO = typer.Option(False, "--demo", help="Replace every model by an offline demo persona (no key, no network).")


def panel_file_argument(required: bool = True) -> Path | None:
    return typer.Argument(... if required else None, help="Panel YAML file.", metavar="FILE", dir_okay=False)  # type: ignore[no-any-return]
