"""What ensemble reads from a panel file beyond the fields every protocol shares
(docs/protocols.md#ensemble)."""

from __future__ import annotations

from typing import Literal

from panel_cli.config import ProtocolSettings

EnsembleMode = Literal["fanout", "race", "consensus", "majority", "synthesize"]


class EnsembleSettings(ProtocolSettings):
    """What comes back (`mode`); consensus's `scorer` (length, or judge:<member>); and the
    member that writes synthesize's answer (`aggregator`; the chairman when none is named)."""

    mode: EnsembleMode = "fanout"
    scorer: str = "length"
    aggregator: str | None = None
