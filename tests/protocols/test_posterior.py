"""The probability that a panel's answer is right (docs/protocols.md#confidence): Bayes by hand,
the model's edges (abstentions, members below chance, p at 0 or 1, K unknown) and where the
accuracies come from."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from panel_cli.config import Panel
from panel_cli.protocols.posterior import (
    STATED,
    WEIGHTS,
    Evidence,
    Source,
    accuracy_weight,
    answer_confidence,
    confer_confidence,
    confidence_source,
    options_for,
    posteriors,
    vote_confidence,
)
from panel_cli.protocols.vote.tally import Ballot

MIXED = (0.9, 0.6, 0.6, 0.6, 0.6)


def bayes(accuracies: list[float], choices: list[int | None], options: int) -> list[float]:
    """The posterior of every option straight from the product of likelihoods, uniform prior."""
    likelihoods = [
        math.prod(
            (p if choice == option else (1 - p) / (options - 1))
            for p, choice in zip(accuracies, choices, strict=True)
            if choice is not None
        )
        for option in range(options)
    ]
    return [likelihood / sum(likelihoods) for likelihood in likelihoods]


def evidence(accuracies: list[float], choices: list[int | None], options: int) -> list[Evidence]:
    return [
        Evidence(None if choice is None else f"o{choice}", accuracy_weight(p, options))
        for p, choice in zip(accuracies, choices, strict=True)
    ]


@pytest.mark.parametrize(
    "choices",
    [[0, 0, 0, 0, 0], [0, 1, 1, 1, 1], [0, 1, 2, 3, 0], [1, 0, 0, None, 2], [None] * 5],
    ids=["unanimous", "the strong one alone", "split", "an abstention", "all abstain"],
)
def test_the_posterior_is_bayes_by_hand(choices):
    expected = bayes(list(MIXED), choices, 4)
    found = posteriors(evidence(list(MIXED), choices, 4), 4)
    for option in range(4):
        name = f"o{option}"
        share = found.get(name)
        if share is None:  # nobody chose it: an equal part of what the unchosen share
            unchosen = 4 - (len(found) - 1)
            share = found[None] / unchosen
        assert share == pytest.approx(expected[option], abs=1e-12)
    assert math.fsum(found.values()) == pytest.approx(1.0, abs=1e-12)


def test_the_answer_of_a_unanimous_panel_and_of_a_split_one():
    unanimous = answer_confidence(evidence(list(MIXED), [0] * 5, 4), "o0", 4, basis=WEIGHTS)
    assert unanimous.confidence == pytest.approx(bayes(list(MIXED), [0] * 5, 4)[0], abs=1e-12)
    assert unanimous.confidence > 0.999 and unanimous.confidence_basis == WEIGHTS and unanimous.options == 4
    # The strong member against four weak ones agreeing: the four win (4 × 1.50 against 3.30).
    split = answer_confidence(evidence(list(MIXED), [0, 1, 1, 1, 1], 4), "o1", 4, basis=WEIGHTS)
    assert split.confidence == pytest.approx(bayes(list(MIXED), [0, 1, 1, 1, 1], 4)[1], abs=1e-12)
    assert 0.9 < split.confidence < unanimous.confidence
    # An answer nobody chose gets an unchosen answer's share.
    other = answer_confidence(evidence(list(MIXED), [0, 1, 1, 1, 1], 4), "o3", 4, basis=WEIGHTS)
    assert other.confidence == pytest.approx(bayes(list(MIXED), [0, 1, 1, 1, 1], 4)[3], abs=1e-12)


def test_an_abstention_changes_nothing():
    with_abstention = [*evidence([0.7, 0.8], [0, 1], 3), Evidence(None, 5.0)]
    assert posteriors(with_abstention, 3) == posteriors(evidence([0.7, 0.8], [0, 1], 3), 3)


def test_a_member_below_chance_counts_against_what_it_names():
    below = accuracy_weight(0.1, 4)
    assert below < 0
    found = answer_confidence([Evidence("a", below)], "a", 4, basis=WEIGHTS)
    assert found.confidence == pytest.approx(0.1 / (0.1 + 0.9), abs=1e-12)  # 0.1 against 3 × 0.3
    # An option nobody named is likelier than the one it named.
    assert answer_confidence([Evidence("a", below)], "b", 4, basis=WEIGHTS).confidence == pytest.approx(0.3)


def test_p_at_0_or_1_is_bounded_and_huge_weights_do_not_overflow():
    assert accuracy_weight(1.0, 4) == pytest.approx(math.log(3 * 0.99 / 0.01))
    assert accuracy_weight(0.0, 4) == pytest.approx(math.log(3 * 0.01 / 0.99))
    huge = answer_confidence([Evidence("a", 1e6), Evidence("b", 1e6 - 1)], "a", 4, basis=WEIGHTS)
    assert huge.confidence == pytest.approx(1 / (1 + math.exp(-1)), abs=1e-12)
    tiny = answer_confidence([Evidence("a", -1e6)], "a", 4, basis=WEIGHTS)
    assert tiny.confidence == 0.0
    # Every option named, each far below chance: still a distribution, the least unlikely first.
    against = posteriors([Evidence("a", -1e6), Evidence("b", -1e6 - 1)], 2)
    assert against["a"] == pytest.approx(1 / (1 + math.exp(-1))) and against[None] == 0.0


@given(st.floats(min_value=0.01, max_value=0.99), st.integers(min_value=2, max_value=12))
@settings(max_examples=200)
def test_one_member_alone_is_as_likely_right_as_its_accuracy(p, options):
    """The posterior of one vote is the voter's own accuracy: the weight stands for p."""
    found = answer_confidence([Evidence("a", accuracy_weight(p, options))], "a", options, basis=WEIGHTS)
    assert found.confidence == pytest.approx(p, abs=1e-12)
    assert accuracy_weight(p, options) == pytest.approx(math.log((options - 1) * p / (1 - p)))


