"""Text formatters shared by the live and the plain view, so both write numbers alike."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from panel_cli.untrusted import without_controls

UNKNOWN = "—"
NO_AGGREGATE = "aggregate ranking: none (no review gave a usable ranking)"


# As much of a text as a table cell keeps: more than the widest terminal's line, since the cell
# cuts it to the width it is given.
CELL_TEXT = 1_000


def flat(text: str) -> str:
    """Every run of whitespace (line breaks too) as one space, and nothing cut: an id on one
    line. Terminal controls go too, should the text predate their removal on the way in."""
    return " ".join(without_controls(text).split())


def one_line(text: str, limit: int = CELL_TEXT) -> str:
    """Collapse whitespace and cut at `limit` characters, so a long answer fits one table cell."""
    line = flat(text)
    if len(line) <= limit:
        return line
    return line[: limit - 1].rstrip() + "…"


def number(value: float) -> str:
    """170.0 reads `170`, 83.25 reads `83.2`: scores and confidences as people write them."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def seconds(value: float | None) -> str:
    return UNKNOWN if value is None else f"{value:.2f}s"


def running(value: float) -> str:
    """How long a call has run so far, in whole seconds: `12s`."""
    return f"{max(int(value), 0)}s"


def tokens(value: int | None) -> str:
    return UNKNOWN if value is None else f"{value:,}"


SIMULATED_COST = "simulated, free"


def simulated(models: Iterable[str]) -> bool:
    """Whether these are demo personas alone: their run cost nothing and has no price to show."""
    names = list(models)
    return bool(names) and all(name.startswith("demo/") for name in names)


def run_cost(value: float | None, models: Iterable[str]) -> str:
    """The cost of a run (or its calls) of these models: `simulated, free` for demo personas
    alone, rather than an unknown price or $0."""
    return SIMULATED_COST if simulated(models) else cost(value)


# A call's note where its reply came after its stage had stopped waiting for it (`late`).
LATE_NOTE = "late (answered after the race was won: paid, kept, not used)"


def call_cost(value: float | None, model: str) -> str:
    """One call's cost: a demo persona's is `simulated, free`, never `$0.0000`."""
    return SIMULATED_COST if model.startswith("demo/") else cost(value)


def basis_cost(value: float | None, basis: str, unpriced: Iterable[str] = ()) -> str:
    """A cost as its basis reads (`panel_cli.totals.cost_basis`), the same on every surface:
    `simulated, free`; `$0.0123`; `at least $0.0123 (no price: model-a, model-b)` when some
    calls had no price; `—` when none had one."""
    if basis == "simulated":
        return SIMULATED_COST
    if basis == "partial":
        names = ", ".join(unpriced)
        return f"at least {cost(value)}" + (f" (no price: {names})" if names else "")
    return cost(value)


def cost(value: float | None) -> str:
    """Dollars to four places, as providers price tokens; a model without a price reports
    None, and an unknown cost is never shown as $0. A tiny known cost says so instead of
    rounding to zero."""
    if value is None:
        return UNKNOWN
    if 0 < value < 0.0001:
        return "<$0.0001"
    return f"${value:,.4f}"


def percent(share: float) -> str:
    return f"{share * 100:.0f}%"


def who(member: str, about: str | None) -> str:
    """`engineer → sage` for a call about sage's response, so a member's several calls in one
    stage tell apart."""
    return f"{member} → {about}" if about else member


def label_order(label: str) -> tuple[int, str]:
    """Labels as they were given, A…Z, then AA, AB, …; as strings sort, AA would come before B."""
    return len(label), label


def tally_order(scores: Mapping[str, float], *, best_first: bool) -> list[tuple[str, float]]:
    """confer's rounds keep label order, so a label sits at the same place every round; a
    choice made once (ensemble's) reads best first, ties in label order."""
    if best_first:
        return sorted(scores.items(), key=lambda item: (-item[1], label_order(item[0])))
    return sorted(scores.items(), key=lambda item: label_order(item[0]))
