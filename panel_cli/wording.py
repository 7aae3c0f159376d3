"""How panel writes a count or a sum of money in a sentence, for engines, views and exports alike."""

from __future__ import annotations


def plural(count: int, noun: str) -> str:
    """`1 call`, `2 calls`, `1,204 calls`."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def dollars(value: float) -> str:
    """A known cost to four places, as providers price tokens: `$0.0123`, `$1,204.5000`. A tiny
    one says so rather than round to nothing (`<$0.0001`); `$0.0000` is only ever nothing."""
    if 0 < value < 0.0001:
        return "<$0.0001"
    return f"${value:,.4f}"
