"""Options shared by every protocol command, declared once.

Flags need no value type here: the commands print every flag without one (see
`panel_cli.cli.app.PlainFlags`).
"""

from __future__ import annotations

from pathlib import Path

import typer

from panel_cli.cli import completion

QUESTION = typer.Option(
    None,
    "--question",
    "-q",
    help='The question; "-" reads it from stdin. Default: the panel file\'s question, else stdin.',
)
JSON = typer.Option(False, "--json", help="Print only the result as JSON on stdout.")
QUIET = typer.Option(False, "--quiet", help="No progress; print only the final answer.")
DB = typer.Option(
    None, "--db", help="Transcript database (default: $PANEL_DB, else panel.db in the user data folder).", dir_okay=False
)
DEMO = typer.Option(False, "--demo", help="Replace every model by an offline demo persona (no key, no network).")
ATTACH = typer.Option(
    None, "--attach", help="A text file every member gets with the question (repeat for more).", dir_okay=False, metavar="FILE"
)


def panel_file_argument(required: bool = True) -> Path | None:
    return typer.Argument(  # type: ignore[no-any-return]
        ... if required else None,
        help="Panel YAML file.",
        metavar="FILE",
        dir_okay=False,
        autocompletion=completion.panel_files,
    )
