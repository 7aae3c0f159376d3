"""Text formatters shared by the live and the plain view, so both write numbers alike."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from panel_cli.totals import RunTotals
from panel_cli.untrusted import without_controls
from panel_cli.wording import dollars, plural

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
# A demo run's cost in a cell of a table of runs, where `simulated, free` would take 16
# columns on every row.
FREE = "free"


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


def basis_cost(value: float | None, basis: str, unpriced: Iterable[str] = (), *, compact: bool = False) -> str:
    """A cost as its basis reads (`panel_cli.totals.cost_basis`), the same on every surface:
    `simulated, free` (`free` in a `compact` cell); `$0.0123`; `at least $0.0123 (no price:
    model-a, model-b)` when some calls had no price, or `unknown (no price: …)` when the priced
    ones came to nothing (`at least $0.0000` says nothing); `—` when no call had a price."""
    if basis == "simulated":
        return FREE if compact else SIMULATED_COST
    if basis == "partial":
        names = ", ".join(unpriced)
        floor = f"at least {cost(value)}" if value else "unknown"
        return floor + (f" (no price: {names})" if names else "")
    return cost(value)


def cost(value: float | None) -> str:
    """Dollars to four places, as providers price tokens; a model without a price reports
    None, and an unknown cost is never shown as $0. A tiny known cost says so instead of
    rounding to zero."""
    return UNKNOWN if value is None else dollars(value)


def cost_span(low: float | None, high: float | None, *, complete: bool = True, unknown: str = UNKNOWN) -> str:
    """An estimate's cost from its low to its high, each end as `cost` words it:
    `$0.0012–$0.0450`; `free` when both are 0; `unknown` (`unknown`) without a price; `at least
    …` when part of it is unknown. A low under a hundredth of a cent is written to two
    significant digits (`$0.000031–$0.1738`): `<$0.0001–$0.1738` reads as two bounds at once,
    and `≥ <$0.0001` as three."""
    if low is None and high is None:
        return unknown
    if complete and low == 0 and high == 0:
        return FREE
    if low == high:
        text = cost(low)
    else:
        bottom = _tiny_cost(low) if low is not None and 0 < low < 0.0001 else cost(low)
        text = f"{bottom}–{cost(high) if high is not None else unknown}"
    return text if complete else f"at least {text}"


def _tiny_cost(value: float) -> str:
    """A cost under a hundredth of a cent to two significant digits, `$0.000031`; past a
    millionth of a cent, as that (`<$0.00000001`)."""
    digits = 1 - math.floor(math.log10(value))
    if digits > TINY_DIGITS:
        return f"<${10**-TINY_DIGITS:.{TINY_DIGITS}f}"
    return f"${value:.{digits}f}"


# The most decimal places a tiny cost is written with.
TINY_DIGITS = 8


def calls_count(calls: int, by_status: Mapping[str, int], *, noun: bool = False) -> str:
    """`7 (4 reused, 1 failed, 2 cancelled)` (`7 calls (…)` with `noun`): the calls made and how
    those that did not simply answer ended (`by_status`, as `RunTotals.by_status` counts them). A
    call the budget refused made no request and is not among them: it is told after them, `8 (1
    failed) + 1 refused by the budget`."""
    notes = [
        f"{by_status[status]:,} {status}"
        for status in ("reused", "late", "failed", "cancelled")
        if by_status.get(status)
    ]
    made = (plural(calls, "call") if noun else f"{calls:,}") + (f" ({', '.join(notes)})" if notes else "")
    refused = by_status.get("refused", 0)
    return made + (f" + {refused} refused by the budget" if refused else "")


def spent_anew(totals: RunTotals) -> str | None:
    """What a run that reused calls paid for itself, `3 calls · 1,204 tokens · $0.0021`; None
    when it reused none (its totals say it all)."""
    if not totals.reused:
        return None
    anew = totals.anew
    spent = basis_cost(anew.cost if not totals.simulated else 0.0, totals.cost_basis, ())
    return f"{plural(anew.calls, 'call')} · {tokens(anew.tokens)} tokens · {spent}"


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
