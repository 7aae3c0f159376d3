"""What council reads from a panel file beyond the fields every protocol shares
(docs/protocols.md#council)."""

from __future__ import annotations

from pydantic import Field

from panel_cli.config import MAX_SEED, ProtocolSettings


class CouncilSettings(ProtocolSettings):
    """Whether reviewers see `Model A, B, …` (`anonymize`), whether each reviewer sees the
    answers in an order of its own (`shuffle`, drawn from `seed`), and whether a reviewer ranks
    its own answer too (`self_review`)."""

    anonymize: bool = True
    shuffle: bool = False
    self_review: bool = True
    seed: int | None = Field(default=None, ge=-MAX_SEED - 1, le=MAX_SEED)
