"""What supervise reads from a panel file beyond the fields every protocol shares
(docs/protocols.md#supervise)."""

from __future__ import annotations

from panel_cli.config import ProtocolSettings, Rounds

# Correction rounds when the panel does not set `max_rounds` (docs/protocols.md#supervise).
DEFAULT_CORRECTION_ROUNDS = 2


class SuperviseSettings(ProtocolSettings):
    """At most `max_rounds` rounds of correction after the first delivery."""

    max_rounds: Rounds = DEFAULT_CORRECTION_ROUNDS
