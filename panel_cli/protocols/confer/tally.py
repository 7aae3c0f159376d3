"""confer's arithmetic (docs/protocols.md#confer): the anonymous block and its labels, a vote
read and normalised, the tally of a round, convergence. Pure, so the rules are tested by hand
and eval's theory counts simulated votes with the very same tally, without loading the engine.
"""

from __future__ import annotations

import math

from pydantic import BaseModel

from panel_cli.protocols.base import labels_for
from panel_cli.protocols.confer.log_odds import ConferTally, vote_weight
from panel_cli.protocols.vote.tally import ties
from panel_cli.tasks import render_labelled

FALLBACK_CONFIDENCE = 50.0


class Vote(BaseModel):
    voter: str
    chosen_label: str
    confidence: float
    revised_answer: str
    rationale: str = ""
    fallback: bool = False


def assign_labels(order: list[str], answers: dict[str, str]) -> dict[str, str]:
    """Label -> author, in member order, over the members that have an answer."""
    authors = [name for name in order if name in answers]
    return dict(zip(labels_for(len(authors)), authors, strict=True))


def render_block(block: dict[str, str]) -> str:
    """The anonymous block: labels and answers only, never an author."""
    return render_labelled(block, "Answer")


def _shown(label: str, limit: int = 40) -> str:
    """A label as a model wrote it, quoted on one short line for a warning."""
    flat = " ".join(label.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")


def clamp_confidence(value: float) -> float:
    return max(0.0, min(100.0, float(value)))


def normalize_vote(
    voter: str, parsed: dict | None, problem: str | None, labels: dict[str, str], own_answer: str | None
) -> tuple[Vote | None, str | None]:
    """A valid vote, or the fallback (own answer at confidence 50) with the warning to record.
    A voter with no answer of its own has nothing to fall back on and casts no vote."""
    own_label = next((label for label, author in labels.items() if author == voter), None)
    if parsed is not None and parsed["chosen_label"].strip().upper() in labels:
        return (
            Vote(
                voter=voter,
                chosen_label=parsed["chosen_label"].strip().upper(),
                confidence=clamp_confidence(parsed["confidence"]),
                revised_answer=parsed["revised_answer"].strip() or (own_answer or ""),
                rationale=parsed.get("rationale", ""),
            ),
            None,
        )
    reason = (problem or "no vote") if parsed is None else f"label {_shown(parsed['chosen_label'])} does not exist"
    if own_label is None or own_answer is None:
        return None, f"gave no usable vote ({reason}) and has no answer of its own; no vote this round"
    return (
        Vote(
            voter=voter,
            chosen_label=own_label,
            confidence=FALLBACK_CONFIDENCE,
            revised_answer=own_answer,
            fallback=True,
        ),
        f"gave no usable vote ({reason}); it keeps its own answer at confidence 50",
    )


def tally(
    votes: list[Vote], labels: list[str], rule: ConferTally = "confidence", choices: int | None = None
) -> tuple[dict[str, float], str | None]:
    """Each label's score: the summed confidence of its votes, under `votes` their number, or
    under `log_odds` their summed log-odds over K = `choices` (`choices_of`; by default each label counts as its own answer).
    The highest wins; a tie (scores equal but for rounding: 2 log 6 ties log 36) goes to the
    lowest label. Sums are exact (fsum), so the votes' order never matters."""
    weights: dict[str, list[float]] = {label: [] for label in labels}
    count = len(labels) if choices is None else choices
    for vote in votes:
        weights.setdefault(vote.chosen_label, []).append(vote_weight(vote.confidence, count, rule))
    scores = {label: math.fsum(found) for label, found in weights.items()}
    if not votes:
        return scores, None
    top = max(scores.values())
    leaders = [label for label in scores if ties(scores[label], top)]
    return scores, min(leaders, key=lambda label: (len(label), label))


def choices_of(options: list[str], block: dict[str, str]) -> int:
    """K for log-odds: the question's number of options when the panel declares them
    (`options:`, as an eval does from its dataset), else the number of distinct answers shown
    (whitespace and case aside). Not the number of labels: five members giving two answers
    choose between two, and the weights must not depend on how many members there are."""
    if options:
        return len(options)
    return len({" ".join(text.split()).casefold() for text in block.values()})


def confidence_score(votes: list[Vote], winner_label: str | None) -> float:
    if winner_label is None or not votes:
        return 0.0
    won = sum(vote.confidence for vote in votes if vote.chosen_label == winner_label)
    return won / (100.0 * len(votes))


def has_signal(votes: list[Vote]) -> bool:
    """Whether any vote was a real choice; a round of fallbacks only restates the tie rule."""
    return any(not vote.fallback for vote in votes)


def has_converged(winners: list[str | None]) -> bool:
    """The same member won the last two vote rounds. A round without signal counts as None,
    so it breaks a run of wins instead of extending it."""
    return len(winners) >= 2 and winners[-1] is not None and winners[-1] == winners[-2]
