"""What each counting rule should score on simulated voters: the line an eval's measured
accuracy is checked against, one per system, never one line for all.

The voters are the ones `demo/oracle@p` plays: voter i holds the gold option with probability
p_i, and otherwise one of the K − 1 wrong options at random, independently of every other
voter and question. It answers, votes and ranks by that belief alone. A rule turns the
beliefs into an answer, and the chance that the answer is the gold option is its accuracy.

That chance is computed exactly when the ways the voters can vote are few enough to list:
the voters are taken one at a time, and ways that leave the count in the same state (the
same multiset of ballots, say) are added together, so a plurality of ten voters is a few
hundred states, not 4^10 profiles, and every place of the gold option is carried in one pass.
A rule whose state is the whole profile (council) is exact up to about eight voters on four
options. What takes more than `EXACT_SECONDS` of computing to enumerate is estimated by a
seeded simulation instead, with its standard error, and the line says which.

Beside the accuracy, each line has the Brier score of the exact posterior of the rule's answer
(the probability it is right given the votes the rule read, the voters' accuracies known):
the best any stated confidence of that answer can score, which an eval measures a system's
`confidence` against.

Every rule counts with the protocol's own arithmetic (vote's `tally`, confer's `tally`,
council's `aggregate_rankings` and `review_order`), so the line is the accuracy of the rule
as panel counts it, ties and all. Where an option's place in the list matters (a tie given to
the option listed first, a runoff dropping the option listed last), the accuracy is averaged
over the places the gold option holds in the dataset.

Pure: no I/O, no model, no run.
"""

from __future__ import annotations

import functools
import math
import random
import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from itertools import permutations
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from panel_cli.protocols.base import labels_for
from panel_cli.protocols.confer.log_odds import ConferTally, vote_weight
from panel_cli.protocols.confer.tally import Vote
from panel_cli.protocols.confer.tally import tally as confer_tally
from panel_cli.protocols.council.ranking import aggregate_rankings, review_order
from panel_cli.protocols.vote.tally import (
    DEFAULT_THRESHOLD,
    PLURALITY_METHODS,
    Ballot,
    Method,
    TieBreak,
    leader_settles,
    runoff,
    tally,
)
from panel_cli.simulation.voters import noisy_reading

Way = Literal["exact", "simulation", "none"]
# (number of options, the gold option's place among them, from 0): where a question puts its answer.
Place = tuple[int, int]
State = Hashable
# What one voter brings to the count: the option it holds (its place), or a runoff ballot's ranking.
Outcome = int | tuple[int, ...]

# A rule is enumerated for up to this many seconds, then simulated instead; and never past
# `MAX_STATES` states in one pass, which would hold more memory than a laptop spares.
EXACT_SECONDS = 10.0
MAX_STATES = 2_000_000
SAMPLES = 20_000
VOTER_MODEL = (
    "independent voters, each holding the gold option with its own probability p and otherwise one of the "
    "other options at random"
)
RANDOM_RANKING = (
    "each voter ranks its belief first and the other options after it in a random order, drawn afresh per question"
)
LISTED_RANKING = "each voter ranks its belief first and the other options after it in the order they are listed"


class Theory(BaseModel):
    """One rule's accuracy on simulated voters. `way` says how it was reached: `exact`
    (enumerated), `simulation` (`samples` seeded questions, with `standard_error`), or
    `none` (no closed form: `note` says why)."""

    rule: str = Field(description="the rule in words")
    accuracy: float | None
    way: Way
    standard_error: float | None = None
    samples: int | None = None
    note: str = Field(default="", description="the voter model it assumes, or why there is no figure")
    posterior_brier: float | None = Field(
        default=None,
        description="the Brier score a confidence reaches that is the exact posterior of the rule's answer "
        "(the voters' true accuracies known), over the questions it answers: the floor a confidence is measured against",
    )
    optimum: float | None = Field(
        default=None,
        description="where the members' stated confidences (or weights) are not what their accuracy says: the exact "
        "accuracy of counting them at the log-odds of their accuracy (the Nitzan–Paroush optimum)",
    )
    optimum_note: str = Field(default="", description="what the members stated, and what their accuracy gives")
    herding: float | None = Field(
        default=None,
        description="confer whose members answer in turn: the exact accuracy with herding as simulated "
        "(`herding_in_turn`); the line itself stays the independent voters'",
    )


