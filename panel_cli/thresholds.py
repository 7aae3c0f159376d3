"""supermajority's threshold: the share of the votes an option must exceed. One range for the
panel file, `--threshold`, `panel history retally` and the Python API, said one way
(docs/protocols.md#vote-and-decide).

A share above 0 and below 1: no share of the votes exceeds 1, so a threshold of 1 could never
be met (every vote is what `unanimous` asks for).
"""

from __future__ import annotations

import math

DEFAULT_THRESHOLD = 0.667
THRESHOLD_RANGE = "a share above 0 and below 1"


def threshold_problem(value: object) -> str | None:
    """Why `value` cannot be a threshold, said of the value; None for one that can."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"give {THRESHOLD_RANGE}, such as 0.75, not {value!r}"
    if math.isfinite(value) and 0 < value < 1:
        return None
    problem = f"{THRESHOLD_RANGE}, such as 0.75 (more than 75% of the votes), not {value:g}"
    return problem + ("; for every vote, use the method unanimous" if value == 1 else "")


def as_percent(share: float) -> str:
    """A share of the votes as a person reads it: `66.7%`, `75%`, `66.66%`. Two decimals, not
    fewer: 4 votes of 6 exceed a threshold of 0.6666, which must not read as 66.7%."""
    return f"{share * 100:.2f}".rstrip("0").rstrip(".") + "%"
