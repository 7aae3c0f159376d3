"""delphi: experts answer on their own, then revise round after round seeing each other's analyses
anonymously; a chairman synthesises consensus and divergence (docs/protocols.md#delphi)."""

from panel_cli.protocols.options import MEMBERS, chairman, max_rounds, no_convergence, timeout
from panel_cli.protocols.registry import ProtocolSpec, RequestKind

PROTOCOL = ProtocolSpec(
    name="delphi",
    summary="Experts answer on their own, then revise round after round seeing each other's analyses anonymously; "
    "a chairman synthesises consensus and divergence.",
    settings="panel_cli.protocols.delphi.settings:DelphiSettings",
    stage_views={"contribution": "panel_cli.view.delphi:contribution_stage"},
    options=(
        MEMBERS,
        chairman("Who writes the synthesis; several, comma-separated, are tried in order."),
        max_rounds("At most this many rounds (default 3)."),
        no_convergence("Run every round even when no expert changes any more."),
        timeout(("answer",), "Time limit per round, like 90s, 3m or none."),
    ),
    requests=(
        RequestKind(
            "delphi.contribution",
            demo="panel_cli.llm.demo_replies:delphi_contribution",
            oracle="panel_cli.simulation.voters:oracle_revision",
        ),
        RequestKind("delphi.synthesis", demo="panel_cli.llm.demo_replies:delphi_synthesis"),
    ),
    plain_lines="panel_cli.view.delphi:PLAIN_LINES",
    deliberates=True,
    no_theory="delphi's answer is a facilitator's summary of revised estimates, not a count of the voters' beliefs",
    unmeasurable="delphi's answer is its facilitator's summary of the last round; a simulated facilitator could "
    "only restate one voter's belief, so the figure would measure the simulation, not delphi",
)
