"""`--gate approved` on supervise: 0 when the critic approved every deliverable, 1 when it still
rejected some after the last correction round, 3 when it gave no verdict on the deliverables as
they stand (no usable verdict, nothing delivered, or the budget ended the review first)."""

from __future__ import annotations

from panel_cli.config import Panel
from panel_cli.exit_status import ExitStatus
from panel_cli.protocols.gates import GateRule, GateVerdict, verdict
from panel_cli.protocols.supervise.engine import SuperviseResult

APPROVED = "approved"
NO_VERDICT = {
    "no_verdict": "the critic gave no usable verdict",
    "no_deliverables": "no worker delivered anything, so the critic gave no verdict",
    "budget": "the budget ran out before the critic's verdict on the deliverables as they stand",
}


def expect_approval(panel: Panel, value: str) -> str:
    if value.strip().lower() != APPROVED:
        raise ValueError(f"'{value}' is not a verdict supervise gates on; give {APPROVED}")
    return APPROVED


def judge_supervision(result: SuperviseResult, outcome: str) -> GateVerdict:
    if result.loop_end == "approved":
        return verdict(outcome, ExitStatus.SUCCESS, f"the critic {result.critic} approved every deliverable")
    if result.loop_end == "round_cap":
        rounds = f"{result.correction_rounds} correction round{'' if result.correction_rounds == 1 else 's'}"
        return verdict(outcome, ExitStatus.FAILURE, f"the critic {result.critic} still rejected after {rounds}")
    return verdict(outcome, ExitStatus.UNDECIDED, NO_VERDICT[result.loop_end])


SUPERVISE_GATE = GateRule(expect=expect_approval, judge=judge_supervision)
