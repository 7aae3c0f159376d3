"""The theory of stopping early against the issue's figures and against a brute force written
apart from the code: every profile of beliefs, every completion the members still to ask could
cast, each rule counted by hand."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from itertools import product

import pytest

from panel_cli.eval.stopping import Stop, stopping_theory
from panel_cli.eval.theory import Alone, Confer, Council, Count, theory, uniform_places
from panel_cli.protocols.stopping import ask_order

FOUR = uniform_places(4)
JURY = (0.7,) * 5
MIXED = (0.9, 0.6, 0.6, 0.6, 0.6)
OPTIMAL = tuple(math.log(3 * p / (1 - p)) for p in MIXED)
EVEN = (1.0,) * 5
Outcome = Callable[[Sequence[int | None]], int | None]


# Each rule by hand: a ballot is an option or None (an abstention) ------------------------------


def most(weights: Sequence[float]) -> Outcome:
    """The option with the most weight; a tie at the top is no winner."""

    def count(ballots: Sequence[int | None]) -> int | None:
        sums = [sum(w for w, b in zip(weights, ballots, strict=False) if b == option) for option in range(4)]
        if not any(b is not None for b in ballots):
            return None
        top = max(sums)
        leaders = [o for o in range(4) if math.isclose(sums[o], top, rel_tol=1e-9, abs_tol=1e-9)]
        return leaders[0] if len(leaders) == 1 else None

    return count


def majority(ballots: Sequence[int | None]) -> int | None:
    votes = [b for b in ballots if b is not None]
    top = max(range(4), key=votes.count)
    return top if 2 * votes.count(top) > len(votes) else None


def confer_count(ballots: Sequence[int | None]) -> int | None:
    """The most votes; a tie to the answer given first."""
    given = [b for b in ballots if b is not None]
    if not given:
        return None
    top = max(given.count(b) for b in given)
    return next(b for b in given if given.count(b) == top)


def chance(accuracies: Sequence[float], beliefs: Sequence[int]) -> float:
    return math.prod(p if b == 0 else (1 - p) / 3 for p, b in zip(accuracies, beliefs, strict=True))


def decided(count: Outcome, asked: Sequence[int], members: int) -> bool:
    """Every ballot the rest could cast (an option or an abstention) leaves the outcome as it is."""
    now = count(list(asked))
    rest = members - len(asked)
    return all(count([*asked, *more]) == now for more in product([0, 1, 2, 3, None], repeat=rest))


def could_settle(count: Outcome, asked: Sequence[int], size: int, members: int) -> bool:
    return any(decided(count, [*asked, *wave], members) for wave in product(range(4), repeat=size))


def brute(accuracies: Sequence[float], count: Outcome, asking: str) -> tuple[float, float]:
    """(accuracy, expected calls), gold option 0, voters asked in the order given."""
    n = len(accuracies)
    right = calls = 0.0
    first_wave = next(size for size in range(1, n + 1) if size == n or could_settle(count, [], size, n))
    for beliefs in product(range(4), repeat=n):
        weight = chance(accuracies, beliefs)
        if asking == "one at a time":
            asked = next(k for k in range(n + 1) if decided(count, beliefs[:k], n))
        else:  # the fewest that could settle it, then everyone left
            asked = first_wave if decided(count, beliefs[:first_wave], n) else n
        right += weight * (count(list(beliefs[:asked])) == 0)
        calls += weight * asked
    return right, calls


@pytest.mark.parametrize(
    "rule, accuracies, count, order, issue",
    [
        (Count("plurality", EVEN), JURY, most(EVEN), None, (0.866, 3.99)),
        (Count("majority", EVEN), JURY, majority, None, (0.837, 3.97)),
        (Confer("confidence", (80.0,) * 5), JURY, confer_count, None, (0.910, 3.88)),
        (Count("weighted_plurality", OPTIMAL), MIXED, most(OPTIMAL), ask_order(OPTIMAL), (0.928, 2.77)),
    ],
    ids=["plurality", "majority", "confer", "weighted_plurality strongest first"],
)
def test_decided_one_at_a_time_is_the_issues_figure_and_the_brute_force(rule, accuracies, count, order, issue):
    line = stopping_theory(rule, accuracies, FOUR, Stop(), order=order)
    assert line.way == "exact"
    accuracy, calls = brute([accuracies[i] for i in (order or range(5))], _reordered(count, order), "one at a time")
    assert line.accuracy == pytest.approx(accuracy, abs=1e-12)
    assert line.calls == pytest.approx(calls, abs=1e-12)
    assert (round(line.accuracy, 3), round(line.calls, 2)) == issue
    # The answers are the full panel's: stopping changed none.
    assert line.accuracy == pytest.approx(theory(rule, accuracies, FOUR).accuracy, abs=1e-12)
    assert line.rounds == line.calls and 0 < line.early < 1


def _reordered(count: Outcome, order: Sequence[int] | None) -> Outcome:
    """The by-hand count reads ballots in member order; asked in another order, put them back."""
    if order is None:
        return count

    def back(ballots: Sequence[int | None]) -> int | None:
        full: list[int | None] = [None] * len(order)
        for place, ballot in zip(order, ballots, strict=False):
            full[place] = ballot
        return count(full)

    return back


@pytest.mark.parametrize(
    "rule",
    [
        Count("plurality", EVEN),
        Count("plurality", EVEN, tie_break="first"),
        Count("majority", EVEN),
        Count("supermajority", EVEN),
        Count("unanimous", EVEN),
        Count("ranked_choice", EVEN),
        Confer("confidence", (80.0, 70.0, 60.0, 60.0, 90.0)),
    ],
    ids=lambda rule: rule.describe()[:40],
)
def test_decided_answers_are_everyones_under_every_rule(rule):
    for asking in ("one at a time", "waves"):
        line = stopping_theory(rule, JURY, FOUR, Stop(asking=asking))
        assert line.way == "exact"
        assert line.accuracy == pytest.approx(theory(rule, JURY, FOUR).accuracy, abs=1e-12)
        assert line.calls < 5


def test_two_waves_the_strong_member_and_one_more_then_the_rest():
    order = ask_order(OPTIMAL)
    rule = Count("weighted_plurality", OPTIMAL)
    line = stopping_theory(rule, MIXED, FOUR, Stop(asking="two waves"), order=order)
    accuracy, calls = brute([MIXED[i] for i in order], _reordered(most(OPTIMAL), order), "two waves")
    assert line.calls == pytest.approx(calls, abs=1e-12) and round(line.calls, 2) == 3.34
    assert line.accuracy == pytest.approx(accuracy, abs=1e-12)
    assert line.rounds < 2


@pytest.mark.parametrize(
    "rule, accuracies, order",
    [
        (Count("plurality", EVEN), JURY, None),
        (Count("plurality", EVEN, tie_break="first"), JURY, None),
        (Count("supermajority", EVEN), JURY, None),
        (Confer("log_odds", tuple(100 * p for p in MIXED)), MIXED, None),
        (Count("weighted_plurality", OPTIMAL), MIXED, ask_order(OPTIMAL)),
    ],
)
def test_waves_of_the_fewest_that_could_settle_it_cost_no_more_calls_in_fewer_rounds(rule, accuracies, order):
    one = stopping_theory(rule, accuracies, FOUR, Stop(), order=order)
    waves = stopping_theory(rule, accuracies, FOUR, Stop(asking="waves"), order=order)
    assert waves.calls == pytest.approx(one.calls, abs=1e-12)
    assert waves.accuracy == pytest.approx(one.accuracy, abs=1e-12)
    assert waves.rounds < one.rounds


def posterior(accuracies: Sequence[float], ballots: Sequence[int]) -> list[float]:
    likelihoods = [
        math.prod(p if b == option else (1 - p) / 3 for p, b in zip(accuracies, ballots, strict=True))
        for option in range(4)
    ]
    return [likelihood / sum(likelihoods) for likelihood in likelihoods]


@pytest.mark.parametrize("at_least", [0.9, 0.95, 0.99])
def test_confident_stops_where_bayes_by_hand_says(at_least):
    order = ask_order(OPTIMAL)
    asked_accuracies = [MIXED[i] for i in order]
    line = stopping_theory(
        Count("weighted_plurality", OPTIMAL), MIXED, FOUR, Stop("confident", at_least=at_least), order=order
    )
    full = _reordered(most(OPTIMAL), order)
    right = calls = 0.0
    for beliefs in product(range(4), repeat=5):
        weight = chance(asked_accuracies, beliefs)
        for k in range(1, 6):
            spread = posterior(asked_accuracies[:k], beliefs[:k])
            leader = max(range(4), key=lambda option: (spread[option], -option))
            if spread[leader] >= at_least - 1e-12:
                answer = leader
                break
        else:
            answer = full(list(beliefs))
        right += weight * (answer == 0)
        calls += weight * k
    assert line.accuracy == pytest.approx(right, abs=1e-12)
    assert line.calls == pytest.approx(calls, abs=1e-12)


def test_the_strong_member_alone_is_confident_enough_at_its_own_accuracy():
    line = stopping_theory(
        Count("weighted_plurality", OPTIMAL), MIXED, FOUR, Stop("confident", at_least=0.9), order=ask_order(OPTIMAL)
    )
    assert (line.accuracy, line.calls, line.early) == pytest.approx((0.9, 1.0, 1.0))


def test_what_a_stopping_rule_cannot_model_says_why():
    assert "leader" in stopping_theory(Count("plurality", EVEN, leader=0), JURY, FOUR, Stop()).note
    assert stopping_theory(Council(("a", "b")), (0.7, 0.7), FOUR, Stop()).way == "none"
    assert stopping_theory(Alone(0, "a"), (0.7,), FOUR, Stop()).way == "none"
    noisy = stopping_theory(Confer("confidence", (80.0,) * 5, (0.1,) * 5), JURY, FOUR, Stop())
    assert "noise" in noisy.note
    assert (
        "one member at a time" in stopping_theory(Count("plurality", EVEN), JURY, FOUR, Stop("confident", "waves")).note
    )
    assert (
        "every voter once" in stopping_theory(Count("plurality", EVEN), JURY, FOUR, Stop(), order=[0, 0, 1, 2, 3]).note
    )
    assert "only confer" in stopping_theory(Count("plurality", EVEN), JURY, FOUR, Stop(vote_rounds=1)).note


def test_past_the_clock_it_is_simulated_and_says_so():
    line = stopping_theory(Count("plurality", EVEN), JURY, FOUR, Stop(), seconds=0, samples=4000, seed=3)
    exact = stopping_theory(Count("plurality", EVEN), JURY, FOUR, Stop())
    assert line.way == "simulation" and "more than 0 s" in line.note and line.samples == 4000
    assert abs(line.accuracy - exact.accuracy) <= 4 * line.standard_error
    assert abs(line.calls - exact.calls) < 0.1


# confer as its engine holds it: the answers' count, then one vote round among those asked ------


def confer_by_hand(accuracies: Sequence[float], confidences: Sequence[float], most: float) -> tuple[float, float]:
    """(accuracy, expected calls): answers one at a time until no answers the rest could give
    change the leader (`confer_count`); then, unless one answer was given, the members asked
    vote one at a time, those holding the leading answer first, each for its own answer at its
    confidence, until no votes the rest could cast (up to `most` each, for any answer) change the
    winner: the most weight, a tie to the answer given first."""
    n = len(accuracies)
    right = calls = 0.0
    for beliefs in product(range(4), repeat=n):
        asked = next(k for k in range(n + 1) if decided(confer_count, beliefs[:k], n))
        given = list(beliefs[:asked])
        firsts = list(dict.fromkeys(given))
        votes, winner = 0, given[0]
        if len(firsts) > 1:
            leader = confer_count(given)
            voters = sorted(range(asked), key=lambda voter: given[voter] != leader)
            score = dict.fromkeys(firsts, 0.0)
            for votes in range(1, asked + 1):
                voter = voters[votes - 1]
                score[given[voter]] += confidences[voter]
                top = max(score.values())
                winner = next(answer for answer in firsts if math.isclose(score[answer], top))
                left = (asked - votes) * most
                if all(
                    score[rival] + left < top or (math.isclose(score[rival] + left, top) and rival_after)
                    for rival, rival_after in ((r, firsts.index(r) > firsts.index(winner)) for r in firsts)
                    if rival != winner
                ):
                    break
        weight = chance(accuracies, beliefs)
        right += weight * (winner == 0)
        calls += weight * (asked + votes)
    return right, calls


def test_confer_as_its_engine_holds_it_adds_its_vote_to_the_answers_count():
    """5 × 0.7 at 80: 3.88 answers, and a vote whenever they differ, 6.13 calls in all, for
    everyone's accuracy; without `until_convergence` every round repeats the vote."""
    rule = Confer("confidence", (80.0,) * 5)
    line = stopping_theory(rule, JURY, FOUR, Stop(asking="waves", vote_rounds=1))
    accuracy, calls = confer_by_hand(JURY, (80.0,) * 5, 100.0)
    assert line.way == "exact" and "then a vote among those asked" in line.stop
    assert line.accuracy == pytest.approx(accuracy, abs=1e-12) == pytest.approx(theory(rule, JURY, FOUR).accuracy)
    assert line.calls == pytest.approx(calls, abs=1e-12) and round(line.calls, 2) == 6.13
    answers = stopping_theory(rule, JURY, FOUR, Stop(asking="waves")).calls
    three = stopping_theory(rule, JURY, FOUR, Stop(asking="waves", vote_rounds=3))
    assert three.calls == pytest.approx(answers + 3 * (line.calls - answers))


