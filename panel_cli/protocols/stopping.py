"""When a panel has heard enough (docs/protocols.md#stopping-early): the members are asked a
few at a time, and asking stops once the rest cannot change the answer (`settled`), or once the
leading answer is likely enough (`confident`).

`settled` asks whether any ballots the members not yet asked could cast would change what the
count decides, winner or no winner. Each of them may name any option, abstain, or cast nothing
at all (its call fails, or comes too late); the outcome is decided when every such completion
counts to the outcome of the ballots in hand, so a panel that stops there answers exactly
what counting everyone would have answered. No completion is listed: for every rule but the
runoff a few extreme ones decide it (everyone left names one option; under weights, those
that weigh 0 or more name one option and those below 0 another, or abstain; everyone
abstains; everyone fails), since each option's best chance and the leader's worst come from
one of those. That is exact, but for `weighted_plurality` with no winner in hand and a member
of negative weight still to ask, which is then never called decided (asking on is always
safe: its votes could be split in more ways than the extremes list). A runoff
(`ranked_choice`) is decided once a first-round majority is certain, or everyone has voted:
safe, not exact.

confer's count is `plurality` with a tie going to the answer given first: list its options in
the order first given (`first_given_order`), and count with `tie_break: first`.

`next_wave` is how many to ask at once: the fewest whose ballots could settle the outcome
(a 5-member plurality asks 3 first), so a panel asked in waves waits on fewer rounds of calls
than one asked a member at a time, and pays for at most a few more calls. `ask_order` puts
the heaviest weights first, since they settle soonest.

Pure: no I/O, no model, no run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypedDict

from pydantic import BaseModel

from panel_cli.protocols.posterior import Evidence, posteriors
from panel_cli.protocols.vote.methods import WEIGHTED_METHODS
from panel_cli.protocols.vote.tally import DEFAULT_THRESHOLD, Ballot, Method, TieBreak, tally

# The voter a completion's ballots are cast by: theirs are never read.
STILL_TO_ASK = "\x00still to ask"
# confer's count of free-text answers: a stand-in for an answer nobody has given yet.
ANOTHER_ANSWER = "\x00another answer"


class CountRules(TypedDict, total=False):
    """The rules of a count that `settled` and `next_wave` take as keywords, passed on whole."""

    threshold: float
    tie_break: TieBreak
    quorum: int


class Settled(BaseModel):
    """Whether asking can stop: `decided`, and the answer it stops on (`winner`, None for no
    winner), with the leading answer's probability when `confident` decided it. `reason` says
    why asking goes on, or why it stopped."""

    decided: bool
    winner: str | None = None
    confidence: float | None = None
    reason: str


def settled(
    ballots: Sequence[Ballot],
    remaining: Sequence[float],
    options: Sequence[str],
    method: Method,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    tie_break: TieBreak = "none",
    quorum: int = 1,
) -> Settled:
    """Whether the members still to ask (`remaining`: their weights) can change what `method`
    decides from `ballots`; when they cannot, `winner` is that outcome, which is the count of
    `ballots` alone."""

    def count(cast: Sequence[Ballot]) -> str | None:
        return tally(cast, options, method, threshold=threshold, quorum=quorum, tie_break=tie_break).winner

    now = count(ballots)
    if not remaining:
        return Settled(decided=True, winner=now, reason="every member has voted")
    left = _members(len(remaining))
    if method == "ranked_choice":
        return _runoff_settled(ballots, len(remaining), options, quorum, now)
    weights = remaining if method in WEIGHTED_METHODS else [1.0] * len(remaining)
    for completion in _extremes(weights, options):
        found = count([*ballots, *completion])
        if found != now:
            return Settled(decided=False, winner=now, reason=_could(left, found))
    if now is None and method == "weighted_plurality" and any(weight < 0 for weight in remaining):
        return Settled(
            decided=False, winner=None, reason=f"no option wins yet, and {left} below chance could still make one win"
        )
    outcome = f"{now} wins" if now is not None else "no option wins"
    return Settled(
        decided=True, winner=now, reason=f"{outcome} whatever the {left} still to ask {_vote(len(remaining))}"
    )


def _members(count: int) -> str:
    return f"{count} member{'' if count == 1 else 's'}"


def _vote(count: int) -> str:
    """`vote` after `2 members`, `votes` after `1 member`."""
    return "votes" if count == 1 else "vote"


def _could(left: str, found: str | None) -> str:
    return (
        f"the {left} still to ask could make {found} win" if found else f"the {left} still to ask could leave no winner"
    )


def _cast(weight: float, choice: str | None) -> Ballot:
    return Ballot(voter=STILL_TO_ASK, choice=choice, ranking=[choice] if choice else [], weight=weight)


def _extremes(weights: Sequence[float], options: Sequence[str]) -> list[list[Ballot]]:
    """The completions that decide whether an outcome can change: none cast at all, everyone
    abstains, and for each option o those of weight 0 or more name o while those below 0 name
    each other option q in turn, or abstain."""
    found: list[list[Ballot]] = [[], [_cast(weight, None) for weight in weights]]
    negative = any(weight < 0 for weight in weights)
    for option in options:
        against: list[str | None] = [*(other for other in options if other != option), None] if negative else [option]
        found += [[_cast(weight, option if weight >= 0 else other) for weight in weights] for other in against]
    return found


def _runoff_settled(
    ballots: Sequence[Ballot], remaining: int, options: Sequence[str], quorum: int, now: str | None
) -> Settled:
    """A runoff is settled early only by a certain first-round majority: more than half of the
    first preferences even if every member still to ask ranks another option first."""
    left = _members(remaining)
    counted = [ballot for ballot in ballots if not ballot.late]
    firsts = [ballot.choice for ballot in counted if ballot.choice in options]
    if now is not None and len(counted) >= quorum and 2 * firsts.count(now) > len(firsts) + remaining:
        return Settled(
            decided=True, winner=now, reason=f"{now} has a first-round majority whatever the {left} {_vote(remaining)}"
        )
    return Settled(
        decided=False, winner=now, reason=f"{left} to vote, and a runoff is settled early only by a certain majority"
    )


def first_given_order(choices: Sequence[str | None], options: Sequence[str] = ()) -> list[str]:
    """confer's options in the order its tie rule reads them: the answers given, in the order
    first given (member order), then the options declared that nobody gave, or, without
    declared options, `ANOTHER_ANSWER` for the one a member still to ask could give."""
    order: list[str] = []
    for choice in choices:
        if choice is not None and choice not in order:
            order.append(choice)
    rest = [option for option in options if option not in order]
    return order + (rest if options else [ANOTHER_ANSWER])


def ask_order(weights: Sequence[float]) -> list[int]:
    """The members' places, heaviest weight (in size) first, ties in member order: a strong
    member settles a weighted count soonest."""
    return sorted(range(len(weights)), key=lambda place: (-abs(weights[place]), place))


def next_wave(
    ballots: Sequence[Ballot],
    remaining: Sequence[float],
    options: Sequence[str],
    method: Method,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    tie_break: TieBreak = "none",
    quorum: int = 1,
) -> int:
    """How many of the members still to ask (in the order given) to ask at once: 0 when the
    outcome is settled; else the fewest whose ballots could settle it if they agreed (or, for no
    winner, if they split), and everyone left when no fewer could."""
    rules: CountRules = {"threshold": threshold, "tie_break": tie_break, "quorum": quorum}
    if settled(ballots, remaining, options, method, **rules).decided:
        return 0
    weights = list(remaining) if method in WEIGHTED_METHODS else [1.0] * len(remaining)
    for size in range(1, len(remaining)):
        wave, rest = weights[:size], remaining[size:]
        hoped = [*_extremes(wave, options)[2:], _spread(wave, options)]
        if any(settled([*ballots, *cast], rest, options, method, **rules).decided for cast in hoped):
            return size
    return len(remaining)


def _spread(weights: Sequence[float], options: Sequence[str]) -> list[Ballot]:
    """Ballots split over the options in turn: how a wave could settle that nothing wins."""
    return [_cast(weight, options[place % len(options)]) for place, weight in enumerate(weights)]


def confident(evidence: Sequence[Evidence], options: int, at_least: float, order: Sequence[str] = ()) -> Settled:
    """Whether the leading answer's probability of being right (`posterior.posteriors` over K
    `options`) has reached `at_least`. Of answers equally likely, the first in `order` (then the
    first chosen) leads."""
    if not 0.0 < at_least <= 1.0:
        raise ValueError(f"confident takes a probability above 0 and at most 1, not {at_least:g}")
    spread = posteriors(evidence, options)
    chosen = [choice for choice in spread if choice is not None]
    if not chosen:
        return Settled(decided=False, reason="no member has named an answer yet")
    ranked = sorted(chosen, key=lambda choice: (-spread[choice], _place(choice, order)))
    leader = ranked[0]
    sure = spread[leader]
    if sure >= at_least or math.isclose(sure, at_least, rel_tol=1e-12):
        return Settled(decided=True, winner=leader, confidence=sure, reason=f"{leader} is right with {sure:.3f}")
    return Settled(
        decided=False, winner=leader, confidence=sure, reason=f"{leader} leads at {sure:.3f}, below {at_least:g}"
    )


def _place(choice: str, order: Sequence[str]) -> int:
    return order.index(choice) if choice in order else len(order)
