"""What stopping early keeps and saves, on simulated voters: the theory of `stop: decided` and
`stop: confident(x)` (`panel_cli.protocols.stopping`), beside each rule's theory line.

The voters are `theory`'s: independent, voter i right with its p_i and otherwise on one of the
other options at random. They are asked in a fixed order (member order, or heaviest weight
first), and after each answer, or each wave of answers, the stopping rule looks at the ballots
in hand exactly as an engine would (`settled`, `next_wave`, `confident`, the protocol's own
count): the expected number of members asked is the cost, and the chance that the answer
stopped on is the gold option is the accuracy. Under `decided` that accuracy is the full
panel's, by construction; the figure is computed anyway, so a stopping rule that changed an
answer would show.

confer as its engine holds it (`Stop.vote_rounds`): the answers are counted as a plurality, a
tie to the answer given first (the confidences come only with the votes, so the answers' count
cannot weigh them), and once the answers settle which leads, the members asked vote, unless
they all gave one answer: in waves, those whose answer leads first, each for the first answer
that gives its belief at its confidence, until the votes in hand settle the round. The voters
keep their answers, so the round moves nothing and is the last (`until_convergence`), or every
round repeats it. Its accuracy is the vote's, which with unequal confidences can differ from
everyone's: a stopping rule that changed an answer shows.

Under `confident(x)` the known accuracies are the voters' own p (what calibration measures),
weighed as an engine weighs them (`posterior.accuracy_weight`); a question on which the
leading answer never reaches x is answered by the rule's count of everyone.

Exact by enumeration: the state is how many have been asked and the multiset of their ballots
(with the order answers were first given, for confer's tie rule), so a 5-member panel is a few
hundred states. Past the clock it is simulated, with its standard error.

Pure: no I/O, no model, no run.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypedDict

from pydantic import BaseModel, Field

from panel_cli.eval.theory import (
    EXACT_SECONDS,
    SAMPLES,
    VOTER_MODEL,
    Clock,
    Confer,
    Count,
    Outcome,
    Place,
    Rule,
    Way,
    _collapse,
    _problem,
    _spread,
    option_names,
)
from panel_cli.protocols.confer.log_odds import ConferTally, vote_weight
from panel_cli.protocols.confer.stopping import leading_key, next_answerers, next_votes, round_winner
from panel_cli.protocols.confer.tally import labels_for
from panel_cli.protocols.posterior import Evidence, accuracy_weight
from panel_cli.protocols.stopping import CountRules, confident, first_given_order, next_wave, settled
from panel_cli.protocols.vote.tally import Ballot, Method, TieBreak

# How members are asked: one at a time; in waves, each the fewest that could settle the outcome
# (`next_wave`: no more calls than one at a time, in fewer rounds); or in two waves, the fewest
# that could settle it and then everyone left.
Asking = Literal["one at a time", "waves", "two waves"]
ASKING: dict[str, str] = {
    "one at a time": "one member at a time",
    "waves": "in waves, each the fewest that could settle it",
    "two waves": "the fewest that could settle it, then everyone left",
}


@dataclass(frozen=True)
class Stop:
    """When asking stops: `decided` (nothing the rest could vote would change the outcome), or
    `confident` (the leading answer is right with probability at least `at_least`); and how
    members are asked (`Asking`)."""

    kind: Literal["decided", "confident"] = "decided"
    asking: Asking = "one at a time"
    at_least: float = 0.95
    # confer's vote rounds after the answers, as its engine holds them (the module's docstring);
    # 0 counts confer's answers alone, as its count settles them.
    vote_rounds: int = 0

    def describe(self) -> str:
        what = f"confident({self.at_least:g})" if self.kind == "confident" else "decided"
        votes = ""
        if self.vote_rounds:
            rounds = "a vote" if self.vote_rounds == 1 else f"{self.vote_rounds} vote rounds"
            votes = f", then {rounds} among those asked, in waves"
        return f"stop: {what}, {ASKING[self.asking]}{votes}"


class StoppingTheory(BaseModel):
    """A rule under a stopping rule on simulated voters: its `accuracy`, the expected members
    asked (`calls`, of `members`) and rounds of asking (`rounds`), the share of questions
    stopped before everyone was asked (`early`); exact, simulated, or none (`note` says why)."""

    rule: str
    stop: str
    members: int
    order: list[int] = Field(description="the voters' places in the order they are asked")
    accuracy: float | None
    calls: float | None = None
    rounds: float | None = None
    early: float | None = None
    way: Way
    standard_error: float | None = None
    samples: int | None = None
    note: str = ""


class _Described(TypedDict):
    """What a `StoppingTheory` says whatever its figures: the rule, the stop, who is asked."""

    rule: str
    stop: str
    members: int
    order: list[int]


@dataclass(frozen=True)
class Counting:
    """A rule as the stopping rule counts it: vote's method over the options as listed, or
    confer's count (most weight, a tie to the answer given first)."""

    method: Method
    weights: tuple[float, ...]
    tie_break: TieBreak
    threshold: float
    first_given: bool

    def options(self, names: Sequence[str], ballots: Sequence[Ballot]) -> list[str]:
        return first_given_order([ballot.choice for ballot in ballots], names) if self.first_given else list(names)


