"""The eval's statistics against values worked out by hand."""

from __future__ import annotations

import math

import pytest

from panel_cli.eval.stats import binomial_tail, jury_probability, mcnemar_exact, proportion_tolerance, wilson_interval


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
