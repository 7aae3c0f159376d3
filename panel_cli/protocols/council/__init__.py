"""council: every member answers, reviews and ranks the answers anonymously, then a chairman
writes the final answer (docs/protocols.md#council)."""

from panel_cli.protocols.options import MEMBERS, chairman, timeout
from panel_cli.protocols.registry import CommandOption, ProtocolSpec, RequestKind

PROTOCOL = ProtocolSpec(
    name="council",
    summary="Every member answers, reviews and ranks the answers anonymously, then a chairman writes the final answer.",
    options=(
        MEMBERS,
        chairman(),
        CommandOption(
            name="no_anonymize",
            flag="--no-anonymize",
            help="Reviewers see the authors' names instead of Model A, B, …",
            kind="flag",
            field="anonymize",
            flag_value=False,
        ),
        timeout(("answer", "review")),
    ),
    settings="panel_cli.protocols.council.settings:CouncilSettings",
    stage_views={"review": "panel_cli.view.council:review_stage"},
    requests=(
        RequestKind(
            "council.review",
            demo="panel_cli.llm.demo_replies:council_review",
            oracle="panel_cli.simulation.voters:oracle_review",
        ),
        RequestKind(
            "council.review.named",
            demo="panel_cli.llm.demo_replies:council_review_named",
            oracle="panel_cli.simulation.voters:oracle_review_named",
        ),
        RequestKind(
            "council.synthesis",
            demo="panel_cli.llm.demo_replies:synthesis",
            oracle="panel_cli.simulation.voters:oracle_synthesis",
        ),
    ),
    deliberates=True,
    theory="panel_cli.eval.rules:council_rule",
)
