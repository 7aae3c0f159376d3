"""What confer reads from a panel file beyond the fields every protocol shares
(docs/protocols.md#confer)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from panel_cli.config import ProtocolSettings, Rounds, RuleName
from panel_cli.protocols.confer.log_odds import ConferTally

# The answer stage: every member at once, or one after another, each shown the answers before it.
AnswerOrder = Literal["parallel", "sequential"]


class ConferSettings(ProtocolSettings):
    """`max_rounds` of voting, stopping once the winner is stable unless `until_convergence` is
    off; how a vote counts (`tally`); how members answer (`answer_order`); and the question's
    `options`, whose number is the K of log-odds."""

    max_rounds: Rounds = 3
    until_convergence: bool = True
    tally: Annotated[ConferTally, RuleName] = "confidence"
    answer_order: Annotated[AnswerOrder, RuleName] = "parallel"
    options: list[str] = Field(default_factory=list)
