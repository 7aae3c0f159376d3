"""The theory lines against the issue's figures, against a brute force written apart from the
code (every profile listed, every rule counted by hand), and against a plain simulation."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from itertools import permutations, product

import pytest

from panel_cli.eval import theory as theory_module
from panel_cli.eval.theory import Alone, Confer, Council, Count, Theory, herding_in_turn, theory, uniform_places

FOUR = uniform_places(4)
FIVE_AT_07 = (0.7,) * 5
MIXED = (0.9, 0.6, 0.6, 0.6, 0.6)
OPTIMAL = tuple(math.log(3 * p / (1 - p)) for p in MIXED)
EVEN = (1.0,) * 5
NAMES = ("v1", "v2", "v3", "v4", "v5")


def accuracy(rule, accuracies, places=FOUR, **options) -> float:
    line = theory(rule, accuracies, places, **options)
    assert line.accuracy is not None, line.note
    return line.accuracy


@pytest.mark.parametrize(
    "rule, accuracies, figure",
    [
        (Alone(0, "v1"), MIXED, 0.900),
        (Count("majority", EVEN), MIXED, 0.786),
        (Count("weighted", OPTIMAL), MIXED, 0.890),
        (Count("weighted_plurality", OPTIMAL), MIXED, 0.928),
        (Count("majority", EVEN), FIVE_AT_07, 0.837),
        (Confer("confidence", (80.0,) * 5), FIVE_AT_07, 0.910),
        (Council(NAMES), FIVE_AT_07, 0.903),
        (Count("supermajority", EVEN, threshold=0.667), FIVE_AT_07, 0.528),
    ],
)
def test_the_issues_figures(rule, accuracies, figure):
    line = theory(rule, accuracies, FOUR)
    assert line.way == "exact" and line.standard_error is None
    assert abs(line.accuracy - figure) < 0.001


def test_most_weight_wins_reaches_the_optimum_whatever_the_tie_rule():
    """With weights log(3p/(1−p)) no two options can tie at the top on these voters, so every
    tie rule gives the same 0.928; log_odds confer with calibrated confidences gets there too."""
    for tie_break in ("none", "first", "leader"):
        assert accuracy(Count("weighted_plurality", OPTIMAL, tie_break=tie_break), MIXED) == pytest.approx(
            0.92832, abs=1e-5
        )
    assert accuracy(Confer("log_odds", tuple(100 * p for p in MIXED)), MIXED) == pytest.approx(0.92832, abs=1e-5)


# The brute force: every profile of beliefs, each rule counted by hand ---------------------------

Answer = Callable[[tuple[int, ...], int], int | None]


def profiles(accuracies: Sequence[float], options: int, gold: int):
    for beliefs in product(range(options), repeat=len(accuracies)):
        chance = math.prod(
            p if belief == gold else (1 - p) / (options - 1) for p, belief in zip(accuracies, beliefs, strict=True)
        )
        yield beliefs, chance


def brute(accuracies: Sequence[float], options: int, answer: Answer) -> float:
    """The chance `answer` is the gold option, the gold equally often in each place."""
    return (
        sum(
            chance
            for gold in range(options)
            for beliefs, chance in profiles(accuracies, options, gold)
            if answer(beliefs, options) == gold
        )
        / options
    )


def scores(beliefs, options, weights=None) -> list[float]:
    weights = weights or [1.0] * len(beliefs)
    return [math.fsum(w for b, w in zip(beliefs, weights, strict=True) if b == option) for option in range(options)]


def share(needed: Callable[[float, float], bool], weights=None) -> Answer:
    def answer(beliefs, options):
        totals = scores(beliefs, options, weights)
        best = max(range(options), key=lambda option: totals[option])
        return best if needed(totals[best], math.fsum(totals)) else None

    return answer


def most(tie: str, weights=None, leader: int | None = None) -> Answer:
    def answer(beliefs, options):
        totals = scores(beliefs, options, weights)
        top = [option for option in range(options) if math.isclose(totals[option], max(totals), rel_tol=1e-9)]
        if len(top) == 1 or tie == "first":
            return top[0]  # options are listed 0, 1, …: the first tied is the lowest
        return beliefs[leader] if tie == "leader" and leader is not None else None

    return answer


def confer_answer(beliefs, options):
    """Plurality of beliefs; a tie to the belief whose first holder comes first."""
    counts = Counter(beliefs)
    top = max(counts.values())
    return next(belief for belief in beliefs if counts[belief] == top)


def council_answer(beliefs, options):
    """Every reviewer puts the members that agree with it first, then the rest, in member order;
    the member with the lowest sum of places wins, the earlier one on a tie."""
    places = [0] * len(beliefs)
    for mine in beliefs:
        order = [m for m, b in enumerate(beliefs) if b == mine] + [m for m, b in enumerate(beliefs) if b != mine]
        for place, member in enumerate(order, start=1):
            places[member] += place
    return beliefs[min(range(len(beliefs)), key=lambda member: (places[member], member))]


def runoff_answer(ballots: list[list[int]], options: int) -> int | None:
    standing = list(range(options))
    while True:
        tops = [next(o for o in ballot if o in standing) for ballot in ballots]
        counts = {o: tops.count(o) for o in standing}
        best = max(counts.values())
        if best * 2 > len(ballots):
            return next(o for o in standing if counts[o] == best)
        fewest = min(counts.values())
        standing.remove([o for o in standing if counts[o] == fewest][-1])


def listed_runoff(beliefs, options):
    return runoff_answer([[b, *(o for o in range(options) if o != b)] for b in beliefs], options)


def or_leader(answer: Answer, leader: int) -> Answer:
    return lambda beliefs, options: (
        answer(beliefs, options) if answer(beliefs, options) is not None else beliefs[leader]
    )


SMALL = (0.8, 0.45, 0.6, 0.5)
SMALL_WEIGHTS = (2.0, 0.5, 1.0, 1.0)


@pytest.mark.parametrize("accuracies, options", [(SMALL, 3), (FIVE_AT_07, 4), (MIXED, 4), ((0.6, 0.6, 0.55), 2)])
@pytest.mark.parametrize(
    "rule, answer",
    [
        (lambda n: Count("majority", (1.0,) * n), lambda n: share(lambda top, total: 2 * top > total)),
        (
            lambda n: Count("supermajority", (1.0,) * n, threshold=0.6),
            lambda n: share(lambda top, total: top / total > 0.6),
        ),
        (lambda n: Count("unanimous", (1.0,) * n), lambda n: share(lambda top, total: top == total)),
        (
            lambda n: Count("weighted", (2.0, 0.5, 1.0, 1.0, 3.0)[:n]),
            lambda n: share(lambda top, total: 2 * top > total, (2.0, 0.5, 1.0, 1.0, 3.0)[:n]),
        ),
        (lambda n: Count("plurality", (1.0,) * n), lambda n: most("none")),
        (lambda n: Count("plurality", (1.0,) * n, tie_break="first"), lambda n: most("first")),
        (lambda n: Count("plurality", (1.0,) * n, tie_break="leader", leader=1), lambda n: most("leader", leader=1)),
        (
            lambda n: Count("weighted_plurality", SMALL_WEIGHTS[:n] + (1.0,) * (n - 4)),
            lambda n: most("none", SMALL_WEIGHTS[:n] + (1.0,) * (n - 4)),
        ),
        (
            lambda n: Count("weighted_plurality", SMALL_WEIGHTS[:n] + (1.0,) * (n - 4), tie_break="first"),
            lambda n: most("first", SMALL_WEIGHTS[:n] + (1.0,) * (n - 4)),
        ),
        (lambda n: Count("majority", (1.0,) * n, leader=0), lambda n: or_leader(share(lambda t, a: 2 * t > a), 0)),
        (lambda n: Count("ranked_choice", (1.0,) * n), lambda n: listed_runoff),
        (lambda n: Confer("confidence", (80.0,) * n), lambda n: confer_answer),
        (lambda n: Confer("log_odds", (70.0,) * n), lambda n: confer_answer),
        (lambda n: Council(tuple(f"m{i}" for i in range(n))), lambda n: council_answer),
        (lambda n: Alone(n - 1, "last"), lambda n: lambda beliefs, options: beliefs[-1]),
    ],
    ids=[
        "majority",
        "supermajority",
        "unanimous",
        "weighted",
        "plurality",
        "plurality-first",
        "plurality-leader",
        "weighted_plurality",
        "weighted_plurality-first",
        "decide-majority",
        "ranked_choice",
        "confer",
        "confer-log_odds",
        "council",
        "alone",
    ],
)
def test_the_enumeration_matches_a_brute_force_counted_apart(accuracies, options, rule, answer):
    n = len(accuracies)
    line = theory(rule(n), accuracies, uniform_places(options))
    assert line.way == "exact"
    assert line.accuracy == pytest.approx(brute(accuracies, options, answer(n)), abs=1e-9)


def test_a_runoff_with_random_rankings_matches_the_brute_force():
    """The other options ranked in a random order: every ranking listed, each equally likely."""
    accuracies, options = (0.7, 0.5, 0.6), 3
    expected = 0.0
    for gold in range(options):
        for rankings in product(permutations(range(options)), repeat=len(accuracies)):
            chance = math.prod(
                (p if ranking[0] == gold else (1 - p) / (options - 1)) / math.factorial(options - 1)
                for p, ranking in zip(accuracies, rankings, strict=True)
            )
            if runoff_answer([list(ranking) for ranking in rankings], options) == gold:
                expected += chance / options
    line = theory(Count("ranked_choice", (1.0,) * 3, rankings="random"), accuracies, uniform_places(options))
    assert line.way == "exact" and line.accuracy == pytest.approx(expected, abs=1e-9)
    assert "in a random order" in line.rule


def test_where_the_gold_option_sits_matters_only_to_rules_that_read_the_list():
    """Two voters at 0.5 on two options: a 1–1 split given to the option listed first is right
    only when the gold is listed first. Averaged over the places it is a coin toss."""
    first = Count("plurality", (1.0, 1.0), tie_break="first")
    on_top, below = accuracy(first, (0.5, 0.5), {(2, 0): 1}), accuracy(first, (0.5, 0.5), {(2, 1): 1})
    assert (on_top, below) == (pytest.approx(0.75), pytest.approx(0.25))
    assert accuracy(first, (0.5, 0.5), {(2, 0): 3, (2, 1): 1}) == pytest.approx(0.625)
    plain = Count("plurality", (1.0, 1.0))
    assert accuracy(plain, (0.5, 0.5), {(2, 0): 1}) == accuracy(plain, (0.5, 0.5), {(2, 1): 1}) == pytest.approx(0.25)


def test_questions_with_different_numbers_of_options_are_weighed_by_count():
    line = theory(Count("majority", (1.0,) * 3), (0.6,) * 3, {(2, 0): 1, (4, 1): 3})
    two = accuracy(Count("majority", (1.0,) * 3), (0.6,) * 3, uniform_places(2))
    four = accuracy(Count("majority", (1.0,) * 3), (0.6,) * 3, uniform_places(4))
    assert line.accuracy == pytest.approx((two + 3 * four) / 4)


# Against a plain simulation ---------------------------------------------------------------------

SIMULATED = 20_000


def simulate(accuracies: Sequence[float], options: int, answer: Answer, seed: int) -> float:
    rng = random.Random(seed)
    right = 0
    for _ in range(SIMULATED):
        gold = rng.randrange(options)
        wrong = [o for o in range(options) if o != gold]
        beliefs = tuple(gold if rng.random() < p else rng.choice(wrong) for p in accuracies)
        right += answer(beliefs, options) == gold
    return right / SIMULATED


def four_standard_errors(p: float, n: int) -> float:
    """The tolerance: 4 standard errors of a proportion (missed by chance about once in 16,000)."""
    return 4 * math.sqrt(p * (1 - p) / n)


@pytest.mark.parametrize(
    "rule, accuracies, answer",
    [
        (Count("majority", EVEN), FIVE_AT_07, share(lambda top, total: 2 * top > total)),
        (Count("weighted_plurality", OPTIMAL), MIXED, most("none", OPTIMAL)),
        (Confer("confidence", (80.0,) * 5), MIXED, confer_answer),
        (Council(NAMES), FIVE_AT_07, council_answer),
    ],
    ids=["majority", "weighted_plurality", "confer", "council"],
)
def test_the_enumeration_matches_a_plain_simulation(rule, accuracies, answer):
    exact = accuracy(rule, accuracies)
    assert abs(simulate(accuracies, 4, answer, seed=20) - exact) <= four_standard_errors(exact, SIMULATED)


def test_past_the_budget_a_rule_is_simulated_and_says_so():
    rule = Council(NAMES)
    exact = theory(rule, FIVE_AT_07, FOUR)
    simulated = theory(rule, FIVE_AT_07, FOUR, seconds=0, samples=4000, seed=7)
    assert (simulated.way, simulated.samples) == ("simulation", 4000)
    assert simulated.standard_error == pytest.approx(math.sqrt(simulated.accuracy * (1 - simulated.accuracy) / 4000))
    assert abs(simulated.accuracy - exact.accuracy) <= 4 * simulated.standard_error
    assert "simulated: enumerating takes more than 0 s" in simulated.note
    assert theory(rule, FIVE_AT_07, FOUR, seconds=0, samples=4000, seed=7) == simulated, "seeded"


def test_ten_voters_are_exact_for_a_count_and_a_council_past_the_states_is_simulated(monkeypatch):
    ten = (0.7,) * 10
    plurality = theory(Count("plurality", (1.0,) * 10), ten, FOUR)
    assert plurality.way == "exact" and plurality.accuracy == pytest.approx(0.977, abs=0.001)
    assert theory(Confer("confidence", (80.0,) * 10), ten, FOUR).way == "exact"
    # A council's state is the whole profile, 4^6 of them for six voters: past the states memory
    # allows (made small here), it is simulated however much time is left.
    monkeypatch.setattr(theory_module, "MAX_STATES", 1000)
    six = theory(Council(tuple(f"m{i}" for i in range(6))), (0.7,) * 6, FOUR, seconds=math.inf, samples=500)
    assert six.way == "simulation" and "1,000 states" in six.note


def test_a_council_shuffled_afresh_each_question_can_only_be_simulated():
    fresh = theory(Council(NAMES, shuffle=True), FIVE_AT_07, FOUR, samples=3000)
    assert fresh.way == "simulation" and "draws at random on each question" in fresh.note
    assert "in a fresh random order per question" in fresh.rule
    seeded = theory(Council(NAMES, shuffle=True, seed=3), FIVE_AT_07, FOUR)
    assert seeded.way == "exact" and "in the order seed 3 shuffles" in seeded.rule


def test_a_council_without_self_review():
    """Each reviewer ranks only the others: with three voters, two who agree each put the other
    first, so the third's answer can win only alone against a split."""

    def answer(beliefs, options):
        places = [0] * len(beliefs)
        for reviewer, mine in enumerate(beliefs):
            shown = [m for m in range(len(beliefs)) if m != reviewer]
            order = [m for m in shown if beliefs[m] == mine] + [m for m in shown if beliefs[m] != mine]
            for place, member in enumerate(order, start=1):
                places[member] += place
        return beliefs[min(range(len(beliefs)), key=lambda member: (places[member], member))]

    line = theory(Council(("a", "b", "c"), self_review=False), (0.7, 0.6, 0.5), uniform_places(3))
    assert line.accuracy == pytest.approx(brute((0.7, 0.6, 0.5), 3, answer), abs=1e-9)


