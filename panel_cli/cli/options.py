"""Options shared by every protocol command, declared once.

Flags need no value type here: the commands print every flag without one (see
`panel_cli.cli.app.PlainFlags`).
"""

from __future__ import annotations

from dataclasses import dataclass
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
MAX_COST = typer.Option(
    None, "--max-cost", min=0.0, metavar="USD",
    help="Make no call that could take the run's spend past this many US dollars (default: the file's defaults.max_cost).",
)
MAX_CALLS = typer.Option(None, "--max-calls", min=1, help="Make at most this many model calls.")
ALLOW_UNKNOWN_PRICES = typer.Option(
    False, "--allow-unknown-prices", help="With --max-cost, also run members whose price is unknown (their calls count as free)."
)
DRY_RUN = typer.Option(False, "--dry-run", help="Show the calls, tokens and cost the run would take, and make no call.")
FOLLOW_UP = typer.Option(
    None, "--continue", metavar="ID",
    help="Ask a follow-up to run ID ('last': the latest run): members see its question and final answer first.",
)


@dataclass(frozen=True)
class RunControls:
    """What every protocol command lets a person set about the run itself rather than the
    panel: a spending cap, an estimate instead of the run, and the run it follows up."""

    max_cost: float | None = None
    max_calls: int | None = None
    allow_unknown_prices: bool = False
    dry_run: bool = False
    follow_up: str | None = None
