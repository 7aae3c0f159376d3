"""What a person sets about a run itself rather than its panel."""

from __future__ import annotations

from dataclasses import dataclass


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
