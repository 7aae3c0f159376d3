"""When a panel has heard enough (docs/protocols.md#stopping-early): by hand for each rule, then
by property against every completion the members still to ask could cast, counted by vote's
own tally."""

from __future__ import annotations

from itertools import product

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from panel_cli.protocols.posterior import Evidence, accuracy_weight
from panel_cli.protocols.stopping import (
    ANOTHER_ANSWER,
    ask_order,
    confident,
    first_given_order,
    next_wave,
    settled,
)
from panel_cli.protocols.vote.tally import METHODS, TIE_BREAKS, Ballot, tally

ABCD = ["A", "B", "C", "D"]
WEIGHTED = ("weighted", "weighted_plurality")


def cast(*choices: str | None, weights: list[float] | None = None) -> list[Ballot]:
    weights = weights or [1.0] * len(choices)
    return [
        Ballot(voter=f"v{i}", choice=choice, ranking=[choice] if choice else [], weight=weight)
        for i, (choice, weight) in enumerate(zip(choices, weights, strict=True))
    ]


def test_a_five_member_plurality_is_settled_by_three_who_agree():
    assert settled(cast("A", "A", "A"), [1.0, 1.0], ABCD, "plurality").decided
    found = settled(cast("A", "A", "B"), [1.0, 1.0], ABCD, "plurality")
    assert not found.decided and found.winner == "A" and "could make B win" in found.reason
    # Two to ask could tie B with A: no winner under tie_break none, A's under first.
    tie = cast("A", "A", "A", "B")
    assert not settled(tie, [1.0, 1.0], ABCD, "plurality").decided
    assert settled(tie, [1.0], ABCD, "plurality").decided
    assert settled(cast("A", "A", "B"), [1.0], ABCD, "plurality", tie_break="first").decided
    assert not settled(cast("B", "B", "A"), [1.0], ABCD, "plurality", tie_break="first").decided


def test_majority_supermajority_and_unanimous():
    assert settled(cast("A", "A", "A"), [1.0, 1.0], ABCD, "majority").decided
    assert not settled(cast("A", "A", "B"), [1.0, 1.0], ABCD, "majority").decided
    # Four answers already split: no option can reach more than half of five.
    split = settled(cast("A", "B", "C", "D"), [1.0], ABCD, "majority")
    assert split.decided and split.winner is None and "no option wins" in split.reason
    assert settled(cast("A", "B"), [1.0, 1.0, 1.0], ABCD, "unanimous").decided
    assert not settled(cast("A", "A"), [1.0], ABCD, "unanimous").decided
    assert settled(cast("A", "A", "A", "A"), [1.0], ABCD, "supermajority", threshold=0.75).decided
    assert not settled(cast("A", "A", "A"), [1.0, 1.0], ABCD, "supermajority", threshold=0.75).decided


def test_weighted_plurality_settles_on_the_strong_member_and_one_more():
    strong, weak = accuracy_weight(0.9, 4), accuracy_weight(0.6, 4)
    assert not settled(cast("A", weights=[strong]), [weak] * 4, ABCD, "weighted_plurality").decided
    assert settled(cast("A", "A", weights=[strong, weak]), [weak] * 3, ABCD, "weighted_plurality").decided
    assert settled(cast("A", "B", "A", weights=[strong, weak, weak]), [weak] * 2, ABCD, "weighted_plurality").decided


def test_a_member_below_chance_still_to_ask_can_unseat_the_leader():
    # A leads B by 1; a member of weight −1.5 voting A would put B ahead.
    assert not settled(cast("A", "B", weights=[2.0, 1.0]), [-1.5], ABCD, "weighted_plurality").decided
    assert settled(cast("A", "B", weights=[3.0, 1.0]), [-1.5], ABCD, "weighted_plurality").decided
    # weighted counts no negative weight: one still to ask could leave it without a winner, and
    # one in hand leaves it so whatever the rest vote.
    assert not settled(cast("A", weights=[2.0]), [-1.0], ABCD, "weighted").decided
    counted = settled(cast("A", "B", weights=[2.0, -1.0]), [1.0, 1.0], ABCD, "weighted")
    assert counted.decided and counted.winner is None


def test_a_runoff_is_settled_early_only_by_a_certain_majority():
    ranked = [Ballot(voter=f"v{i}", choice="A", ranking=["A", "B"]) for i in range(3)]
    assert settled(ranked, [1.0, 1.0], ABCD, "ranked_choice").decided
    assert not settled(ranked[:2], [1.0, 1.0], ABCD, "ranked_choice").decided


def test_no_one_left_to_ask_is_decided_by_the_count_in_hand():
    found = settled(cast("A", "B"), [], ABCD, "plurality")
    assert found.decided and found.winner is None and found.reason == "every member has voted"


def test_the_quorum_counts_those_still_to_ask():
    assert not settled(cast("A", "A"), [1.0], ABCD, "plurality", quorum=3).decided
    assert settled(cast("A", "A", "A"), [1.0], ABCD, "plurality", quorum=3).decided


