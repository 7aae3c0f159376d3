"""Whether a system's stated confidence is a probability: of the answers it gave at 0.8, are
eight in ten right? Pure functions over (confidence, right) pairs.

- `reliability_table`: the answers in equal-width bins of confidence, each with its count, mean
  confidence and accuracy: the reliability diagram, as numbers.
- `expected_calibration_error` (ECE): the bins' gaps between accuracy and mean confidence,
  weighted by their counts. 0 for a calibrated confidence, up to sampling noise (about 0.02 on
  1,000 answers); confer's vote share × mean stated confidence scored 0.47 on 0.9 + 4 × 0.6.
- `brier_score`: the mean of (confidence − right)². It rewards being sure as well as being
  calibrated, so it is read against the best a confidence can do: the exact posterior's Brier
  (`Theory.posterior_brier`), E[q(1 − q)] for q the probability the answer is right given the
  votes; a ratio near 1 is as good as the votes allow.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, Field

BINS = 10


class ReliabilityBin(BaseModel):
    """The answers whose confidence fell in [low, high) (the last bin closed at 1)."""

    low: float
    high: float
    count: int
    mean_confidence: float | None
    accuracy: float | None


class ConfidenceScore(BaseModel):
    """How a system's `confidence` did over its items: `items` with one (`without` had none:
    no answer, or no known accuracy, `reason` says which), the ECE, the Brier score, the
    reliability table, what the confidence rests on (`basis`), and, on simulated voters, the
    exact posterior's Brier and the ratio of the two."""

    items: int
    without: int
    ece: float | None = None
    brier: float | None = None
    bins: list[ReliabilityBin] = Field(default_factory=list)
    basis: str | None = None
    reason: str | None = None
    posterior_brier: float | None = None
    brier_ratio: float | None = Field(default=None, description="Brier ÷ the exact posterior's")


def _checked(pairs: Sequence[tuple[float, bool]]) -> None:
    if any(not 0.0 <= confidence <= 1.0 for confidence, _ in pairs):
        raise ValueError("a confidence is a probability from 0 to 1")


def reliability_table(pairs: Sequence[tuple[float, bool]], bins: int = BINS) -> list[ReliabilityBin]:
    """Every bin of [0, 1] in `bins` equal widths, empty ones included."""
    if bins < 1:
        raise ValueError("a reliability table needs at least one bin")
    _checked(pairs)
    grouped: list[list[tuple[float, bool]]] = [[] for _ in range(bins)]
    for confidence, right in pairs:
        grouped[min(int(confidence * bins), bins - 1)].append((confidence, right))
    return [
        ReliabilityBin(
            low=index / bins,
            high=(index + 1) / bins,
            count=len(found),
            mean_confidence=math.fsum(c for c, _ in found) / len(found) if found else None,
            accuracy=sum(right for _, right in found) / len(found) if found else None,
        )
        for index, found in enumerate(grouped)
    ]


def expected_calibration_error(pairs: Sequence[tuple[float, bool]], bins: int = BINS) -> float:
    """Σ over bins of (count / N) × |accuracy − mean confidence|; 0 with no answer."""
    table = reliability_table(pairs, bins)
    total = sum(row.count for row in table)
    if total == 0:
        return 0.0
    return math.fsum(
        row.count / total * abs(row.accuracy - row.mean_confidence)
        for row in table
        if row.accuracy is not None and row.mean_confidence is not None
    )


def brier_score(pairs: Sequence[tuple[float, bool]]) -> float:
    """The mean of (confidence − right)²; 0 with no answer."""
    _checked(pairs)
    if not pairs:
        return 0.0
    return math.fsum((confidence - right) ** 2 for confidence, right in pairs) / len(pairs)


def confidence_score(
    pairs: Sequence[tuple[float, bool]],
    without: int,
    *,
    basis: str | None,
    reason: str | None,
    posterior_brier: float | None = None,
    bins: int = BINS,
) -> ConfidenceScore:
    """A system's `ConfidenceScore` from its items' (confidence, right) pairs."""
    if not pairs:
        return ConfidenceScore(items=0, without=without, basis=basis, reason=reason, posterior_brier=posterior_brier)
    brier = brier_score(pairs)
    return ConfidenceScore(
        items=len(pairs),
        without=without,
        ece=expected_calibration_error(pairs, bins),
        brier=brier,
        bins=reliability_table(pairs, bins),
        basis=basis,
        reason=reason,
        posterior_brier=posterior_brier,
        brier_ratio=brier / posterior_brier if posterior_brier else None,
    )