def uniform_places(options: int) -> dict[Place, int]:
    """The gold option equally often in each of `options` places."""
    return {(options, place): 1 for place in range(options)}


def beliefs(p: float, options: int, gold: int) -> list[tuple[int, float]]:
    """A voter's belief: the gold option with probability p, each other with (1 − p)/(K − 1)."""
    wrong = (1.0 - p) / (options - 1)
    return [(option, p if option == gold else wrong) for option in range(options)]


class Rule(Protocol):
    """How a protocol turns the voters' beliefs into an answer, one voter at a time."""

    @property
    def listing_matters(self) -> bool:
        """Whether the places of the options in the list can change the answer."""
        ...

    @property
    def chance(self) -> bool:
        """Whether the rule draws at random on each question (then it can only be simulated)."""
        ...

    def describe(self) -> str: ...

    def unsupported(self, accuracies: Sequence[float], places: Mapping[Place, int]) -> str | None:
        """Why the rule has no figure for these voters on these questions, or None."""
        ...

    def outcomes(self, p: float, options: int, gold: int) -> Sequence[tuple[Outcome, float]]:
        """What one voter may bring to the count, with its probabilities."""
        ...

    def start(self) -> State: ...

    def step(self, state: State, voter: int, outcome: Outcome) -> State: ...

    def hears(self, voter: int) -> bool:
        """Whether the rule reads this voter at all: the posterior of its answer rests on those it reads."""
        ...

    def answer(self, state: State, options: int, rng: random.Random | None) -> int | None:
        """The rule's answer once every voter is in `state`: an option's place, or None."""
        ...


def option_names(options: int) -> list[str]:
    return [f"option {index + 1}" for index in range(options)]


# The rules -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Alone:
    """One voter answering alone: its own accuracy."""

    voter: int
    name: str
    listing_matters: bool = False
    chance: bool = False

    def describe(self) -> str:
        return f"{self.name} alone"

    def unsupported(self, accuracies: Sequence[float], places: Mapping[Place, int]) -> str | None:
        return None if 0 <= self.voter < len(accuracies) else f"{self.name} is not one of the voters"

    def outcomes(self, p: float, options: int, gold: int) -> Sequence[tuple[Outcome, float]]:
        return beliefs(p, options, gold)

    def start(self) -> State:
        return None

    def step(self, state: State, voter: int, outcome: Outcome) -> State:
        return outcome if voter == self.voter else state

    def hears(self, voter: int) -> bool:
        return voter == self.voter

    def answer(self, state: State, options: int, rng: random.Random | None) -> int | None:
        assert state is None or isinstance(state, int)
        return state


