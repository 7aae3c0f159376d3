"""What a person sets about a run itself rather than its panel."""

from __future__ import annotations

from dataclasses import dataclass

from panel_cli.errors import BudgetError

# `--max-calls`: at most this many model calls may be allowed to one run.
MAX_CALLS = 1_000_000


@dataclass(frozen=True)
class RunControls:
    """A spending cap (`max_cost` in US dollars, `max_calls`), whether members of unknown price
    may run under a cost cap, an estimate instead of the run (`dry_run`), and the run this one
    follows up (`follow_up`: an id, a unique beginning of one, or `last`)."""

    max_cost: float | None = None
    max_calls: int | None = None
    allow_unknown_prices: bool = False
    dry_run: bool = False
    follow_up: str | None = None


NO_CONTROLS = RunControls()


def cost_cap_problem(value: float) -> str | None:
    """What is wrong with `value` as `--max-cost`, or None: a sum of US dollars, so neither NaN
    (which every comparison fails, so the cap refused every call) nor infinite, and within the
    panel file's bound for the same cap."""
    from panel_cli.config import MAX_COST

    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{value!r} is not an amount of US dollars"
    if not 0 <= value <= MAX_COST:
        return f"{value:g} is not an amount from 0 to {MAX_COST:,.0f} US dollars"
    return None


def check_controls(controls: RunControls) -> None:
    """The caps as the command line's parser checks them, for a caller that has no parser
    (the Python API): BudgetError, in the command line's words, for a cap out of bounds."""
    if controls.max_cost is not None and (problem := cost_cap_problem(controls.max_cost)) is not None:
        raise BudgetError(f"--max-cost: {problem}.")
    calls = controls.max_calls
    if calls is not None and (isinstance(calls, bool) or not isinstance(calls, int) or not 1 <= calls <= MAX_CALLS):
        raise BudgetError(f"--max-calls: {calls!r} is not in the range 1<=x<={MAX_CALLS}.")
