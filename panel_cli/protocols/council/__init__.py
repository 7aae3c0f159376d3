"""council: every member answers, reviews and ranks the answers anonymously, then a chairman
writes the final answer (docs/protocols.md#council)."""

from panel_cli.protocols.options import MEMBERS, chairman, timeout
from panel_cli.protocols.registry import CommandOption, ProtocolSpec

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
    stage_views={"review": "panel_cli.view.tables:review_stage"},
)
