"""The result envelope: the fields every protocol's result starts with (docs/result.md#the-envelope),
so a script reads any run the same way."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from panel_cli.llm.budget import BudgetReport
from panel_cli.protocols.base import ProtocolResult


class RunEnvelope(BaseModel):
    """What every run reports, in this order. `excluded_members` names each member that failed
    for good and was not called again, with the reason. `budget_exhausted`: the run's spending
    cap (`--max-cost`, `--max-calls`) refused a call and the protocol ended with what it had;
    `budget` has the caps and the spend (null for a run without a cap)."""

    run_id: str
    protocol: str
    question: str
    final_answer: str | None
    reached_answer: bool
    duration_s: float
    calls: int
    tokens: int | None
    cost: float | None
    warnings: list[str]
    excluded_members: dict[str, str]
    budget_exhausted: bool = False
    budget: BudgetReport | None = None
    parent_id: str | None = None


class RunOutcome(BaseModel):
    """A run's envelope and its protocol's own result."""

    envelope: RunEnvelope
    result: ProtocolResult

    def payload(self) -> dict[str, Any]:
        """The envelope, then the protocol's own fields: what `--json` prints and the store keeps."""
        return {
            **self.envelope.model_dump(mode="json"),
            **self.result.model_dump(mode="json", exclude={"final_answer"}),
        }
