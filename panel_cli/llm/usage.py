"""A reply's token counts as its provider reports them: numbers from outside, like any other
field of a reply.

A provider (or a proxy in front of one) can report anything: a negative count, 10**30, a
float, text. A count we keep is stored in SQLite's INTEGER, summed into the run's totals and
priced into the run's budget, where a negative one would give money back. So a count outside
[0, MAX_TOKENS] makes the reply's usage unknown: neither count is kept, the gateway warns,
and the budget counts the call at its worst case, as for any reply whose usage is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Far beyond any context window or reply; anything larger is not a count.
MAX_TOKENS = 10**9


@dataclass(frozen=True)
class Usage:
    """The counts kept from one reply (None: not reported), or why none was (`problem`)."""

    tokens_in: int | None = None
    tokens_out: int | None = None
    problem: str | None = None


def _valid(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS)


def _shown(value: Any) -> str:
    text = (
        repr(value)
        if not isinstance(value, int) or abs(value) < 10**12
        else f"{'-' if value < 0 else ''}a {len(str(abs(value)))}-digit number"
    )
    return text if len(text) <= 40 else text[:39] + "…"


def reported_usage(tokens_in: Any, tokens_out: Any) -> Usage:
    """The counts of one reply as its provider gave them, or no counts and why."""
    bad = [
        (name, value)
        for name, value in (("prompt_tokens", tokens_in), ("completion_tokens", tokens_out))
        if not _valid(value)
    ]
    if not bad:
        return Usage(tokens_in, tokens_out)
    named = ", ".join(f"{name} {_shown(value)}" for name, value in bad)
    return Usage(
        problem=f"its provider reported usage outside 0 to {MAX_TOKENS:,} tokens ({named}); its tokens and cost are unknown"
    )
