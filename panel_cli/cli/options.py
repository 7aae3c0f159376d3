"""Options shared by every protocol command, declared once.

Flags need no value type here: the commands print every flag without one (see
`panel_cli.cli.app.PlainFlags`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

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


def panel_file_argument(required: bool = True) -> Path | None:
    return typer.Argument(  # type: ignore[no-any-return]
        ... if required else None,
        help="Panel YAML file.",
        metavar="FILE",
        dir_okay=False,
        autocompletion=completion.panel_files,
    )


MAX_COST = typer.Option(
    None,
    "--max-cost",
    min=0.0,
    metavar="USD",
    help="Make no call that could take the run's spend past this many US dollars (default: the file's defaults.max_cost).",
)
MAX_CALLS = typer.Option(None, "--max-calls", min=1, help="Make at most this many model calls.")
ALLOW_UNKNOWN_PRICES = typer.Option(
    False,
    "--allow-unknown-prices",
    help="With --max-cost, also run members whose price is unknown (their calls count as free).",
)
DRY_RUN = typer.Option(False, "--dry-run", help="Show the calls, tokens and cost the run would take, and make no call.")
FOLLOW_UP = typer.Option(
    None,
    "--continue",
    metavar="ID",
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


NO_CONTROLS = RunControls()

# Each field of RunControls as the command line spells it: its type and its option.
CONTROL_OPTIONS: dict[str, tuple[Any, Any]] = {
    "max_cost": (float | None, MAX_COST),
    "max_calls": (int | None, MAX_CALLS),
    "allow_unknown_prices": (bool, ALLOW_UNKNOWN_PRICES),
    "dry_run": (bool, DRY_RUN),
    "follow_up": (str | None, FOLLOW_UP),
}
assert list(CONTROL_OPTIONS) == [field.name for field in fields(RunControls)]


def with_run_controls(command: Callable[..., None]) -> Callable[..., None]:
    """Give a protocol command the options of RunControls, declared here once. The command
    takes one `controls: RunControls`; Typer reads the options from the signature, so they
    stand in it in `controls`' place, and are gathered into one RunControls when it is called.
    Called from Python (`panel run`), the command takes `controls=` as it is."""
    signature = inspect.signature(command)
    own = [parameter for name, parameter in signature.parameters.items() if name != "controls"]
    added = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=kind)
        for name, (kind, option) in CONTROL_OPTIONS.items()
    ]

    @functools.wraps(command)
    def gathered(*args: Any, **kwargs: Any) -> None:
        given = {name: kwargs.pop(name) for name in CONTROL_OPTIONS if name in kwargs}
        controls = kwargs.pop("controls", None) or RunControls(**given)
        command(*args, controls=controls, **kwargs)

    gathered.__signature__ = signature.replace(parameters=[*own, *added])  # type: ignore[attr-defined]
    gathered.__annotations__ = {
        **{name: kind for name, kind in command.__annotations__.items() if name != "controls"},
        **{name: kind for name, (kind, _) in CONTROL_OPTIONS.items()},
    }
    return gathered
