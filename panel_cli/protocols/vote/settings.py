"""What vote and decide read from a panel file beyond the fields every protocol shares
(docs/protocols.md#vote-and-decide)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from panel_cli.config import Panel, ProtocolSettings, RuleName
from panel_cli.protocols.vote.methods import Method, TieBreak
from panel_cli.thresholds import DEFAULT_THRESHOLD, threshold_problem

# A ballot that names no option: no vote, or a vote for the first option.
NoMatch = Literal["abstain", "first"]


class VoteSettings(ProtocolSettings):
    """The `options` voted on, counted by `method` (supermajority: over `threshold`; plurality
    methods: ties settled by `tie_break`), with at least `quorum` ballots; what a ballot naming
    no option counts as (`no_match`), and how many members are asked at once (`max_voters`)."""

    options: list[str] = Field(default_factory=list)
    method: Annotated[Method, RuleName] = "majority"
    # None: a decision with a leader leaves a tie to it, any other vote leaves it undecided.
    tie_break: Annotated[TieBreak | None, RuleName] = None
    # supermajority: the share of the votes an option must exceed (`panel_cli.thresholds`).
    threshold: float = DEFAULT_THRESHOLD
    quorum: int = Field(default=1, ge=1)
    no_match: NoMatch = "abstain"
    max_voters: int = Field(default=10, ge=1, le=10_000)

    @field_validator("threshold")
    @classmethod
    def _a_share(cls, value: float) -> float:
        problem = threshold_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


class DecideSettings(VoteSettings):
    """A vote's settings, and the `leader` who chooses when no option wins."""

    leader: str | None = None


def settings_of(panel: Panel, protocol: str) -> VoteSettings:
    """A decision's settings (with its leader) for decide, else a vote's."""
    return DecideSettings.of(panel) if protocol == "decide" else VoteSettings.of(panel)


def leader_of(settings: VoteSettings) -> str | None:
    """The leader a decision names; None for a vote, which has none."""
    return settings.leader if isinstance(settings, DecideSettings) else None