@dataclass(frozen=True)
class Count:
    """vote and decide: every voter's ballot counted by `method` (vote's own `tally`). A
    decision's `leader` (a voter's index) chooses its belief when no option wins, as
    `leader_settles` says. `weights` are the voters' weights, in member order. A runoff's
    ballots rank the belief first, then the other options as listed (what the demo oracle
    casts) or in a random order."""

    method: Method
    weights: tuple[float, ...]
    threshold: float = DEFAULT_THRESHOLD
    tie_break: TieBreak = "none"
    leader: int | None = None
    leader_name: str = ""
    rankings: Literal["listed", "random"] = "listed"
    chance: bool = False

    @property
    def listing_matters(self) -> bool:
        return self.method == "ranked_choice" or (self.method in PLURALITY_METHODS and self.tie_break == "first")

    def describe(self) -> str:
        words = {
            "majority": "more than half of the votes",
            "supermajority": f"more than {self.threshold:g} of the votes",
            "unanimous": "every vote",
            "weighted": "more than half of the total weight",
            "plurality": "the most votes",
            "weighted_plurality": "the most weight",
            "ranked_choice": "an instant runoff",
        }[self.method]
        if self.method in PLURALITY_METHODS:
            words += {
                "none": "; a tie is no winner",
                "first": "; a tie goes to the tied option listed first",
                "leader": "; a tie goes to the leader",
            }[self.tie_break]
        if self.method in ("weighted", "weighted_plurality"):
            words += f" (weights {', '.join(f'{weight:.3g}' for weight in self.weights)})"
        if self.method == "ranked_choice":
            words += f"; {RANDOM_RANKING if self.rankings == 'random' else LISTED_RANKING}"
        if self.leader is not None:
            words += f"; with no winner, the leader {self.leader_name} chooses its own belief"
        return f"{self.method.replace('_', ' ')}: {words}"

    def unsupported(self, accuracies: Sequence[float], places: Mapping[Place, int]) -> str | None:
        if len(self.weights) != len(accuracies):
            return "every voter needs a weight"
        return None

    def outcomes(self, p: float, options: int, gold: int) -> Sequence[tuple[Outcome, float]]:
        if self.method != "ranked_choice" or self.rankings == "listed":
            return beliefs(p, options, gold)
        orders = math.factorial(options - 1)
        return [
            ((belief, *rest), chance / orders)
            for belief, chance in beliefs(p, options, gold)
            for rest in permutations([option for option in range(options) if option != belief])
        ]

    def hears(self, voter: int) -> bool:
        return True

    def start(self) -> State:
        return ()

    def step(self, state: State, voter: int, outcome: Outcome) -> State:
        assert isinstance(state, tuple)
        return tuple(sorted((*state, ((self.weights[voter], voter == self.leader), outcome))))

    def answer(self, state: State, options: int, rng: random.Random | None) -> int | None:
        assert isinstance(state, tuple)
        names = option_names(options)
        orders = [
            outcome if isinstance(outcome, tuple) else (outcome, *(o for o in range(options) if o != outcome))
            for _, outcome in state
        ]
        leader_choice = next(
            (order[0] for ((_, is_leader), _), order in zip(state, orders, strict=True) if is_leader), None
        )
        if self.method == "ranked_choice":
            # vote's own runoff, handed the rankings `tally` would hand it (every ballot names an
            # option, so the quorum of 1 is met): the tally around it costs more than the count.
            winner = runoff([[names[option] for option in order] for order in orders], names)[-1].winner
            settles = winner is None
        else:
            ballots = [
                Ballot(voter="voter", choice=names[order[0]], ranking=[names[o] for o in order], weight=weight)
                for ((weight, _), _), order in zip(state, orders, strict=True)
            ]
            counted = tally(ballots, names, self.method, threshold=self.threshold, tie_break=self.tie_break)
            winner, settles = counted.winner, leader_settles(counted)
        if winner is None and self.leader is not None and settles and leader_choice is not None:
            return leader_choice
        return None if winner is None else names.index(winner)


@dataclass(frozen=True)
class Confer:
    """confer with simulated voters: each answers its belief, then votes for the first answer
    (in label order, which is member order) that gives its belief, at its confidence, and keeps
    its answer, so every round counts the same: confer's `tally` of those votes over K = the
    question's options, a tie to the lowest label, which is the answer of the earliest member
    holding it. With one confidence for all (the demo oracle's 80) every tally is a plurality
    of beliefs. `noise`: each reported confidence is read with a normal error of this standard
    deviation, drawn per question (`simulation.voters.noisy_reading`): that can only be simulated."""

    tally: ConferTally
    confidences: tuple[float, ...]
    noise: tuple[float, ...] = ()
    listing_matters: bool = False

    @property
    def chance(self) -> bool:
        return any(self.noise)

    def describe(self) -> str:
        how = {
            "confidence": "summed confidence",
            "votes": "votes, one each",
            "log_odds": "summed log-odds log((K−1)c/(1−c)), K the options",
        }[self.tally]
        same = set(self.confidences)
        at = f"every vote at confidence {same.pop():g}" if len(same) == 1 else "each voter at its own confidence"
        if self.chance:
            at += f", read with normal errors of {', '.join(f'{noise:g}' for noise in self.noise)}"
        return (
            f"confer ({self.tally}): the answer with the most {how}, {at}; a tie goes to the lowest label, "
            "the answer of the earliest member holding it"
        )

    def unsupported(self, accuracies: Sequence[float], places: Mapping[Place, int]) -> str | None:
        if len(self.confidences) != len(accuracies) or len(self.noise) not in (0, len(accuracies)):
            return "every voter needs a confidence"
        kinds = {options for options, _ in places}
        if not self.chance and any(vote_weight(c, k, self.tally) <= 0 for c in self.confidences for k in kinds):
            return "no closed form: a vote at or below chance counts against its answer, and the answers no one voted for then compete"
        return None

    def outcomes(self, p: float, options: int, gold: int) -> Sequence[tuple[Outcome, float]]:
        return beliefs(p, options, gold)

    def hears(self, voter: int) -> bool:
        return True

    def start(self) -> State:
        return () if self.chance else ((), ())

    def step(self, state: State, voter: int, outcome: Outcome) -> State:
        assert isinstance(state, tuple)
        if self.chance:
            return (*state, outcome)
        votes, first = state
        held = first if outcome in first else (*first, outcome)
        return tuple(sorted((*votes, (self.confidences[voter], outcome)))), held

    def answer(self, state: State, options: int, rng: random.Random | None) -> int | None:
        assert isinstance(state, tuple)
        if self.chance:
            return self._answer_with_noise(state, options, rng or random.Random(0))
        votes, first = state
        # One answer per member; the first holder of each belief gets every vote for it. The
        # other answers (later holders of a belief) get none, and weigh 0 below the voted ones.
        labels = labels_for(len(votes))
        label_of = {belief: labels[place] for place, belief in enumerate(first)}
        cast = [
            Vote(voter="voter", chosen_label=label_of[belief], confidence=confidence, revised_answer="")
            for confidence, belief in votes
        ]
        _, won = confer_tally(cast, labels, self.tally, options)
        place = labels.index(won) if won is not None else len(first)
        return first[place] if place < len(first) else None

    def _answer_with_noise(self, held: tuple[int, ...], options: int, rng: random.Random) -> int | None:
        """The whole profile, each member's confidence drawn as the oracle draws it; a label no
        one voted for can win here (every vote below chance), and it is its member's belief."""
        labels = labels_for(len(held))
        cast = [
            Vote(
                voter="voter",
                chosen_label=labels[held.index(belief)],
                confidence=noisy_reading(confidence, noise, rng) if noise else confidence,
                revised_answer="",
            )
            for confidence, noise, belief in zip(self.confidences, self.noise, held, strict=True)
        ]
        _, won = confer_tally(cast, labels, self.tally, options)
        return None if won is None else held[labels.index(won)]