def test_confer_lists_the_answers_in_the_order_first_given():
    assert first_given_order(["b", "a", "b", None]) == ["b", "a", ANOTHER_ANSWER]
    assert first_given_order(["b"], ["a", "b", "c"]) == ["b", "a", "c"]
    # Two each, b given first: b wins the tie, and one member left cannot break it against b.
    order = first_given_order(["b", "a", "a", "b"])
    assert settled(cast("b", "a", "a", "b"), [], order, "plurality", tie_break="first").winner == "b"
    assert not settled(cast("b", "a", "a", "b"), [1.0], order, "plurality", tie_break="first").decided
    lead = cast("b", "a", "b")
    assert settled(lead, [1.0], first_given_order(["b", "a", "b"]), "plurality", tie_break="first").decided


def test_the_heaviest_are_asked_first():
    assert ask_order([1.5, 3.3, -4.0, 1.5]) == [2, 1, 0, 3]


def test_waves_ask_the_fewest_that_could_settle_it():
    assert next_wave([], [1.0] * 5, ABCD, "plurality") == 3
    assert next_wave(cast("A", "A", "B"), [1.0] * 2, ABCD, "plurality") == 1
    assert next_wave(cast("A", "B", "C"), [1.0] * 2, ABCD, "plurality") == 2
    assert next_wave(cast("A", "A", "A"), [1.0] * 2, ABCD, "plurality") == 0
    strong, weak = accuracy_weight(0.9, 4), accuracy_weight(0.6, 4)
    assert next_wave([], [strong, *[weak] * 4], ABCD, "weighted_plurality") == 2
    # Majority settles on no winner only when the votes split: four apart.
    assert next_wave([], [1.0] * 5, ABCD, "majority") == 3
    assert next_wave(cast("A", "B", "C"), [1.0] * 2, ABCD, "majority") == 1


def test_confident_stops_once_the_leading_answer_is_likely_enough():
    strong, weak = accuracy_weight(0.9, 4), accuracy_weight(0.6, 4)
    alone = confident([Evidence("A", strong)], 4, 0.9)
    assert alone.decided and alone.winner == "A" and alone.confidence == pytest.approx(0.9)
    assert not confident([Evidence("A", strong)], 4, 0.95).decided
    both = confident([Evidence("A", strong), Evidence("A", weak)], 4, 0.95)
    assert both.decided and both.confidence == pytest.approx(121.5 / 124.5)
    assert not confident([Evidence(None, strong)], 4, 0.5).decided
    with pytest.raises(ValueError):
        confident([], 4, 0.0)


# By property: decided never changes the outcome -------------------------------------------------

FAIL = object()  # a member whose ballot never comes (its call failed or was late)


@st.composite
def cases(draw):
    method = draw(st.sampled_from(METHODS))
    options = ABCD[: draw(st.integers(min_value=2, max_value=4))]
    choice = st.one_of(st.none(), st.sampled_from(options))
    weight = st.sampled_from([-2.0, -1.0, 0.0, 0.5, 1.0, 1.5, 3.0]) if method in WEIGHTED else st.just(1.0)
    held = draw(st.lists(st.tuples(choice, weight), max_size=5))
    remaining = draw(st.lists(weight, max_size=3))
    rules = {
        "threshold": draw(st.sampled_from([0.5, 0.6, 0.667, 0.75, 1.0])),
        "tie_break": draw(st.sampled_from(TIE_BREAKS)),
        "quorum": draw(st.integers(min_value=1, max_value=4)),
    }
    ballots = [
        Ballot(voter=f"v{i}", choice=c, ranking=[c, *(o for o in options if o != c)] if c else [], weight=w)
        for i, (c, w) in enumerate(held)
    ]
    return method, options, ballots, remaining, rules


def completions(remaining: list[float], options: list[str], method: str):
    """Every ballot each member still to ask could cast: an option (ranked first, the rest in
    either order for a runoff), an abstention, or none at all."""
    rankings: list[object] = [None, FAIL]
    for option in options:
        rest = [o for o in options if o != option]
        orders = [rest, rest[::-1]] if method == "ranked_choice" else [rest]
        rankings += [[option, *order] for order in orders]
    for chosen in product(rankings, repeat=len(remaining)):
        yield [
            Ballot(voter=f"r{i}", choice=ranking[0] if ranking else None, ranking=ranking or [], weight=weight)
            for i, (ranking, weight) in enumerate(zip(chosen, remaining, strict=True))
            if ranking is not FAIL
        ]


@given(cases())
@settings(max_examples=600, deadline=None)
def test_decided_never_changes_the_outcome_and_is_exact_where_it_claims_to_be(case):
    method, options, ballots, remaining, rules = case
    found = settled(ballots, remaining, options, method, **rules)
    now = tally(ballots, options, method, **rules).winner
    assert found.winner == now
    outcomes = {
        tally([*ballots, *more], options, method, **rules).winner for more in completions(remaining, options, method)
    }
    if found.decided:
        assert outcomes == {now}, "a decided outcome changed once everyone voted"
    exact = method != "ranked_choice" and not (
        method == "weighted_plurality" and now is None and any(w < 0 for w in remaining)
    )
    if exact and not found.decided:
        assert len(outcomes) > 1, "asking on though nothing the rest could vote would change the outcome"


@given(cases())
@settings(max_examples=200, deadline=None)
def test_a_wave_is_none_once_decided_and_at_most_everyone_left(case):
    method, options, ballots, remaining, rules = case
    wave = next_wave(ballots, remaining, options, method, **rules)
    assert (wave == 0) == settled(ballots, remaining, options, method, **rules).decided
    assert 0 <= wave <= len(remaining)
