"""Whether a confidence is a probability: the reliability table, ECE and Brier by hand, and the
exact posterior's Brier of a theory line against a brute force over every profile."""

from __future__ import annotations

import math
from itertools import product

import pytest

from panel_cli.eval.reliability import brier_score, confidence_score, expected_calibration_error, reliability_table
from panel_cli.eval.theory import Alone, Confer, Count, theory, uniform_places
from panel_cli.export.reliability import reliability_markdown, reliability_svg
from panel_cli.view.reliability import reliability_chart

# Ten answers at 0.9, nine right; ten at 0.6, three right: the second bin says 0.6 and is 0.3.
PAIRS = [(0.9, True)] * 9 + [(0.9, False)] + [(0.6, True)] * 3 + [(0.6, False)] * 7


def test_the_reliability_table_by_hand():
    table = reliability_table(PAIRS, bins=5)
    assert [(row.low, row.high, row.count) for row in table] == [
        (0.0, 0.2, 0),
        (0.2, 0.4, 0),
        (0.4, 0.6, 0),
        (0.6, 0.8, 10),
        (0.8, 1.0, 10),
    ]
    assert (table[3].mean_confidence, table[3].accuracy) == pytest.approx((0.6, 0.3))
    assert (table[4].mean_confidence, table[4].accuracy) == pytest.approx((0.9, 0.9))
    assert table[0].mean_confidence is None and table[0].accuracy is None
    # A confidence of exactly 1 falls in the last bin, closed at 1.
    assert reliability_table([(1.0, True)], bins=4)[-1].count == 1


def test_ece_and_brier_by_hand():
    assert expected_calibration_error(PAIRS, bins=5) == pytest.approx(0.5 * 0.0 + 0.5 * 0.3)
    brier = (9 * 0.1**2 + 0.9**2 + 3 * 0.4**2 + 7 * 0.6**2) / 20
    assert brier_score(PAIRS) == pytest.approx(brier)
    assert (expected_calibration_error([]), brier_score([])) == (0.0, 0.0)
    with pytest.raises(ValueError):
        brier_score([(1.5, True)])


def test_a_system_score_reads_its_brier_against_the_exact_posteriors():
    score = confidence_score(PAIRS, 3, basis="weights", reason="no answer", posterior_brier=0.1)
    assert (score.items, score.without, score.basis, score.reason) == (20, 3, "weights", "no answer")
    assert score.brier_ratio == pytest.approx(brier_score(PAIRS) / 0.1)
    assert confidence_score([], 5, basis=None, reason="unknown").ece is None


def test_the_diagram_in_every_format():
    bins = reliability_table(PAIRS)
    chart = reliability_chart(bins).plain
    assert "0.9–1.0         10   0.900  0.900" in chart and "0.6–0.7         10   0.600  0.300" in chart
    markdown = reliability_markdown(bins)
    assert "| 0.6–0.7 | 10 | 0.600 | 0.300 | -0.300 |" in markdown and "```text\n" in markdown
    svg = reliability_svg(bins, "vote <b>")
    assert svg.startswith('<svg class="reliability"') and "vote &lt;b&gt;" in svg and svg.count('class="right"') == 2


def brute_posterior_brier(accuracies, answer) -> float:
    """E[q(1 − q)] over the profiles a rule answers, q the exact posterior of its answer, four
    options, the gold equally often in each place."""
    total = weight_answered = 0.0
    for gold in range(4):
        for beliefs in product(range(4), repeat=len(accuracies)):
            chance = math.prod(p if b == gold else (1 - p) / 3 for p, b in zip(accuracies, beliefs, strict=True)) / 4
            chosen = answer(beliefs)
            if chosen is None:
                continue
            likelihoods = [
                math.prod(p if b == o else (1 - p) / 3 for p, b in zip(accuracies, beliefs, strict=True))
                for o in range(4)
            ]
            q = likelihoods[chosen] / sum(likelihoods)
            total += chance * q * (1 - q)
            weight_answered += chance
    return total / weight_answered


MIXED = (0.9, 0.6, 0.6, 0.6, 0.6)


def confer_first(beliefs):
    top = max(beliefs.count(b) for b in beliefs)
    return next(b for b in beliefs if beliefs.count(b) == top)


def test_the_exact_posteriors_brier_against_a_brute_force():
    # Confer at one confidence for all: a plurality, the tie to the answer given first.
    line = theory(Confer("confidence", (80.0,) * 5), (0.7,) * 5, uniform_places(4))
    assert line.posterior_brier == pytest.approx(brute_posterior_brier((0.7,) * 5, confer_first), abs=1e-12)
    assert round(line.posterior_brier, 3) == 0.056  # the figure
    optimal = tuple(math.log(3 * p / (1 - p)) for p in MIXED)
    weighted = theory(Count("weighted_plurality", optimal), MIXED, uniform_places(4))
    assert round(weighted.posterior_brier, 3) == 0.050
    # One member alone: only its own vote is evidence, so its posterior is its accuracy.
    assert theory(Alone(0, "v1"), MIXED, uniform_places(4)).posterior_brier == pytest.approx(0.9 * 0.1)