# Lines without a figure -----------------------------------------------------------------------


def test_a_confer_vote_below_chance_has_no_closed_form():
    line = theory(Confer("log_odds", (10.0,) * 5), FIVE_AT_07, FOUR)
    assert (line.accuracy, line.way) == (None, "none") and line.note.startswith("no closed form")
    # The same confidence summed as it is stays a plurality.
    assert theory(Confer("confidence", (10.0,) * 5), FIVE_AT_07, FOUR).way == "exact"


@pytest.mark.parametrize(
    "accuracies, places, note",
    [
        ((), FOUR, "there are no voters"),
        ((0.7, 1.2), FOUR, "a voter's accuracy is not a probability"),
        ((0.7,), {}, "there are no questions"),
        ((0.7,), {(1, 0): 4}, "a question needs at least two options, the gold one among them"),
        ((0.7,), {(3, 3): 1}, "a question needs at least two options, the gold one among them"),
    ],
)
def test_nonsense_gets_no_figure(accuracies, places, note):
    assert theory(Alone(0, "a"), accuracies, places) == Theory(rule="a alone", accuracy=None, way="none", note=note)


def test_every_line_states_its_voter_model():
    line = theory(Count("majority", EVEN), FIVE_AT_07, FOUR)
    assert line.note.startswith("independent voters, each holding the gold option with its own probability p")
    assert line.rule == "majority: more than half of the votes"