def counting(rule: Rule, options: int) -> Counting | str:
    """How the stopping rule counts `rule` on questions of K `options`, or why it cannot."""
    if not isinstance(rule, Count | Confer):
        return "only vote's and confer's counts are read by a stopping rule"
    if isinstance(rule, Count):
        if rule.leader is not None:
            return "a decision's leader, asked when no option wins, is not modelled under a stopping rule"
        return Counting(rule.method, rule.weights, rule.tie_break, rule.threshold, first_given=False)
    if rule.chance:
        return "confidences read with noise change the count on each question"
    weights = tuple(vote_weight(confidence, options, rule.tally) for confidence in rule.confidences)
    return Counting("weighted_plurality", weights, "first", 0.5, first_given=True)


def stopping_theory(
    rule: Rule,
    accuracies: Sequence[float],
    places: Mapping[Place, int],
    stop: Stop,
    *,
    order: Sequence[int] | None = None,
    seconds: float = EXACT_SECONDS,
    samples: int = SAMPLES,
    seed: int = 0,
) -> StoppingTheory:
    """`rule` asking its voters in `order` (member order by default) under `stop`, over
    questions whose gold option sits at `places`."""
    asked = list(order) if order is not None else list(range(len(accuracies)))
    base: _Described = {"rule": rule.describe(), "stop": stop.describe(), "members": len(accuracies), "order": asked}
    problem = _problem(rule, accuracies, places)
    if problem is None and sorted(asked) != list(range(len(accuracies))):
        problem = "the order must name every voter once"
    if problem is None and stop.kind == "confident" and stop.asking != "one at a time":
        problem = "confident asks one member at a time"
    if problem is None and stop.vote_rounds and (stop.kind != "decided" or not isinstance(rule, Confer)):
        problem = "only confer under stop: decided holds vote rounds"
    kinds = {options for options, _ in places}
    rules = {k: counting(rule, k) for k in kinds} if problem is None else {}
    problem = problem or next((found for found in rules.values() if isinstance(found, str)), None)
    if problem is not None:
        return StoppingTheory(**base, accuracy=None, way="none", note=problem)
    counted = {k: found for k, found in rules.items() if isinstance(found, Counting)}
    clock = Clock(seconds)
    exact = _exact(rule, counted, accuracies, places, stop, asked, clock)
    if exact is not None:
        accuracy, calls, rounds, early = exact
        return StoppingTheory(
            **base, accuracy=accuracy, calls=calls, rounds=rounds, early=early, way="exact", note=VOTER_MODEL
        )
    accuracy, calls, rounds, early = _simulate(rule, counted, accuracies, places, stop, asked, samples, seed)
    return StoppingTheory(
        **base,
        accuracy=accuracy,
        calls=calls,
        rounds=rounds,
        early=early,
        way="simulation",
        standard_error=math.sqrt(accuracy * (1 - accuracy) / samples),
        samples=samples,
        note=f"{VOTER_MODEL}; {clock.why()}",
    )


