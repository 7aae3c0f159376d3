"""delphi: experts answer on their own, then revise round after round seeing each other's analyses
anonymously; a chairman synthesises consensus and divergence (docs/protocols.md#delphi)."""

from panel_cli.protocols.options import MEMBERS, chairman, max_rounds, no_convergence, timeout
from panel_cli.protocols.registry import ProtocolSpec

PROTOCOL = ProtocolSpec(
    name="delphi",
    summary="Experts answer on their own, then revise round after round seeing each other's analyses anonymously; "
    "a chairman synthesises consensus and divergence.",
    stage_views={"contribution": "panel_cli.view.delphi:contribution_stage"},
    options=(
        MEMBERS,
        chairman("Who writes the synthesis; several, comma-separated, are tried in order."),
        max_rounds("At most this many rounds (default 3)."),
        no_convergence("Run every round even when no expert changes any more."),
        timeout(("answer",), "Time limit per round, like 90s, 3m or none."),
    ),
)