# Herding voters answering in turn --------------------------------------------------------------


def brute_force_in_turn(accuracies: list[float], herd: list[float], options: int = 4) -> float:
    """Every profile of beliefs and herding draws, gold option 0, answered in turn as the
    oracle answers and counted as a plurality, a tie to the answer given first."""
    total = 0.0
    for beliefs_ in product(range(options), repeat=len(accuracies)):
        for draws in product((True, False), repeat=len(accuracies)):
            chance = 1.0
            given: list[int] = []
            for p, h, belief, herds in zip(accuracies, herd, beliefs_, draws, strict=True):
                chance *= (p if belief == 0 else (1 - p) / (options - 1)) * (h if herds else 1 - h)
                counts = {answer: given.count(answer) for answer in given}
                tied = [answer for answer in counts if counts[answer] == max(counts.values(), default=0)]
                given.append(belief if not herds or not given or belief in tied else tied[0])
            counts = {answer: given.count(answer) for answer in given}
            winner = next(answer for answer in given if counts[answer] == max(counts.values()))
            total += chance * (winner == 0)
    return total


def test_herding_in_turn_is_the_enumerated_cascade():
    confer = Confer("confidence", (80.0,) * 5)
    places = uniform_places(4)
    cascade = herding_in_turn(confer, [0.5] * 5, [0.7] * 5, places)
    assert cascade == pytest.approx(brute_force_in_turn([0.7] * 5, [0.5] * 5), abs=1e-12)
    assert cascade == pytest.approx(0.7971775, abs=1e-7)
    mixed = herding_in_turn(confer, [0.2, 0.9, 0.0, 0.5, 1.0], [0.9, 0.6, 0.6, 0.7, 0.5], places)
    assert mixed == pytest.approx(brute_force_in_turn([0.9, 0.6, 0.6, 0.7, 0.5], [0.2, 0.9, 0.0, 0.5, 1.0]), abs=1e-12)
    # No herding: the independent line; sure herders: the first member alone.
    assert herding_in_turn(confer, [0.0] * 5, [0.7] * 5, places) == pytest.approx(
        theory(confer, [0.7] * 5, places).accuracy, abs=1e-12
    )
    assert herding_in_turn(confer, [1.0] * 5, [0.7] * 5, places) == pytest.approx(0.7, abs=1e-12)


def test_herding_in_turn_has_no_figure_where_the_votes_could_move_the_count():
    places = uniform_places(4)
    assert herding_in_turn(Confer("confidence", (80.0, 60.0)), [0.5, 0.5], [0.7, 0.7], places) is None
    assert herding_in_turn(Confer("confidence", (80.0,) * 2, (0.1, 0.1)), [0.5, 0.5], [0.7, 0.7], places) is None
    assert herding_in_turn(Confer("confidence", (80.0,) * 5), [0.5] * 5, [0.7] * 5, places, seconds=0) is None
