"""Text formatters shared by the live and the plain view, so both write numbers alike."""

from __future__ import annotations

UNKNOWN = "—"


def one_line(text: str, limit: int = 60) -> str:
    """Collapse whitespace and cut at `limit` characters, so a long answer fits one table cell."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[: limit - 1].rstrip() + "…"


def number(value: float) -> str:
    """170.0 reads `170`, 83.25 reads `83.2`: scores and confidences as people write them."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def seconds(value: float | None) -> str:
    return UNKNOWN if value is None else f"{value:.2f}s"


def tokens(value: int | None) -> str:
    return UNKNOWN if value is None else f"{value:,}"


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