class _Asker:
    """The stopping rule at one state: the ballots in hand, the voters still to ask."""

    def __init__(
        self,
        counting_: Counting,
        accuracies: Sequence[float],
        options: int,
        stop: Stop,
        order: Sequence[int],
        tally: ConferTally = "confidence",
    ) -> None:
        self.counting = counting_
        self.accuracies = accuracies
        self.names = option_names(options)
        self.k = options
        self.stop = stop
        self.order = order
        self.tally = tally
        self.known: dict[Hashable, Look] = {}

    def ballots(self, held: Sequence[tuple[int, Outcome]]) -> list[Ballot]:
        """The voters' ballots as `Count` casts them: a belief alone ranks the other options
        after it in the order listed (what the demo oracle casts)."""
        cast = []
        for voter, outcome in held:
            ranking = (
                list(outcome)
                if isinstance(outcome, tuple)
                else [outcome, *(option for option in range(self.k) if option != outcome)]
            )
            names = [self.names[option] for option in ranking]
            cast.append(Ballot(voter=f"v{voter}", choice=names[0], ranking=names, weight=self.counting.weights[voter]))
        return cast

    def look(self, key: Hashable, asked: int, held: Sequence[tuple[int, Outcome]]) -> Look:
        if key not in self.known:
            self.known[key] = self._confer_look(asked, held) if self.stop.vote_rounds else self._look(asked, held)
        return self.known[key]

    def _look(self, asked: int, held: Sequence[tuple[int, Outcome]]) -> Look:
        ballots = self.ballots(held)
        counting_ = self.counting
        options = counting_.options(self.names, ballots)
        remaining = [counting_.weights[voter] for voter in self.order[asked:]]
        rules: CountRules = {"threshold": counting_.threshold, "tie_break": counting_.tie_break}
        found = settled(ballots, remaining, options, counting_.method, **rules)
        place = None if found.winner is None else self.names.index(found.winner)
        if not remaining:
            return Look(True, place)
        if self.stop.kind == "decided":
            if found.decided:
                return Look(True, place)
            return Look(
                False,
                wave=self._wave(
                    asked, len(remaining), lambda: next_wave(ballots, remaining, options, counting_.method, **rules)
                ),
            )
        evidence = [
            Evidence(ballot.choice, accuracy_weight(self.accuracies[voter], self.k))
            for ballot, (voter, _) in zip(ballots, held, strict=True)
        ]
        sure = confident(evidence, self.k, self.stop.at_least, order=options)
        if sure.decided and sure.winner is not None:
            return Look(True, self.names.index(sure.winner))
        return Look(False, wave=1)

    def _wave(self, asked: int, left: int, fewest: Callable[[], int]) -> int:
        """How many to ask next under `decided`, as `stop.asking` says."""
        if self.stop.asking == "one at a time":
            return 1
        if self.stop.asking == "two waves" and asked > 0:
            return left
        return fewest()

    def _confer_look(self, asked: int, held: Sequence[tuple[int, Outcome]]) -> Look:
        """confer's engine: its answers' count (`next_answerers`), then its vote rounds."""
        keys: list[str | None] = [self.names[_place(outcome)] for _, outcome in held]
        left = len(self.order) - asked
        if left:
            wave = next_answerers(keys, left, self.names).size
            if wave:
                return Look(False, wave=self._wave(asked, left, lambda: wave))
        answer, votes, waves = self._vote(held)
        return Look(True, answer, calls=votes * self.stop.vote_rounds, rounds=waves * self.stop.vote_rounds)

    def _vote(self, held: Sequence[tuple[int, Outcome]]) -> tuple[int, int, int]:
        """(the winner as an option's place, votes cast, waves) of one vote round among the
        members asked, as confer's engine holds it (`_votes_in_waves`); none on one answer."""
        keys = [self.names[_place(outcome)] for _, outcome in held]
        if len(set(keys)) == 1:
            return self.names.index(keys[0]), 0, 0
        labels = labels_for(len(keys))
        first = {key: labels[keys.index(key)] for key in keys}
        leading = leading_key(keys)
        voters = sorted(range(len(keys)), key=lambda place: keys[place] != leading)
        cast: dict[str, list[float]] = {label: [] for label in labels}
        scores = dict.fromkeys(labels, 0.0)
        votes = waves = 0
        while wave := next_votes(scores, labels, votes > 0, len(voters) - votes, self.tally, self.k).size:
            for place in voters[votes : votes + wave]:
                cast[first[keys[place]]].append(self.counting.weights[held[place][0]])
            scores = {label: math.fsum(found) for label, found in cast.items()}
            votes, waves = votes + wave, waves + 1
        winner = round_winner(scores, labels)
        assert winner is not None
        return self.names.index(keys[labels.index(winner)]), votes, waves


