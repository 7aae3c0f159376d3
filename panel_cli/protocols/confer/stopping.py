"""confer under `stop: decided` (docs/protocols.md#confer): which answers are the same answer,
when the answers given settle which answer leads, and when a vote round's votes in hand settle
its winner, with how many to ask next. Pure, tested by hand.

The answer stage's count is `panel_cli.protocols.stopping`'s for confer: a plurality of the
answers given, a tie going to the answer given first. A vote round's count is confer's own
tally (`tally.tally`): the most summed weight, a tie to the lowest label; a vote not yet cast
may go to any label, weigh anything from the tally's least to its most (`vote_weight` of a
confidence of 0 and of 100), or not come at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from panel_cli.protocols.asking import Wave
from panel_cli.protocols.confer.log_odds import ConferTally, vote_weight
from panel_cli.protocols.stopping import ANOTHER_ANSWER, first_given_order, next_wave, settled
from panel_cli.protocols.vote.ballots import match_option
from panel_cli.protocols.vote.tally import Ballot, ties

# Why a vote round is not held under `stop: decided`.
ONE_ANSWER = "every answer given gives the same answer, so there is nothing to vote on"


def answer_key(text: str, options: Sequence[str]) -> str:
    """What an answer gives, to tell answers apart: the one option it names, read as a ballot's
    text is (`match_option`), when the question declares options; else its text, whitespace
    and case aside (as `choices_of` counts the distinct answers shown)."""
    if options:
        named = match_option(text, options)
        if named is not None:
            return named
    return " ".join(text.split()).casefold()


# Two answers nobody gave yet: when a wave is supposed to agree on one of them (`next_wave`),
# the members after it could still give the other.
FRESH = (ANOTHER_ANSWER, "\x00yet another answer")


def answers_count(keys: Sequence[str | None], options: Sequence[str]) -> tuple[list[Ballot], list[str]]:
    """The answers given (each an answer's key, None for a member whose call failed) as
    ballots, and the options they are counted over: the answers in the order first given,
    then the declared options nobody gave, then stand-ins for answers nobody gave yet (an
    answer may name no declared option)."""
    ballots = [Ballot(voter=f"{place}", choice=key, ranking=[key]) for place, key in enumerate(keys) if key is not None]
    order = [option for option in first_given_order(keys, options) if option not in FRESH]
    return ballots, [*order, *FRESH]


def next_answerers(keys: Sequence[str | None], left: int, options: Sequence[str]) -> Wave:
    """How many of the `left` members still to answer to ask next: none once no answers they
    could give would change which answer leads, else the fewest whose answers could settle it."""
    ballots, order = answers_count(keys, options)
    found = settled(ballots, [1.0] * left, order, "plurality", tie_break="first")
    if found.decided:
        return Wave(0, f"{_shown(found.winner)} leads whatever the {left} still to answer give")
    return Wave(next_wave(ballots, [1.0] * left, order, "plurality", tie_break="first"), found.reason)


def _shown(key: str | None) -> str:
    """An answer's key as a reason names it: an option as it is, a text by its first words."""
    if key is None or key in FRESH:
        return "the answer given first"
    return key if len(key) <= 40 else f"'{key[:39]}…'"


def leading_key(keys: Sequence[str | None]) -> str | None:
    """The answer the answers' count puts first: the most given, a tie to the one given first."""
    given = [key for key in keys if key is not None]
    return max(given, key=lambda key: (given.count(key), -given.index(key))) if given else None


def vote_settled(scores: Mapping[str, float], labels: Sequence[str], left: int, most: float) -> bool:
    """Whether no votes the `left` voters still to ask could cast (each weighing at most
    `most`, or nothing) would change the winner of a round with votes in hand (`scores`, every
    label's): the label with the highest score, a tie to the lowest label. A vote weighing
    less than 0 for the leader moves it less than one at `most` for a rival (|least| ≤ most),
    so the rivals' best is everyone left voting for one of them at `most`."""
    winner = round_winner(scores, labels)
    if left == 0 or winner is None:
        return True
    top = scores.get(winner, 0.0)
    for label in labels:
        best = scores.get(label, 0.0) + left * most
        if label == winner:
            continue
        if ties(best, top):
            if labels.index(label) < labels.index(winner):
                return False
        elif best > top:
            return False
    return True


def round_winner(scores: Mapping[str, float], labels: Sequence[str]) -> str | None:
    """confer's winner of `scores` (every label scored, unvoted ones at 0): the highest, a tie
    to the lowest label (the order of `labels`)."""
    if not scores:
        return None
    top = max(scores.get(label, 0.0) for label in labels)
    return next(label for label in labels if ties(scores.get(label, 0.0), top))


def most_weight(rule: ConferTally, choices: int) -> float:
    """The most one vote can add to a label: a confidence of 100, as the tally weighs it."""
    return vote_weight(100.0, choices, rule)


def next_votes(
    scores: Mapping[str, float], labels: Sequence[str], voted: bool, left: int, rule: ConferTally, choices: int
) -> Wave:
    """How many of the `left` voters still to ask to ask next in a vote round: none once the
    votes in hand settle its winner, else the fewest whose votes could settle it if each went
    to the leading label at the most a vote weighs (`labels[0]` before any vote)."""
    most = most_weight(rule, choices)
    if voted and vote_settled(scores, labels, left, most):
        winner = round_winner(scores, labels)
        return Wave(0, f"Answer {winner} wins the round whatever the {left} still to vote choose")
    leader = round_winner(scores, labels) if voted else labels[0]
    for size in range(1, left):
        hoped = {**scores, leader: scores.get(leader, 0.0) + size * most} if leader is not None else dict(scores)
        if vote_settled(hoped, labels, left - size, most):
            return Wave(size, f"{left} still to vote could change the round's winner")
    return Wave(left, f"{left} still to vote could change the round's winner")
