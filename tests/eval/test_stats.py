"""The eval's statistics against values worked out by hand."""

from __future__ import annotations

import math

import pytest

from panel_cli.eval.stats import (
    binomial_tail,
    holm,
    jury_probability,
    mcnemar_exact,
    paired_difference_interval,
    proportion_tolerance,
    standard_errors_apart,
    wilson_interval,
)


def test_wilson_interval_of_seven_in_ten():
    # p̂ = 0.7, z² = 3.8415: centre (0.7 + 0.19207) / 1.38415 = 0.64449,
    # half-width 1.95996 / 1.38415 × √(0.021 + 0.0096037) = 0.24771.
    low, high = wilson_interval(7, 10)
    assert low == pytest.approx(0.39677, abs=1e-5)
    assert high == pytest.approx(0.89220, abs=1e-5)


def test_wilson_interval_at_the_ends_stays_inside_zero_to_one():
    # 0 of 10: centre = half-width = 0.13877, so the interval is [0, 0.27753].
    assert wilson_interval(0, 10) == (0.0, pytest.approx(0.27753, abs=1e-5))
    assert wilson_interval(10, 10) == (pytest.approx(0.72247, abs=1e-5), 1.0)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_wilson_interval_is_symmetric_and_narrows_with_more_trials():
    low, high = wilson_interval(50, 100)
    assert (low + high) / 2 == pytest.approx(0.5)
    assert high - low > wilson_interval(500, 1000)[1] - wilson_interval(500, 1000)[0]


@pytest.mark.parametrize("successes, n", [(-1, 10), (11, 10), (1, -1)])
def test_wilson_interval_refuses_what_is_not_a_proportion(successes, n):
    with pytest.raises(ValueError):
        wilson_interval(successes, n)


@pytest.mark.parametrize(
    "b, c, expected",
    [
        (8, 2, 0.109375),  # n = 10: 2 × (1 + 10 + 45) / 1024
        (2, 8, 0.109375),  # two-sided: the same either way round
        (10, 0, 0.001953125),  # 2 × 1 / 1024
        (6, 1, 0.125),  # n = 7: 2 × (1 + 7) / 128
        (1, 0, 1.0),  # 2 × 1 / 2, capped at 1
        (5, 5, 1.0),
        (0, 0, 1.0),  # no discordant question: no evidence either way
    ],
)
def test_mcnemar_exact_by_hand(b, c, expected):
    assert mcnemar_exact(b, c) == expected


def test_mcnemar_exact_has_no_rounding_for_large_counts():
    # 600 discordant questions: 2^600 overflows a float, the exact sum does not.
    assert 0.0 < mcnemar_exact(330, 270) < 0.05
    assert mcnemar_exact(300, 300) == 1.0


def test_mcnemar_refuses_negative_counts():
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 3)


def test_jury_probability_matches_the_issue():
    # 5 voters at 0.7: 10·0.7³·0.3² + 5·0.7⁴·0.3 + 0.7⁵ = 0.3087 + 0.36015 + 0.16807.
    assert jury_probability(5, 0.7) == pytest.approx(0.83692, abs=1e-9)
    # 5 voters at 0.6: 0.3456 + 0.2592 + 0.07776.
    assert jury_probability(5, 0.6) == pytest.approx(0.68256, abs=1e-9)
    assert round(jury_probability(5, 0.7), 3) == 0.837
    assert round(jury_probability(5, 0.6), 3) == 0.683


def test_jury_probability_of_small_and_even_juries():
    assert jury_probability(1, 0.7) == pytest.approx(0.7)
    assert jury_probability(3, 0.7) == pytest.approx(0.784)  # 3·0.49·0.3 + 0.343
    # Four voters at a coin's odds: a 2–2 split is no majority, so only 3 or 4 right: 5/16.
    assert jury_probability(4, 0.5) == pytest.approx(0.3125)
    assert jury_probability(5, 0.0) == 0.0
    assert jury_probability(5, 1.0) == 1.0


@pytest.mark.parametrize("voters, p", [(0, 0.5), (3, 1.5), (3, -0.1)])
def test_jury_probability_refuses_nonsense(voters, p):
    with pytest.raises(ValueError):
        jury_probability(voters, p)


