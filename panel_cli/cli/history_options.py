"""The options every `panel history` command shares, apart from the commands so that
`history export` (cli/history_export.py) takes them without importing cli/history.py."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from panel_cli.cli import completion

DB_HELP = "Transcript database (default: $PANEL_DB, else panel.db in the user data folder)."
DbOption = Annotated[Path | None, typer.Option("--db", help=DB_HELP, dir_okay=False)]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON on stdout instead of a table.")]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Delete without asking first.")]
RunIdArgument = Annotated[
    str,
    typer.Argument(
        metavar="ID",
        help="A run id, any unique beginning of one, or last (the run started last).",
        autocompletion=completion.run_ids,
    ),
]
