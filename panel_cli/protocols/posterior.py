"""How likely a panel's answer is to be right, from its members' votes and what is known of each
member's accuracy (docs/protocols.md#confidence).

The model is the one under every optimal count (Nitzan and Paroush): members vote
independently; member i is right with probability p_i, and otherwise names one of the other
K − 1 answers, none likelier than another. With every answer equally likely beforehand, Bayes
gives each answer a

    posterior ∝ Π over members of (p_i if it chose that answer, else (1 − p_i)/(K − 1))

and dividing through by Π (1 − p_i)/(K − 1), which every answer shares, leaves exp(S_a): S_a
is the summed log-odds weight w_i = log((K − 1)p_i/(1 − p_i)) of the members who chose a. So
the posterior is a softmax of the same sums `weighted_plurality` and confer's `log_odds` rank
by, over all K answers (one nobody chose scores 0), and the answer they pick is the one it
makes likeliest. A member below chance (p < 1/K) weighs less than 0: its choice is evidence
against what it names. An abstention is no evidence, and changes nothing.

Where the accuracies come from is the caller's to say (`confidence_source`): calibrated
weights (`panel eval --calibrate`, `weights: from FILE`), members' weights read as log-odds,
or confidences the members state, read as probabilities (confer's `tally: log_odds`). Where
none is known there is no figure: a count of votes alone says which answer won, not how
likely it is to be right, so the result is None with the reason. A simulated voter's hidden
accuracy is never read here.

K is the question's options when they are declared. For free-text answers it is the number of
distinct answers given (at least 2): an answer nobody gave is not considered, which makes the
figure an upper bound when the truth could be an answer no member thought of.

Pure: no I/O, no model, no run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field

from panel_cli.config import Panel
from panel_cli.protocols.confer.log_odds import HIGHEST, LOWEST, log_odds_weight
from panel_cli.protocols.confer.settings import ConferSettings
from panel_cli.protocols.vote.methods import WEIGHTED_METHODS
from panel_cli.protocols.vote.settings import VoteSettings
from panel_cli.protocols.vote.tally import Ballot

# What a confidence rests on, as a result says it (`Confidence.confidence_basis`).
CALIBRATED = "calibrated weights from {file}, read as log-odds log((K − 1)p/(1 − p))"
WEIGHTS = "the members' weights, read as log-odds log((K − 1)p/(1 − p))"
STATED = "the confidences the members stated, read as probabilities"
DECLARED_OPTIONS = "K = the {k} options declared"
FREE_TEXT = "K = the {k} distinct answers given (free text: an answer no member gave is not considered)"


@dataclass(frozen=True)
class Evidence:
    """One member's vote as evidence: the answer it chose (None: it abstained) and what that
    choice weighs, log((K − 1)p/(1 − p)) for its accuracy p (below 0 under chance)."""

    choice: str | None
    weight: float


class Confidence(BaseModel):
    """How sure the panel may be of `answer`: `confidence` is the probability that it is right,
    given the votes and the members' accuracies, which `confidence_basis` names; or None, and
    `reason` says why. `options` is the K it was computed over, `options_basis` how K was chosen."""

    answer: str | None
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    confidence_basis: str | None = None
    reason: str | None = None
    options: int | None = None
    options_basis: str | None = None


def accuracy_weight(p: float, options: int) -> float:
    """log((K − 1)p/(1 − p)) for accuracy p on K `options`, p held inside [LOWEST, HIGHEST] as
    confer's log-odds hold a confidence (a member sure of itself cannot outvote every other
    forever). Negative below chance (1/K)."""
    if options < 2:
        raise ValueError("a weight needs at least two answers to choose between")
    if math.isnan(p):
        raise ValueError("an accuracy is a probability, not NaN")
    held = min(HIGHEST, max(LOWEST, p))
    return math.log((options - 1) * held / (1.0 - held))


def options_for(declared: int | None, given: Sequence[str | None], shown: int = 0) -> tuple[int, str]:
    """K and how it was chosen: the options declared, else the distinct answers given (or
    `shown`, the distinct answers the members were shown, when more; at least 2). More distinct
    answers than options declared (answers outside them) raise K to their number."""
    distinct = len({choice for choice in given if choice is not None})
    if declared is not None and declared >= 2 and declared >= distinct:
        return declared, DECLARED_OPTIONS.format(k=declared)
    k = max(2, distinct, shown)
    return k, FREE_TEXT.format(k=k)


def posteriors(evidence: Sequence[Evidence], options: int) -> dict[str | None, float]:
    """Every answer chosen, by the probability it is right, and under None the share of the K
    answers nobody chose (each of them equally likely). A softmax of the summed weights, taken
    from the largest so that no weight (up to `MAX_WEIGHT` in size) overflows."""
    sums: dict[str | None, list[float]] = {}
    for item in evidence:
        if item.choice is not None:
            sums.setdefault(item.choice, []).append(item.weight)
    scores = {choice: math.fsum(weights) for choice, weights in sums.items()}
    unchosen = max(options - len(scores), 0)
    top = max([*scores.values(), *([0.0] if unchosen else [])], default=0.0)
    masses = {choice: math.exp(score - top) for choice, score in scores.items()}
    rest = unchosen * math.exp(-top) if unchosen else 0.0
    total = math.fsum([*masses.values(), rest])
    found: dict[str | None, float] = {choice: mass / total for choice, mass in masses.items()}
    found[None] = rest / total
    return found


def answer_confidence(
    evidence: Sequence[Evidence],
    answer: str | None,
    options: int,
    *,
    basis: str,
    options_basis: str | None = None,
) -> Confidence:
    """The probability that `answer` is right, from the members' `evidence` over K `options`
    (raised to the number of distinct answers chosen, should that be more). An answer nobody
    chose gets what an unchosen answer gets. No answer: None, and the reason."""
    if answer is None:
        return Confidence(answer=None, reason="there is no answer to be confident of")
    distinct = len({item.choice for item in evidence if item.choice is not None})
    k = max(options, distinct, 2)
    spread = posteriors(evidence, k)
    unchosen = k - (len(spread) - 1)
    share = spread[answer] if answer in spread else spread[None] / max(unchosen, 1)
    return Confidence(
        answer=answer,
        confidence=min(1.0, max(0.0, share)),
        confidence_basis=basis,
        options=k,
        options_basis=(options_basis or DECLARED_OPTIONS.format(k=k))
        if k == options
        else f"K = the {k} distinct answers chosen, more than the {options} expected",
    )


def unknown(answer: str | None, reason: str) -> Confidence:
    """No figure, and why."""
    return Confidence(answer=answer, reason=reason)


# Where the accuracies come from ------------------------------------------------------------------


class Source(BaseModel):
    """Whether a panel's votes can be read as evidence of known strength: `basis` when they can,
    `reason` when they cannot."""

    basis: str | None = None
    reason: str | None = None


def weights_given(panel: Panel) -> bool:
    """Whether the panel says how much each member counts: a weights file, or a weight set on
    some member (the default 1 for all says nothing of anyone's accuracy)."""
    return panel.weights is not None or any("weight" in member.model_fields_set for member in panel.members)


def confidence_source(panel: Panel, protocol: str, weights_from: str | None = None) -> Source:
    """What a protocol's votes on this panel rest on: vote and decide read the members' weights
    as log-odds when the panel gives them (`weights_from`: the file they came from, then named
    as calibrated); confer under `tally: log_odds` reads the confidences its members state.
    Anything else has no known accuracy, and the reason says what would give one."""
    if protocol in ("vote", "decide"):
        if weights_given(panel):
            return Source(basis=CALIBRATED.format(file=weights_from) if weights_from else WEIGHTS)
        method = VoteSettings.of(panel).method
        if method in WEIGHTED_METHODS:
            return Source(reason="every member has the default weight 1, which says nothing of its accuracy")
        return Source(
            reason=f"{method} counts every member alike and no member's accuracy is known; "
            "panel eval --calibrate measures them, and weights: from FILE gives them to a panel"
        )
    if protocol == "confer":
        if ConferSettings.of(panel).tally == "log_odds":
            return Source(basis=STATED)
        counted = {
            "confidence": "tally: confidence sums the stated confidences as scores, which are no probability",
            "votes": "tally: votes counts one vote per member, which says nothing of any member's accuracy",
        }[ConferSettings.of(panel).tally]
        return Source(
            reason=f"{counted}; under tally: log_odds the stated confidences are read as probabilities, and the "
            "answer's probability is given"
        )
    return Source(reason=f"{protocol} reports no probability that its answer is right")


def vote_evidence(ballots: Sequence[Ballot], options: Sequence[str]) -> list[Evidence]:
    """A vote's counted ballots as evidence, each at its voter's weight (a log-odds): a late
    ballot is none; one that named no option is an abstention."""
    return [
        Evidence(choice=ballot.choice if ballot.choice in options else None, weight=ballot.weight)
        for ballot in ballots
        if not ballot.late
    ]


def vote_confidence(
    ballots: Sequence[Ballot], answer: str | None, options: Sequence[str], source: Source
) -> Confidence:
    """The confidence of a vote's or decision's answer (its winner, or its leader's choice),
    from its ballots at their weights over the vote's options."""
    if source.basis is None:
        return unknown(answer, source.reason or "no member's accuracy is known")
    return answer_confidence(vote_evidence(ballots, options), answer, len(options), basis=source.basis)


def stated_evidence(votes: Sequence[tuple[str, float]], options: int) -> list[Evidence]:
    """(answer, stated confidence from 0 to 100) votes as evidence: each confidence read as a
    probability, held inside [LOWEST, HIGHEST], weighing what confer's `log_odds` tally adds."""
    return [Evidence(choice=choice, weight=log_odds_weight(confidence, options)) for choice, confidence in votes]


def confer_confidence(
    votes: Sequence[tuple[str, float]], answer: str | None, declared: int | None, source: Source, shown: int = 0
) -> Confidence:
    """The confidence of confer's answer from its deciding round's votes: (the answer voted for,
    the confidence stated). Votes for two labels giving the same answer are for one answer: the
    caller names each by its answer, not its label. K as confer's log-odds count it
    (`options_for`): the options declared, else the distinct answers `shown` in the block."""
    if source.basis is None:
        return unknown(answer, source.reason or "no member's accuracy is known")
    k, how = options_for(declared, [choice for choice, _ in votes], shown)
    return answer_confidence(stated_evidence(votes, k), answer, k, basis=source.basis, options_basis=how)
