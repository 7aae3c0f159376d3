"""The statistics of an eval, as pure functions: exact binomial sums are small enough to add
up directly, so no SciPy.

- `wilson_interval`: a 95% interval for an accuracy. Unlike the textbook p ± 1.96·SE it stays
  inside [0, 1] and does not collapse to a point at 0/n or n/n, which small evals hit often.
- `mcnemar_exact`: whether two systems graded on the same questions differ. Only the questions
  where exactly one of them is right carry information; under "no difference" each of those is
  a fair coin, so the p-value is a two-sided binomial tail.
- `holm`: p-values adjusted for testing several pairs at once (Holm's step-down method): with
  every pair of systems compared, some p < 0.05 turns up by chance alone; Holm's adjustment
  keeps the chance of any false "significant" at 5% without assuming the tests independent.
- `paired_difference_interval`: a 95% interval for the difference of two accuracies measured on
  the same questions (Newcombe's square-and-add, method 10 of his 1998 paper on paired data):
  the two Wilson intervals combined, with the correlation of the pairing taken into account.
- `jury_probability`: the Condorcet jury theorem's chance that a strict majority of n
  independent voters, each right with probability p, is right: the line simulated voters
  are checked against.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

# The normal quantile of a two-sided 95% interval.
Z95 = 1.959963984540054
ALPHA = 0.05


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of `successes` out of `n`; (0, 1) when there is no trial."""
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"{successes} successes out of {n} trials is not a proportion")
    if n == 0:
        return 0.0, 1.0
    share = successes / n
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (share + z2 / (2 * n)) / denominator
    half = z / denominator * math.sqrt(share * (1 - share) / n + z2 / (4 * n * n))
    # At 0/n and n/n one end is exactly 0 or 1; the float sums land a hair off.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    return math.fsum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(max(k, 0), n + 1))


def mcnemar_exact(b: int, c: int) -> float:
    """The two-sided exact McNemar p-value. `b`: questions only the first system got right;
    `c`: only the second. With no such question there is no evidence either way: 1.0."""
    if b < 0 or c < 0:
        raise ValueError("discordant counts cannot be negative")
    n = b + c
    if n == 0:
        return 1.0
    low = min(b, c)
    # Exact integers, then one division: no rounding until the end.
    tail = sum(math.comb(n, i) for i in range(low + 1))
    return min(1.0, 2 * tail / 2**n)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's adjusted p-values, in the order given: the i-th smallest of m is multiplied by
    m − i + 1, never below the one before it, never above 1."""
    order = sorted(range(len(p_values)), key=lambda index: p_values[index])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def paired_difference_interval(
    both: int, only_first: int, only_second: int, neither: int, z: float = Z95
) -> tuple[float, float]:
    """A 95% interval for p1 − p2, the accuracies of two systems graded on the same questions:
    `both` right, `only_first`, `only_second`, `neither`. Newcombe's square-and-add (1998,
    method 10), with his correction to the correlation φ (0 for a small positive one)."""
    counts = (both, only_first, only_second, neither)
    if any(count < 0 for count in counts):
        raise ValueError("paired counts cannot be negative")
    n = sum(counts)
    if n == 0:
        return -1.0, 1.0
    first, second = both + only_first, both + only_second
    p1, p2 = first / n, second / n
    low1, high1 = wilson_interval(first, n, z)
    low2, high2 = wilson_interval(second, n, z)
    margins = first * (n - first) * second * (n - second)
    cross = both * neither - only_first * only_second
    phi = _correlation(cross, margins, n)
    below = math.sqrt(max(0.0, (p1 - low1) ** 2 - 2 * phi * (p1 - low1) * (high2 - p2) + (high2 - p2) ** 2))
    above = math.sqrt(max(0.0, (high1 - p1) ** 2 - 2 * phi * (high1 - p1) * (p2 - low2) + (p2 - low2) ** 2))
    return max(-1.0, p1 - p2 - below), min(1.0, p1 - p2 + above)


def _correlation(cross: int, margins: int, n: int) -> float:
    """Newcombe's φ: (ad − bc) over the margins, less n/2 when positive, 0 when that is below 0."""
    if margins == 0 or 0 <= cross <= n / 2:
        return 0.0
    return (cross - n / 2 if cross > 0 else cross) / math.sqrt(margins)


def standard_errors_apart(measured: float, expected: float, n: int, expected_error: float | None = None) -> float:
    """How many standard errors a share of `n` trials lies from an expected one (negative:
    below): the binomial error at the expected share, and the expected line's own error when
    it was simulated, added in quadrature."""
    if n < 1:
        raise ValueError("a comparison needs at least one trial")
    spread = math.sqrt(expected * (1 - expected) / n + (expected_error or 0.0) ** 2)
    if spread == 0:
        return 0.0 if measured == expected else math.copysign(math.inf, measured - expected)
    return (measured - expected) / spread


def jury_probability(voters: int, p: float) -> float:
    """The chance that more than half of `voters` independent voters, each right with
    probability `p`, are right (an even split is no majority)."""
    if voters < 1:
        raise ValueError("a jury needs at least one voter")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{p} is not a probability")
    return binomial_tail(voters // 2 + 1, voters, p)


def proportion_tolerance(p: float, n: int, standard_errors: float = 4.0) -> float:
    """How far an observed share of `n` trials may stray from `p` by chance alone: a number of
    binomial standard errors (4 is exceeded by chance about once in 16,000 runs)."""
    if n < 1:
        raise ValueError("a tolerance needs at least one trial")
    return standard_errors * math.sqrt(p * (1 - p) / n)