@functools.lru_cache(maxsize=64)
def _review_orders(
    names: tuple[str, ...], self_review: bool, shuffle: bool, seed: int | None
) -> tuple[tuple[int, ...], ...]:
    """The members each reviewer is shown, in order, as council's `review_order` shows them."""
    labels = labels_for(len(names))
    place = {label: index for index, label in enumerate(labels)}
    return tuple(
        tuple(
            place[label]
            for label in review_order(labels, name, labels[index], shuffle=shuffle, seed=seed, self_review=self_review)
        )
        for index, name in enumerate(names)
    )


@dataclass(frozen=True)
class Council:
    """council with simulated voters: each answers its belief; each reviewer ranks the answers
    it is shown that agree with its belief first, then the rest, each group in the order shown;
    the answer with the best mean place wins (a tie to the earlier label, council's
    `aggregate_rankings`), and the chairman reports it. With `shuffle` and no seed, every
    question shows each reviewer a fresh order: that can only be simulated."""

    names: tuple[str, ...]
    self_review: bool = True
    shuffle: bool = False
    seed: int | None = None
    listing_matters: bool = False

    @property
    def chance(self) -> bool:
        return self.shuffle and self.seed is None

    def describe(self) -> str:
        shown = (
            "in label order"
            if not self.shuffle
            else f"in the order seed {self.seed} shuffles"
            if self.seed is not None
            else "in a fresh random order per question"
        )
        own = "" if self.self_review else ", its own answer left out"
        return (
            f"council: the answer with the best mean place, each reviewer ranking the answers that agree with it "
            f"first (shown {shown}{own}); a tie goes to the earlier label"
        )

    def unsupported(self, accuracies: Sequence[float], places: Mapping[Place, int]) -> str | None:
        return None if len(self.names) == len(accuracies) >= 2 else "a council needs at least 2 named members"

    def outcomes(self, p: float, options: int, gold: int) -> Sequence[tuple[Outcome, float]]:
        return beliefs(p, options, gold)

    def hears(self, voter: int) -> bool:
        return True

    def start(self) -> State:
        return ()

    def step(self, state: State, voter: int, outcome: Outcome) -> State:
        assert isinstance(state, tuple)
        return (*state, outcome)

    def answer(self, state: State, options: int, rng: random.Random | None) -> int | None:
        assert isinstance(state, tuple)
        seed = self.seed if not self.chance or rng is None else rng.randrange(2**31)
        orders = _review_orders(self.names, self.self_review, self.shuffle, seed)
        labels = labels_for(len(self.names))
        rankings = []
        for reviewer, shown in enumerate(orders):
            agree = [member for member in shown if state[member] == state[reviewer]]
            rest = [member for member in shown if state[member] != state[reviewer]]
            rankings.append([labels[member] for member in agree + rest])
        authors = dict(zip(labels, self.names, strict=True))
        ranked = aggregate_rankings(rankings, authors, {name: label for label, name in authors.items()})
        return state[self.names.index(ranked[0].name)] if ranked else None


