"""Each graded answer's confidence: the probability that it is right, as its run reports it
(every engine that picks among answers does: a figure, or none and why), or, for a result that
reports none (a protocol registered from Python), computed here from the run's own ballots with
the pure posterior (`panel_cli.protocols.posterior`), on what the panel says of its members' accuracy.

vote and decide read their ballots at the members' weights (given or calibrated, read as
log-odds); confer reads its deciding round's votes at the confidences stated, under
`tally: log_odds`. Votes for two labels whose texts give the same answer are for one answer:
an answer is named by the option its text gives (as grading reads it), else by its first line.
Every other system has no figure, and says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel

from panel_cli.config import Panel, weights_file
from panel_cli.eval.grading import first_line, normalize, read_option
from panel_cli.protocols.base import ProtocolResult
from panel_cli.protocols.confer.settings import ConferSettings
from panel_cli.protocols.posterior import (
    Confidence,
    Source,
    confer_confidence,
    confidence_source,
    unknown,
    vote_confidence,
)

# Who worked an item's confidence out: its run (the engine reports one), or the eval, from the
# run's ballots.
ConfidenceFrom = Literal["run", "eval"]


class ItemConfidence(BaseModel):
    """An answer's confidence, what it rests on (or why there is none), and who worked it out."""

    confidence: float | None
    basis: str | None
    worked_out_by: ConfidenceFrom


def item_confidence(protocol: str, panel: Panel, result: ProtocolResult) -> ItemConfidence:
    """The confidence of a run's answer: the one its result reports (a figure, or none and
    why), else the posterior of its ballots (vote, decide, confer), else none and why."""
    reported = getattr(result, "confidence", None)
    basis = getattr(result, "confidence_basis", None)
    if isinstance(reported, float | int) and not isinstance(reported, bool) and 0 <= reported <= 1:
        return ItemConfidence(
            confidence=float(reported), basis=basis if isinstance(basis, str) else None, worked_out_by="run"
        )
    if reported is None and isinstance(basis, str):
        return ItemConfidence(confidence=None, basis=basis, worked_out_by="run")
    found = computed_confidence(protocol, panel, result)
    return ItemConfidence(
        confidence=found.confidence,
        basis=found.confidence_basis if found.confidence is not None else found.reason,
        worked_out_by="eval",
    )


def computed_confidence(protocol: str, panel: Panel, result: ProtocolResult) -> Confidence:
    source = confidence_source(panel, protocol, weights_file(panel.weights) if panel.weights else None)
    if protocol in ("vote", "decide"):
        ballots = getattr(result, "ballots", None)
        options = getattr(result, "options", None)
        if not isinstance(ballots, list) or not isinstance(options, list):
            return unknown(result.final_answer, "the run kept no ballots")
        return vote_confidence(ballots, result.final_answer, options, source)
    if protocol == "confer":
        return _confer(panel, result, source)
    return unknown(result.final_answer, source.reason or f"{protocol} reports no confidence")


def _confer(panel: Panel, result: ProtocolResult, source: Source) -> Confidence:
    rounds = getattr(result, "rounds", None) or []
    decided = next((found for found in reversed(rounds) if found.winner_label is not None), None)
    if decided is None:
        return unknown(result.final_answer, "no vote round decided the answer")
    options = ConferSettings.of(panel).options
    named = {label: answer_name(text, options) for label, text in decided.block.items()}
    votes = [(named.get(vote.chosen_label, vote.chosen_label), vote.confidence) for vote in decided.votes]
    declared = len(options) if options else None
    return confer_confidence(votes, named[decided.winner_label], declared, source, shown=len(set(named.values())))


def answer_name(text: str, options: Sequence[str]) -> str:
    """What an answer gives: the option it names (as grading reads it), else its first line as
    compared (case, punctuation and articles aside)."""
    if options:
        found = read_option(text, list(options))
        if found is not None:
            return found
    return normalize(first_line(text)) or text