@dataclass(frozen=True)
class Look:
    """What the stopping rule says at a state: whether asking stops, the answer stopped on (an
    option's place), the next wave's size; and the calls and rounds of asking confer's vote
    adds once its answers stop."""

    done: bool
    answer: int | None = None
    wave: int = 0
    calls: int = 0
    rounds: int = 0


def _key(asker: _Asker, asked: int, pending: int, rounds: int, held: Sequence[tuple[int, Outcome]]) -> Hashable:
    """A state: voters of equal weight and accuracy are alike, so the ballots are a multiset of
    (voter's weight, accuracy, ballot), and for confer the answers in the order first given, which
    its tie rule reads. confer's vote is the exception: who votes after whom decides when a round
    is settled (alpha, bravo, charlie, bravo, alpha settles after four votes, one vote each;
    alpha, bravo, bravo, charlie, alpha after five), so its states are the answers in order."""
    weights, accuracies = asker.counting.weights, asker.accuracies
    if asker.stop.vote_rounds:
        return asked, pending, rounds, tuple(held)
    cast = tuple(sorted((weights[voter], accuracies[voter], outcome) for voter, outcome in held))
    firsts: tuple[Hashable, ...] = ()
    if asker.counting.first_given:
        seen: list[Hashable] = []
        for _, outcome in held:
            belief = outcome[0] if isinstance(outcome, tuple) else outcome
            if belief not in seen:
                seen.append(belief)
        firsts = tuple(seen)
    return asked, pending, rounds, cast, firsts


def _exact(
    rule: Rule,
    counted: Mapping[int, Counting],
    accuracies: Sequence[float],
    places: Mapping[Place, int],
    stop: Stop,
    order: Sequence[int],
    clock: Clock,
) -> tuple[float, float, float, float] | None:
    """(accuracy, expected calls, expected rounds, share stopped early) over the places."""
    total = sum(places.values())
    by_options: dict[int, list[tuple[int, int]]] = {}
    for (options, gold), count in _collapse(rule, places).items():
        by_options.setdefault(options, []).append((gold, count))
    parts: list[list[float]] = [[], [], [], []]
    for options, golds in by_options.items():
        asker = _Asker(counted[options], accuracies, options, stop, order, _tally(rule))
        found = _enumerate(rule, asker, accuracies, options, [gold for gold, _ in golds], clock)
        if found is None:
            return None
        for (_, count), figures in zip(golds, found, strict=True):
            for part, figure in zip(parts, figures, strict=True):
                part.append(figure * count / total)
    accuracy, calls, rounds, early = (math.fsum(part) for part in parts)
    return accuracy, calls, rounds, early