def test_one_vote_each_settles_confers_vote_sooner_for_the_same_answers():
    """5 × 0.7 under `tally: votes`: a vote still to come weighs one, as each in hand does, so
    the vote takes fewer calls (5.67 in all against 6.13) and every answer is the same."""
    rule = Confer("votes", (80.0,) * 5)
    line = stopping_theory(rule, JURY, FOUR, Stop(asking="waves", vote_rounds=1))
    accuracy, calls = confer_by_hand(JURY, (1.0,) * 5, 1.0)
    assert line.way == "exact"
    assert line.accuracy == pytest.approx(accuracy, abs=1e-12) == pytest.approx(theory(rule, JURY, FOUR).accuracy)
    assert line.calls == pytest.approx(calls, abs=1e-12) and round(line.calls, 2) == 5.67
    summed = stopping_theory(Confer("confidence", (80.0,) * 5), JURY, FOUR, Stop(asking="waves", vote_rounds=1))
    assert line.accuracy == pytest.approx(summed.accuracy, abs=1e-12)


def test_unequal_confidences_can_outweigh_the_answers_count_it_stopped_on():
    """0.9 + 4 × 0.6 stating their p under log_odds: the answers' count cannot weigh the
    confidences that come only with the votes, so stopping loses a little accuracy, as by hand."""
    rule = Confer("log_odds", tuple(100 * p for p in MIXED))
    line = stopping_theory(rule, MIXED, FOUR, Stop(asking="waves", vote_rounds=1))
    weights = [math.log(3 * p / (1 - p)) for p in MIXED]
    accuracy, calls = confer_by_hand(MIXED, weights, math.log(3 * 99))
    assert line.way == "exact"
    assert line.accuracy == pytest.approx(accuracy, abs=1e-12) and line.calls == pytest.approx(calls, abs=1e-12)
    assert line.accuracy < theory(rule, MIXED, FOUR).accuracy - 1e-4
