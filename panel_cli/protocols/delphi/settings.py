"""What delphi reads from a panel file beyond the fields every protocol shares
(docs/protocols.md#delphi)."""

from __future__ import annotations

from panel_cli.config import ProtocolSettings, Rounds


class DelphiSettings(ProtocolSettings):
    """`max_rounds` of revision, stopping once no expert changes unless `until_convergence` is off."""

    max_rounds: Rounds = 3
    until_convergence: bool = True
