"""How much one confer vote counts: its confidence as it is (`tally: confidence`, the
default), one whatever its confidence (`tally: votes`), or its confidence read as a
probability and turned into log-odds (`tally: log_odds`).

A voter that is right with probability c, and otherwise picks one of the other K − 1 answers
at random, makes its choice (K − 1)c/(1 − c) times likelier to be right than any one other
answer. Adding the logs of those ratios, and taking the answer with the most, is the
Nitzan–Paroush rule: the best any count of independent votes can do. So a panel whose
confidences are calibrated reaches the optimum under `log_odds`; summing raw confidences
cannot, since 90 against 60 + 60 is not the odds.

Pure, and tested by hand.
"""

from __future__ import annotations

import math
from typing import Literal

ConferTally = Literal["confidence", "votes", "log_odds"]
# A confidence of 0 or 100 would weigh -inf or +inf: one voter sure of itself would outvote
# every other forever. Probabilities are held inside [0.01, 0.99] instead, so one vote
# weighs at most log(99(K − 1)), about 5.9 for four answers.
LOWEST = 0.01
HIGHEST = 0.99


def probability(confidence: float) -> float:
    """A confidence from 0 to 100 as a probability, held inside [LOWEST, HIGHEST]."""
    return min(HIGHEST, max(LOWEST, confidence / 100.0))


def log_odds_weight(confidence: float, answers: int) -> float:
    """log((K − 1)c / (1 − c)) for K `answers` to choose from (the question's options, or the
    distinct answers shown: `engine.choices_of`) and confidence c.

    Positive when c is above chance (1/K), zero at chance, negative below it: a vote cast with
    less confidence than a guess counts against the answer it names, as the odds say. With
    one answer there is nothing to choose between, and every vote weighs 0."""
    if answers < 2:
        return 0.0
    c = probability(confidence)
    return math.log((answers - 1) * c / (1.0 - c))


def vote_weight(confidence: float, answers: int, rule: ConferTally) -> float:
    """What one vote adds to the score of the answer it chose. One member, one vote under
    `votes`: a model that always says 100 outweighs no one, and a vote round under
    `stop: decided` is settled by fewer votes, since no vote still to come can weigh more
    than those in hand."""
    if rule == "log_odds":
        return log_odds_weight(confidence, answers)
    return 1.0 if rule == "votes" else confidence