# Herding voters answering in turn -------------------------------------------------------------


def herding_in_turn(
    rule: Confer,
    herd: Sequence[float],
    accuracies: Sequence[float],
    places: Mapping[Place, int],
    seconds: float = EXACT_SECONDS,
) -> float | None:
    """confer's exact accuracy when its members answer in turn and herd as the demo oracle
    does: the first answers its belief; each after it, with its probability `herd`, gives
    instead the answer most common among those before it (its own belief when that is among
    the most common, else the one given first), else its belief. With one confidence for all,
    the vote rounds then only confirm the plurality of those answers (a herder in a vote joins
    the answer confer's count picks anyway), which `rule` counts. None when the voters have
    several confidences or noisy ones (the votes could then move the count), or past `seconds`
    of enumerating. A state is each answer given so far, with how often, in the order first given."""
    if rule.chance or len(set(rule.confidences)) != 1 or len(herd) != len(accuracies):
        return None
    if _problem(rule, accuracies, places) is not None:
        return None
    total = sum(places.values())
    parts = []
    clock = Clock(seconds)
    for (options, gold), count in _collapse(rule, places).items():
        states: dict[tuple[tuple[int, int], ...], float] = {(): 1.0}
        for voter, p in enumerate(accuracies):
            following: dict[tuple[tuple[int, int], ...], float] = {}
            for state, weight in states.items():
                for belief, chance in beliefs(p, options, gold):
                    for herds, odds in ((True, herd[voter]), (False, 1.0 - herd[voter])):
                        if chance > 0 and odds > 0:
                            key = _given(state, _herded(state, belief) if herds else belief)
                            following[key] = following.get(key, 0.0) + weight * chance * odds
                if clock.out(len(following)):
                    return None
            states = following
        right = math.fsum(
            weight for state, weight in states.items() if rule.answer(_as_votes(rule, state), options, None) == gold
        )
        parts.append(right * count / total)
    return math.fsum(parts)


def _herded(state: tuple[tuple[int, int], ...], belief: int) -> int:
    """The oracle's herding move (`simulation.voters.most_common`): shown nothing, it keeps its belief."""
    if not state:
        return belief
    top = max(count for _, count in state)
    tied = [answer for answer, count in state if count == top]
    return belief if belief in tied else tied[0]


def _given(state: tuple[tuple[int, int], ...], answer: int) -> tuple[tuple[int, int], ...]:
    if any(given == answer for given, _ in state):
        return tuple((given, count + (given == answer)) for given, count in state)
    return (*state, (answer, 1))


def _as_votes(rule: Confer, state: tuple[tuple[int, int], ...]) -> State:
    """The answers as `Confer` counts them: every vote at the one confidence, and each answer
    in the order first given (its first holder's label)."""
    confidence = rule.confidences[0]
    votes = tuple(sorted((confidence, answer) for answer, count in state for _ in range(count)))
    return votes, tuple(answer for answer, _ in state)


# Computing a line ----------------------------------------------------------------------------


