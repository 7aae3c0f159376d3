"""Times as the transcript file keeps them: ISO-8601 UTC text, so the `sqlite3` shell shows
dates a person can read and sort, while Python keeps epoch seconds (floats).

The text must give back the very float it was made from: a replayed run's events keep their
exact timestamps, and a migrated file reads back identically. The fraction is the digits of
the float's shortest repr, which `float()` turns back into the same float, padded to nine so
that every time since 1973 has the same width and sorts as text in time order.
"""

from __future__ import annotations

import calendar
import math
import time

FRACTION_DIGITS = 9


def iso_time(ts: float) -> str:
    """`1764514392.1234567` -> `2025-11-30T14:53:12.123456700Z`."""
    text = repr(float(ts))
    if ts < 0 or not math.isfinite(ts) or "e" in text:
        # Never a real run's time; kept to the nanosecond rather than exactly.
        seconds = math.floor(ts)
        fraction = f"{ts - seconds:.{FRACTION_DIGITS}f}"[2:]
    else:
        whole, _, fraction = text.partition(".")
        seconds = int(whole)
        fraction = fraction.ljust(FRACTION_DIGITS, "0")
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{fraction}Z"


def epoch(text: str) -> float:
    """The inverse of `iso_time`."""
    date, _, fraction = text.rstrip("Z").partition(".")
    seconds = calendar.timegm(
        (int(date[0:4]), int(date[5:7]), int(date[8:10]), int(date[11:13]), int(date[14:16]), int(date[17:19]))
    )
    if seconds < 0:
        return seconds + float(f"0.{fraction or '0'}")
    return float(f"{seconds}.{fraction or '0'}")


def optional_epoch(text: str | None) -> float | None:
    return None if text is None else epoch(text)
