"""Options shared by the commands, declared once.

Flags need no value type here: the commands print every flag without one (see
`panel_cli.cli.commands.PlainFlags`).
"""

from __future__ import annotations

from typing import Any

import typer

from panel_cli.cli import completion
from panel_cli.runs.controls import MAX_CALLS

QUESTION = typer.Option(
    None,
    "--question",
    "-q",
    help='The question; "-" reads it from stdin. Default: the panel file\'s question, else stdin.',
)
JSON = typer.Option(False, "--json", help="Print only the result as JSON on stdout.")
QUIET = typer.Option(False, "--quiet", help="No progress; print only the final answer.")
DB = typer.Option(
    None,
    "--db",
    help="Transcript database (default: $PANEL_DB, else panel.db in the user data folder).",
    dir_okay=False,
)
DEMO = typer.Option(False, "--demo", help="Replace every model by an offline demo persona (no key, no network).")
ATTACH = typer.Option(
    None,
    "--attach",
    help="A text file every member gets with the question (repeat for more).",
    dir_okay=False,
    metavar="FILE",
)


def panel_file_argument(required: bool = True) -> Any:
    return typer.Argument(
        ... if required else None,
        help="Panel YAML file.",
        metavar="FILE",
        dir_okay=False,
        autocompletion=completion.panel_files,
    )


def dollars(value: float | None) -> float | None:
    """`--max-cost`: a sum of US dollars (`panel_cli.runs.controls.cost_cap_problem`)."""
    from panel_cli.runs.controls import cost_cap_problem

    if value is not None and (problem := cost_cap_problem(value)) is not None:
        raise typer.BadParameter(f"{problem}.")
    return value


# The options of `panel_cli.runs.controls.RunControls`, by field: its type and its option.
RUN_CONTROLS: dict[str, tuple[Any, Any]] = {
    "max_cost": (
        float | None,
        typer.Option(
            None,
            "--max-cost",
            callback=dollars,
            metavar="USD",
            help="Make no call that could take the run's spend past this many US dollars "
            "(default: the file's defaults.max_cost).",
        ),
    ),
    "max_calls": (
        int | None,
        typer.Option(None, "--max-calls", min=1, max=MAX_CALLS, help="Make at most this many model calls."),
    ),
    "allow_unknown_prices": (
        bool,
        typer.Option(
            False,
            "--allow-unknown-prices",
            help="With --max-cost, also run members whose price is unknown (their calls count as free).",
        ),
    ),
    "dry_run": (
        bool,
        typer.Option(False, "--dry-run", help="Show the calls, tokens and cost the run would take, and make no call."),
    ),
    "follow_up": (
        str | None,
        typer.Option(
            None,
            "--continue",
            metavar="ID",
            help="Ask a follow-up to run ID ('last': the latest run): members see its question and final answer first.",
        ),
    ),
}