class Clock:
    """The enumeration's allowance: `seconds` of computing from now (the process's own time, so
    other work on the machine does not shorten it), and `MAX_STATES` states in one pass."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.process_time() + seconds
        self.spent = ""

    def out(self, states: int = 0) -> bool:
        if states > MAX_STATES:
            self.spent = f"more than {MAX_STATES:,} states to enumerate"
        elif time.process_time() >= self.deadline:
            self.spent = f"enumerating takes more than {self.seconds:g} s"
        return bool(self.spent)

    def why(self) -> str:
        return f"simulated: {self.spent}"


def theory(
    rule: Rule,
    accuracies: Sequence[float],
    places: Mapping[Place, int],
    *,
    seconds: float = EXACT_SECONDS,
    samples: int = SAMPLES,
    seed: int = 0,
) -> Theory:
    """The accuracy of `rule` for voters of these `accuracies`, over questions whose gold
    option sits at `places` (how many questions have each number of options and gold place):
    exact when it can be enumerated within `seconds`, else simulated over `samples` seeded
    questions. With it, the Brier score of the exact posterior of the rule's answer (`posterior_brier`)."""
    described = rule.describe()
    problem = _problem(rule, accuracies, places)
    if problem is not None:
        return Theory(rule=described, accuracy=None, way="none", note=problem)
    note = VOTER_MODEL
    if not rule.chance:
        clock = Clock(seconds)
        exact = _exact(rule, accuracies, places, clock)
        if exact is not None:
            accuracy, brier = exact
            return Theory(rule=described, accuracy=accuracy, way="exact", note=note, posterior_brier=brier)
        note += f"; {clock.why()}"
    else:
        note += "; simulated: the rule draws at random on each question"
    accuracy, brier = _simulate(rule, accuracies, places, samples, seed)
    return Theory(
        rule=described,
        accuracy=accuracy,
        way="simulation",
        standard_error=math.sqrt(accuracy * (1 - accuracy) / samples),
        samples=samples,
        note=note,
        posterior_brier=brier,
    )


def _problem(rule: Rule, accuracies: Sequence[float], places: Mapping[Place, int]) -> str | None:
    if not accuracies:
        return "there are no voters"
    if any(not 0.0 <= p <= 1.0 for p in accuracies):
        return "a voter's accuracy is not a probability"
    if not places or any(count <= 0 for count in places.values()):
        return "there are no questions"
    if any(options < 2 or not 0 <= gold < options for options, gold in places):
        return "a question needs at least two options, the gold one among them"
    return rule.unsupported(accuracies, places)


def _collapse(rule: Rule, places: Mapping[Place, int]) -> dict[Place, int]:
    """The places that can change the answer: all of them, or one per number of options."""
    if rule.listing_matters:
        return dict(places)
    merged: dict[Place, int] = {}
    for (options, _), count in places.items():
        merged[(options, 0)] = merged.get((options, 0), 0) + count
    return merged


def posterior(held: Sequence[tuple[float, Hashable]], options: int, answer: int) -> float:
    """The exact probability that `answer` is the gold option, given what each voter holds
    (`held`: its true accuracy p and the option it holds): Π p or (1 − p)/(K − 1), normalised
    over the K options (`panel_cli.protocols.posterior`'s model, with no bound on p)."""
    likelihoods = [
        math.prod(p if option == candidate else (1 - p) / (options - 1) for p, option in held)
        for candidate in range(options)
    ]
    total = math.fsum(likelihoods)
    return likelihoods[answer] / total if total > 0 else 1.0 / options


def _belief(outcome: Hashable) -> int:
    """The option a voter's outcome holds first (a runoff ballot's is a ranking)."""
    found = outcome[0] if isinstance(outcome, tuple) else outcome
    assert isinstance(found, int)
    return found


def _exact(
    rule: Rule, accuracies: Sequence[float], places: Mapping[Place, int], clock: Clock
) -> tuple[float, float | None] | None:
    """(accuracy, Brier score of the exact posterior of the answers given) over the places,
    one enumeration for every gold place of a number of options; None past the clock."""
    total = sum(places.values())
    by_options: dict[int, list[tuple[int, int]]] = {}
    for (options, gold), count in _collapse(rule, places).items():
        by_options.setdefault(options, []).append((gold, count))
    right_parts, brier_parts, answered_parts = [], [], []
    for options, golds in by_options.items():
        found = _enumerate(rule, accuracies, options, [gold for gold, _ in golds], clock)
        if found is None:
            return None
        for (_, count), (right, brier, answered) in zip(golds, found, strict=True):
            right_parts.append(right * count / total)
            brier_parts.append(brier * count / total)
            answered_parts.append(answered * count / total)
    answered = math.fsum(answered_parts)
    return math.fsum(right_parts), (math.fsum(brier_parts) / answered if answered > 0 else None)


