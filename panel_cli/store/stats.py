"""The models of `TranscriptReader.stats()` (`panel history stats`), apart so that other
history commands do not build them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Usage(BaseModel):
    """Totals of a group of calls or runs; `tokens` and `cost` are None when nothing in the
    group reported them (an unknown price is never $0). `cost_basis` and `unpriced` say how to
    read the cost, as a run's envelope does (`panel_cli.totals.ledger_cost`). `late`: of the
    calls, those whose reply came after their stage had stopped waiting (counted, not used)."""

    model_config = ConfigDict(defer_build=True)

    runs: int = 0
    calls: int = 0
    tokens: int | None = None
    cost: float | None = None
    cost_basis: str = "unknown"
    unpriced: list[str] = Field(default_factory=list)
    late: int = 0


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
