"""confer's part of the live view: a vote round's table (each member's vote and the rationale it
gave) and, under it, the round's tally.

A panel of 64 members has 64 labels (A…Z, AA…BL), and a round's votes go to a few of them: the
tally shows the labels that got votes, in label order (so a label keeps its place from round to
round), and counts the rest on one line."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import RenderableType
from rich.text import Text

from panel_cli.view import fmt
from panel_cli.view.tables import RunSoFar, StageState, render_tally

if TYPE_CHECKING:
    from panel_cli.view.tables import CallRow


def vote_round(stage: str, round_: int | None, seen: RunSoFar) -> StageState:
    """confer's vote rounds: each member's vote and the rationale it gave, then the tally."""
    return VoteRound(stage, round_, text_header="rationale", votes=True, tool_use=False)


@dataclass
class VoteRound(StageState):
    """A confer vote round. Its rows hold the votes cast, which say which labels got one."""

    def outcome(self) -> list[RenderableType]:
        if self.tally is None:
            return []
        shown, unvoted = voted_labels(self.tally.scores, voted_for(self.rows), self.tally.winner_label)
        return [Text(), render_tally(self.tally, shown, unvoted)]


def voted_for(rows: list[CallRow]) -> set[str]:
    """The labels the round's votes went to."""
    return {row.vote.choice for row in rows if row.vote is not None}


def voted_labels(
    scores: Mapping[str, float], voted: Collection[str], winner: str | None
) -> tuple[list[tuple[str, float]], int]:
    """A round's labels with votes (and its winner, whatever it got), in label order, and how
    many labels got none."""
    shown = [
        (label, score)
        for label, score in fmt.tally_order(scores, best_first=False)
        if label in voted or label == winner
    ]
    return shown, len(scores) - len(shown)
