"""The models of `TranscriptReader.stats()` (`panel history stats`), apart so that other
history commands do not build them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Usage(BaseModel):
    """Totals of a group of calls or runs; `tokens` and `cost` are None when nothing in the
    group reported them (an unknown price is never $0)."""

    model_config = ConfigDict(defer_build=True)

    runs: int = 0
    calls: int = 0
    tokens: int | None = None
    cost: float | None = None


class ModelUsage(Usage):
    model: str


class ProtocolUsage(Usage):
    protocol: str


class MonthUsage(Usage):
    month: str  # YYYY-MM, in UTC


class StatsReport(BaseModel):
    """`panel history stats`: every run together, then by model (runs: how many runs called
    it), by protocol and by month."""

    model_config = ConfigDict(defer_build=True)

    total: Usage
    by_model: list[ModelUsage]
    by_protocol: list[ProtocolUsage]
    by_month: list[MonthUsage]
