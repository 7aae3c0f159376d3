"""supervise: workers deliver their own tasks; a critic approves or sends them back with feedback;
a chairman consolidates (docs/protocols.md#supervise)."""

from panel_cli.protocols.options import max_rounds, timeout
from panel_cli.protocols.registry import CommandOption, PanelSource, ProtocolSpec, RequestKind

PROTOCOL = ProtocolSpec(
    name="supervise",
    summary="Workers deliver their own tasks; a critic approves or sends them back with feedback; "
    "a chairman consolidates.",
    description="Needs a panel file: each worker's task and the critic are declared there (no --members).",
    settings="panel_cli.protocols.supervise.settings:SuperviseSettings",
    stage_views={"critique": "panel_cli.view.supervise:critique_stage"},
    source=PanelSource.FILE,
    options=(
        max_rounds("At most this many correction rounds (default 2)."),
        timeout(("task", "review"), "Time limit for each delivery, correction and review, like 90s, 3m or none."),
        CommandOption(
            name="gate",
            flag="--gate",
            help="For CI, --gate approved: exit 0 when the critic approves, 1 when it still rejects after the last "
            "round, 3 when it gives no verdict.",
            metavar="VERDICT",
            verdict="panel_cli.protocols.supervise.gate:SUPERVISE_GATE",
            completion="verdicts",
        ),
    ),
    requests=(
        RequestKind("supervise.work", demo="panel_cli.llm.demo_replies:supervise_work"),
        RequestKind("supervise.correction", demo="panel_cli.llm.demo_replies:supervise_correction"),
        RequestKind("critic", demo="panel_cli.llm.demo_replies:critic"),
        RequestKind("supervise.synthesis", demo="panel_cli.llm.demo_replies:supervise_synthesis"),
    ),
    plain_lines="panel_cli.view.supervise:PLAIN_LINES",
    no_theory="supervise's answer is a worker's draft revised under a critic, not a count of the voters' beliefs",
    unmeasurable="supervise's answer is a worker's deliverable revised under a critic; simulated voters play "
    "no worker or critic",
)
