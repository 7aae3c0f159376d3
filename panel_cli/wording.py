"""How panel writes a count in a sentence, for engines, views and exports alike."""

from __future__ import annotations


def plural(count: int, noun: str) -> str:
    """`1 call`, `2 calls`, `1,204 calls`."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"