def _enumerate(
    rule: Rule, asker: _Asker, accuracies: Sequence[float], options: int, golds: Sequence[int], clock: Clock
) -> list[tuple[float, float, float, float]] | None:
    """Every state the asking can be in, with its probability for each gold place; each state
    that stops adds its members asked, rounds and whether its answer is right."""
    spreads = {voter: _spread(rule, accuracies[voter], options, golds) for voter in asker.order}
    states: dict[Hashable, tuple[int, int, int, tuple[tuple[int, Outcome], ...], list[float]]] = {
        _key(asker, 0, 0, 0, ()): (0, 0, 0, (), [1.0] * len(golds))
    }
    sums = [([], [], [], []) for _ in golds]  # type: list[tuple[list[float], list[float], list[float], list[float]]]
    members = len(asker.order)
    while states:
        following: dict[Hashable, tuple[int, int, int, tuple[tuple[int, Outcome], ...], list[float]]] = {}
        for asked, pending, rounds, held, weights in states.values():
            if clock.out(len(following)):
                return None
            if pending == 0:
                found = asker.look(_key(asker, asked, 0, 0, held), asked, held)
                if found.done:
                    for gold, weight, (right, calls, waves, early) in zip(golds, weights, sums, strict=True):
                        right.append(weight if found.answer == gold else 0.0)
                        calls.append(weight * (asked + found.calls))
                        waves.append(weight * (rounds + found.rounds))
                        early.append(weight if asked < members else 0.0)
                    continue
                pending, rounds = found.wave, rounds + 1
            voter = asker.order[asked]
            for outcome, chances in spreads[voter]:
                now = (*held, (voter, outcome))
                key = _key(asker, asked + 1, pending - 1, rounds, now)
                before = following.get(key)
                if before is None:
                    added = [weight * chance for weight, chance in zip(weights, chances, strict=True)]
                    following[key] = (asked + 1, pending - 1, rounds, now, added)
                else:
                    for place, (weight, chance) in enumerate(zip(weights, chances, strict=True)):
                        before[4][place] += weight * chance
        states = following
    return [
        (math.fsum(right), math.fsum(calls), math.fsum(waves), math.fsum(early)) for right, calls, waves, early in sums
    ]


def _simulate(
    rule: Rule,
    counted: Mapping[int, Counting],
    accuracies: Sequence[float],
    places: Mapping[Place, int],
    stop: Stop,
    order: Sequence[int],
    samples: int,
    seed: int,
) -> tuple[float, float, float, float]:
    rng = random.Random(seed)
    kinds = list(places)
    counts = [places[kind] for kind in kinds]
    askers = {k: _Asker(found, accuracies, k, stop, order, _tally(rule)) for k, found in counted.items()}
    right = calls = rounds = early = 0
    for _ in range(samples):
        options, gold = rng.choices(kinds, counts)[0]
        asker = askers[options]
        held: list[tuple[int, Outcome]] = []
        asked = pending = waves = 0
        while True:
            if pending == 0:
                found = asker.look(_key(asker, asked, 0, 0, held), asked, held)
                if found.done:
                    break
                pending, waves = found.wave, waves + 1
            voter = order[asked]
            pairs = rule.outcomes(accuracies[voter], options, gold)
            held.append((voter, rng.choices([o for o, _ in pairs], [c for _, c in pairs])[0]))
            asked, pending = asked + 1, pending - 1
        right += found.answer == gold
        calls += asked + found.calls
        rounds += waves + found.rounds
        early += asked < len(order)
    return right / samples, calls / samples, rounds / samples, early / samples


def _tally(rule: Rule) -> ConferTally:
    """How confer's votes count (the vote's most weight), for a rule that holds a vote."""
    return rule.tally if isinstance(rule, Confer) else "confidence"


def _place(outcome: Outcome) -> int:
    """A confer voter's outcome: the place of the one option it answers (confer casts no rankings)."""
    assert isinstance(outcome, int), "confer's answers are one option each"
    return outcome
