"""The result envelope: the fields every protocol's result starts with (docs/result.md#the-envelope),
so a script reads any run the same way."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from panel_cli.llm.budget import BudgetReport
from panel_cli.protocols.base import ProtocolResult
from panel_cli.protocols.gates import GateVerdict
from panel_cli.totals import CostBasis, RunTotals


class CallsByStatus(BaseModel):
    """How every call the run started ended (docs/result.md#the-envelope): `calls` is
    answered + reused + late + failed + cancelled; a call the budget `refused` made no request;
    a `late` one answered after its stage had stopped waiting for it (a race already won)."""

    answered: int = 0
    reused: int = 0
    late: int = 0
    failed: int = 0
    cancelled: int = 0
    refused: int = 0


class SpentAnew(BaseModel):
    """What a resumed run paid for itself: its calls, tokens and cost less the reused ones."""

    calls: int
    tokens: int | None
    cost: float | None


class RunEnvelope(BaseModel):
    """What every run reports, in this order. `cost_basis` says how to read `cost`:
    `simulated` (demo personas: 0.0), `known`, `partial` (at least `cost`: the models in
    `unpriced_models` have no price) or `unknown` (null, never 0). `spent_anew`: for a run
    whose calls reused a resumed run's, what it spent itself (null when nothing was reused).
    `excluded_members` names each member that failed for good and was not called again, with
    the reason. `budget_exhausted`: the run's spending cap (`--max-cost`, `--max-calls`)
    refused a call and the protocol ended with what it had; `budget` has the caps and the
    spend (null for a run without a cap). `gate`: the verdict of `--gate` (null without one)."""

    run_id: str
    protocol: str
    question: str
    final_answer: str | None
    reached_answer: bool
    duration_s: float
    calls: int
    tokens: int | None
    cost: float | None
    cost_basis: CostBasis = "unknown"
    unpriced_models: list[str] = Field(default_factory=list)
    calls_by_status: CallsByStatus = Field(default_factory=CallsByStatus)
    spent_anew: SpentAnew | None = None
    warnings: list[str]
    excluded_members: dict[str, str]
    budget_exhausted: bool = False
    budget: BudgetReport | None = None
    parent_id: str | None = None
    gate: GateVerdict | None = None


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


def ledger_fields(totals: RunTotals) -> dict[str, Any]:
    """The envelope's ledger, from the run's totals: what `--json` and the store say of its calls."""
    anew = totals.anew
    return {
        "calls": totals.calls,
        "tokens": totals.tokens,
        "cost": totals.run_cost,
        "cost_basis": totals.cost_basis,
        "unpriced_models": list(totals.unpriced),
        "calls_by_status": CallsByStatus(**totals.by_status()),
        "spent_anew": SpentAnew(calls=anew.calls, tokens=anew.tokens, cost=anew.cost) if totals.reused else None,
    }