def test_binomial_tail_sums_to_one_from_zero():
    assert binomial_tail(0, 12, 0.3) == pytest.approx(1.0)
    assert binomial_tail(13, 12, 0.3) == 0.0


def test_proportion_tolerance_is_four_standard_errors():
    assert proportion_tolerance(0.5, 100) == pytest.approx(0.2)
    assert proportion_tolerance(0.837, 400) == pytest.approx(4 * math.sqrt(0.837 * 0.163 / 400))


# Holm's adjustment and the paired interval. The references: Holm's adjusted p-values as
# statsmodels' `multipletests(method="holm")` gives them (computed once in a scratch
# environment, statsmodels being no dependency of panel), and Newcombe's paired interval on the
# worked example of Fagerland, Lydersen & Laake, "Statistical Analysis of Contingency Tables"
# (2017), chapter 8 (Cavo et al. 2012: 59 both, 6 only before, 16 only after, 80 neither:
# −0.0621, 95% CI −0.1186 to −0.0046).


@pytest.mark.parametrize(
    "p_values, adjusted",
    [
        ([0.01, 0.04, 0.03, 0.005], [0.03, 0.06, 0.06, 0.02]),
        ([0.2, 0.5, 0.01], [0.4, 0.5, 0.03]),
        ([0.04, 0.04, 0.04], [0.12, 0.12, 0.12]),
        ([], []),
        ([0.7], [0.7]),
    ],
)
def test_holm_matches_statsmodels(p_values, adjusted):
    assert holm(p_values) == pytest.approx(adjusted, abs=1e-12)


def test_holm_by_hand():
    """Three tests: the smallest times 3, the next times 2 (but not below the first), the last as is."""
    assert holm([0.02, 0.001, 0.5]) == pytest.approx([0.04, 0.003, 0.5])
    assert holm([0.6, 0.3, 0.4]) == pytest.approx([0.9, 0.9, 0.9])


def test_newcombe_paired_interval_on_the_books_example():
    low, high = paired_difference_interval(59, 6, 16, 80)
    assert (round(low, 4), round(high, 4)) == (-0.1186, -0.0046)


def test_newcombe_paired_interval_by_hand():
    """The same table, step by step: Wilson intervals of 65/161 and 75/161 (statsmodels:
    0.331037–0.480904 and 0.390481–0.542789), φ from ad − bc = 4624 less n/2 over the margins."""
    n = 161
    p1, p2 = 65 / n, 75 / n
    low1, high1 = 0.3310367548370932, 0.4809037592679161
    low2, high2 = 0.390480631970418, 0.5427885827120047
    phi = (59 * 80 - 6 * 16 - n / 2) / math.sqrt(65 * 96 * 75 * 86)
    low = p1 - p2 - math.sqrt((p1 - low1) ** 2 - 2 * phi * (p1 - low1) * (high2 - p2) + (high2 - p2) ** 2)
    high = p1 - p2 + math.sqrt((p2 - low2) ** 2 - 2 * phi * (p2 - low2) * (high1 - p1) + (high1 - p1) ** 2)
    assert paired_difference_interval(59, 6, 16, 80) == pytest.approx((low, high), abs=1e-12)


def test_newcombe_corners():
    assert paired_difference_interval(0, 0, 0, 0) == (-1.0, 1.0)
    # Right on the same questions: no difference, and a narrow interval around it.
    low, high = paired_difference_interval(40, 0, 0, 60)
    assert low < 0 < high and high - low < 0.1
    # Only the first ever right: the difference is 1 and stays inside [−1, 1].
    low, high = paired_difference_interval(0, 30, 0, 0)
    assert 0 < low < 1 and high == 1.0
    with pytest.raises(ValueError):
        paired_difference_interval(-1, 0, 0, 0)


def test_standard_errors_apart():
    assert standard_errors_apart(0.88, 0.91, 1000) == pytest.approx(-0.03 / math.sqrt(0.91 * 0.09 / 1000))
    assert standard_errors_apart(0.5, 0.5, 10) == 0.0
    # A simulated line's own error widens the spread.
    assert abs(standard_errors_apart(0.88, 0.91, 1000, 0.01)) < abs(standard_errors_apart(0.88, 0.91, 1000))