def _enumerate(
    rule: Rule, accuracies: Sequence[float], options: int, golds: Sequence[int], clock: Clock
) -> list[tuple[float, float, float]] | None:
    """Voter by voter, every state the count can be in, with how many voters of each accuracy
    the rule reads hold each option (for the posterior), and its probability for each gold
    place at once. For each gold: (P(right), E[q(1 − q)] over answered profiles, P(answered)),
    q the posterior of the answer. None past the clock."""
    classes = sorted({p for voter, p in enumerate(accuracies) if rule.hears(voter)})
    states: dict[tuple[State, tuple[int, ...]], list[float]] = {
        (rule.start(), (0,) * (len(classes) * options)): [1.0] * len(golds)
    }
    for voter, p in enumerate(accuracies):
        spread = _spread(rule, p, options, golds)
        slot = classes.index(p) * options if rule.hears(voter) else None
        following: dict[tuple[State, tuple[int, ...]], list[float]] = {}
        for (state, held), weights in states.items():
            for outcome, chances in spread:
                if slot is not None:
                    place = slot + _belief(outcome)
                    held_now = (*held[:place], held[place] + 1, *held[place + 1 :])
                else:
                    held_now = held
                key = (rule.step(state, voter, outcome), held_now)
                before = following.get(key)
                if before is None:
                    following[key] = [weight * chance for weight, chance in zip(weights, chances, strict=True)]
                else:
                    for place, (weight, chance) in enumerate(zip(weights, chances, strict=True)):
                        before[place] += weight * chance
            if clock.out(len(following)):
                return None
        states = following
    sums: list[tuple[list[float], list[float], list[float]]] = [([], [], []) for _ in golds]
    known: dict[tuple[tuple[int, ...], int], float] = {}
    for counted, ((state, held), weights) in enumerate(states.items()):
        if counted % 1024 == 0 and clock.out():
            return None
        answer = rule.answer(state, options, None)
        if answer is None:
            continue
        if (held, answer) not in known:
            known[(held, answer)] = _posterior_of_counts(held, classes, options, answer)
        q = known[(held, answer)]
        for gold, weight, (right, brier, answered) in zip(golds, weights, sums, strict=True):
            answered.append(weight)
            brier.append(weight * q * (1 - q))
            if answer == gold:
                right.append(weight)
    return [(math.fsum(right), math.fsum(brier), math.fsum(answered)) for right, brier, answered in sums]


def _spread(rule: Rule, p: float, options: int, golds: Sequence[int]) -> list[tuple[Outcome, tuple[float, ...]]]:
    """What one voter may bring, with its probability for each gold place; none impossible in all."""
    chances: dict[Outcome, list[float]] = {}
    for place, gold in enumerate(golds):
        for outcome, chance in rule.outcomes(p, options, gold):
            chances.setdefault(outcome, [0.0] * len(golds))[place] = chance
    return [(outcome, tuple(found)) for outcome, found in chances.items() if any(found)]


def _posterior_of_counts(held: Sequence[int], classes: Sequence[float], options: int, answer: int) -> float:
    """`posterior` from how many voters of each accuracy hold each option."""
    pairs = [
        (p, option)
        for index, p in enumerate(classes)
        for option in range(options)
        for _ in range(held[index * options + option])
    ]
    return posterior(pairs, options, answer)


def _simulate(
    rule: Rule, accuracies: Sequence[float], places: Mapping[Place, int], samples: int, seed: int
) -> tuple[float, float | None]:
    rng = random.Random(seed)
    kinds = list(places)
    counts = [places[kind] for kind in kinds]
    spreads: dict[tuple[int, int, int], tuple[list[Outcome], list[float]]] = {}
    known: dict[tuple[State, int], int | None] = {}
    right = 0
    spread_sum, answered = 0.0, 0
    for _ in range(samples):
        options, gold = rng.choices(kinds, counts)[0]
        state = rule.start()
        held: list[tuple[float, Hashable]] = []
        for voter, p in enumerate(accuracies):
            key = (voter, options, gold)
            if key not in spreads:
                pairs = rule.outcomes(p, options, gold)
                spreads[key] = ([outcome for outcome, _ in pairs], [chance for _, chance in pairs])
            population, chances = spreads[key]
            outcome = rng.choices(population, chances)[0]
            state = rule.step(state, voter, outcome)
            if rule.hears(voter):
                held.append((p, _belief(outcome)))
        if rule.chance:
            answer = rule.answer(state, options, rng)
        else:
            if (state, options) not in known:
                known[(state, options)] = rule.answer(state, options, None)
            answer = known[(state, options)]
        if answer is None:
            continue
        right += answer == gold
        q = posterior(held, options, answer)
        spread_sum += q * (1 - q)
        answered += 1
    return right / samples, (spread_sum / answered if answered else None)