def test_k_unknown_is_the_answers_given_and_says_so():
    assert options_for(4, ["a", "b"]) == (4, "K = the 4 options declared")
    k, how = options_for(None, ["a", "b", "a", None, "c"])
    assert k == 3 and how.startswith("K = the 3 distinct answers given (free text")
    # A unanimous free-text panel still weighs its answer against something else.
    assert options_for(None, ["a", "a"])[0] == 2
    # More answers than options declared: they are outside the options, and counted.
    assert options_for(2, ["a", "b", "c"])[0] == 3
    # Free text: the answers the members were shown count, voted for or not.
    assert options_for(None, ["a", "a"], shown=3)[0] == 3


def test_confer_reads_stated_confidences_over_the_answers_given():
    found = confer_confidence([("alpha", 90.0), ("alpha", 60.0), ("beta", 60.0)], "alpha", None, Source(basis=STATED))
    assert found.options == 2 and "distinct answers" in (found.options_basis or "")
    assert found.confidence == pytest.approx(bayes([0.9, 0.6, 0.6], [0, 0, 1], 2)[0], abs=1e-12)
    declared = confer_confidence([("alpha", 90.0)], "alpha", 4, Source(basis=STATED))
    assert declared.confidence == pytest.approx(0.9, abs=1e-12) and declared.options == 4


def test_no_answer_and_no_known_accuracy_have_no_figure_and_say_why():
    none = answer_confidence([Evidence("a", 1.0)], None, 4, basis=WEIGHTS)
    assert none.confidence is None and none.reason == "there is no answer to be confident of"
    unknown = vote_confidence([Ballot(voter="a", choice="x")], "x", ["x", "y"], Source(reason="why not"))
    assert (unknown.confidence, unknown.reason, unknown.answer) == (None, "why not", "x")


def test_a_vote_reads_its_ballots_at_their_weights_and_skips_late_ones():
    ballots = [
        Ballot(voter="a", choice="x", weight=accuracy_weight(0.9, 3)),
        Ballot(voter="b", choice="y", weight=accuracy_weight(0.6, 3)),
        Ballot(voter="c", choice="y", weight=accuracy_weight(0.6, 3), late=True),
        Ballot(voter="d", choice="nonsense", weight=5.0),
    ]
    found = vote_confidence(ballots, "x", ["x", "y", "z"], Source(basis=WEIGHTS))
    assert found.confidence == pytest.approx(bayes([0.9, 0.6], [0, 1], 3)[0], abs=1e-12)


def panel(**fields) -> Panel:
    members = fields.pop("members", [{"name": "a", "model": "demo/sage"}, {"name": "b", "model": "demo/skeptic"}])
    return Panel.model_validate({"name": "p", "members": members, **fields})


def test_where_the_accuracies_come_from():
    assert confidence_source(
        panel(
            method="weighted_plurality",
            members=[
                {"name": "a", "model": "demo/sage", "weight": 2.0},
                {"name": "b", "model": "demo/skeptic", "weight": -0.5},
            ],
        ),
        "vote",
    ) == Source(basis=WEIGHTS)
    calibrated = confidence_source(panel(method="weighted_plurality"), "vote", weights_from="w.yaml")
    assert calibrated.basis is None, "no weight is given: the file named is not the panel's"
    plurality = confidence_source(panel(method="plurality"), "vote")
    assert plurality.basis is None and "counts every member alike" in (plurality.reason or "")
    default = confidence_source(panel(method="weighted_plurality"), "decide")
    assert default.basis is None and "default weight 1" in (default.reason or "")
    assert confidence_source(panel(tally="log_odds"), "confer") == Source(basis=STATED)
    summed = confidence_source(panel(), "confer").reason or ""
    assert summed.startswith("tally: confidence sums the stated confidences as scores, which are no probability")
    counted = confidence_source(panel(tally="votes"), "confer").reason or ""
    assert counted.startswith("tally: votes counts one vote per member, which says nothing of any member's accuracy")
    assert "under tally: log_odds the stated confidences are read as probabilities" in summed + counted
    assert confidence_source(panel(), "council").reason == "council reports no probability that its answer is right"
