"""The statistics of an eval, as pure functions: exact binomial sums are small enough to add
up directly, so no SciPy.

- `wilson_interval`: a 95% interval for an accuracy. Unlike the textbook p ± 1.96·SE it stays
  inside [0, 1] and does not collapse to a point at 0/n or n/n, which small evals hit often.
- `mcnemar_exact`: whether two systems graded on the same questions differ. Only the questions
  where exactly one of them is right carry information; under "no difference" each of those is
  a fair coin, so the p-value is a two-sided binomial tail.
- `jury_probability`: the Condorcet jury theorem's chance that a strict majority of n
  independent voters, each right with probability p, is right: the line simulated voters
  are checked against.
"""

from __future__ import annotations

import math

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
