"""A run's totals counted from its events, so the result envelope, the live view and a replay
all count calls, tokens, cost and warnings the same way."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from panel_cli.events import (
        BaseEvent,
        CallFailed,
        CallFinished,
        MemberSkipped,
        RunFailed,
        RunFinished,
        RunInterrupted,
        RunStarted,
        WarningRaised,
    )


DEMO_PREFIX = "demo/"

# What a run's cost is, in `--json` and every view: `simulated` (every call a demo persona's,
# so nothing was spent: cost 0.0), `known` (every call priced), `partial` (some calls of a
# model without a price: the cost is at least the sum of the known ones) and `unknown` (no
# call priced: cost null, never 0).
CostBasis = Literal["simulated", "known", "partial", "unknown"]


def ledger_cost(
    calls: int, real_calls: int, known_cost: float | None, unpriced: Iterable[str]
) -> tuple[float | None, CostBasis]:
    """A run's cost and how to read it, from its calls: how many made (or reused) a request,
    how many of those were a real model's (not a demo persona's), the sum of the known costs,
    and the models whose calls had no price. Pure, so that the envelope and every surface
    reading the store (`history list`, `show`, `stats`, batch) say the same."""
    if calls and not real_calls:
        return 0.0, "simulated"
    if known_cost is None:
        return None, "unknown"
    return known_cost, "partial" if any(True for _ in unpriced) else "known"


@dataclass
class SpentAnew:
    """What a resumed run paid for itself, beside its total (which counts its reused calls at
    what they cost the run it resumes)."""

    calls: int = 0
    tokens: int | None = None
    cost: float | None = None


@dataclass
class RunTotals:
    """A run's ledger, counted from its call events as the store counts its call rows. Every
    call started ends with one status: `answered`, `reused` (the run it resumes got it; it
    keeps that call's tokens and cost), `late` (its reply came after its stage had stopped
    waiting for it, a race already won: paid for, not used), `failed`, `cancelled` or `refused` (by the budget:
    no request went out, so it is not among `calls`). `calls` counts every call that made
    (or reused) a request; `skipped` members made none. `tokens` and `cost` stay None until
    a call reports them: an unknown cost is shown as unknown, not as free; a demo persona's
    call costs 0.0. `unpriced` names the models whose calls had no price; `anew` is what the
    run spent itself, its reused calls left out; `real_calls` those of a real model (not a
    demo persona)."""

    calls: int = 0
    answered: int = 0
    reused: int = 0
    late: int = 0
    failed: int = 0
    cancelled: int = 0
    skipped: int = 0
    refused: int = 0
    tokens: int | None = None
    cost: float | None = None
    unpriced: list[str] = field(default_factory=list)
    real_calls: int = 0
    anew: SpentAnew = field(default_factory=SpentAnew)
    started_at: float | None = None
    ended_at: float | None = None
    warnings: list[str] = field(default_factory=list)

    def update(self, event: object) -> None:
        count = COUNTS.get(getattr(event, "type", ""))
        if count is not None:
            count(self, event)

    def _run_started(self, event: RunStarted) -> None:
        if event.ts:
            self.started_at = event.ts

    def _call_finished(self, event: CallFinished) -> None:
        if event.late:
            self.late += 1
        elif event.reused:
            self.reused += 1
        else:
            self.answered += 1
        self._spent(event.model, event.tokens_in, event.tokens_out, event.cost, reused=event.reused, replied=True)

    def _call_failed(self, event: CallFailed) -> None:
        if event.kind == "budget":
            self.refused += 1
            return
        if event.kind == "cancelled":
            self.cancelled += 1
        else:
            self.failed += 1
        replied = event.tokens_in is not None or event.tokens_out is not None
        self._spent(event.model, event.tokens_in, event.tokens_out, event.cost, reused=False, replied=replied)

    def _spent(
        self,
        model: str,
        tokens_in: int | None,
        tokens_out: int | None,
        cost: float | None,
        *,
        reused: bool,
        replied: bool,
    ) -> None:
        self.calls += 1
        self.real_calls += not model.startswith(DEMO_PREFIX)
        if not reused:
            self.anew.calls += 1
        if model.startswith(DEMO_PREFIX) and cost is None and replied:
            cost = 0.0  # a demo persona's reply, stored before demo calls were costed 0.0
        if tokens_in is not None or tokens_out is not None:
            tokens = (tokens_in or 0) + (tokens_out or 0)
            self.tokens = (self.tokens or 0) + tokens
            if not reused:
                self.anew.tokens = (self.anew.tokens or 0) + tokens
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost
            if not reused:
                self.anew.cost = (self.anew.cost or 0.0) + cost
        elif replied and model not in self.unpriced:
            self.unpriced = sorted([*self.unpriced, model])

    @property
    def simulated(self) -> bool:
        """Whether every call the run made was a demo persona's: it spent nothing real."""
        return self.cost_basis == "simulated"

    @property
    def cost_basis(self) -> CostBasis:
        return ledger_cost(self.calls, self.real_calls, self.cost, self.unpriced)[1]

    @property
    def run_cost(self) -> float | None:
        """The cost as the envelope gives it: 0.0 for a simulated run, else the known sum."""
        return ledger_cost(self.calls, self.real_calls, self.cost, self.unpriced)[0]

    def by_status(self) -> dict[str, int]:
        """How every call started ended, by status."""
        return {
            "answered": self.answered,
            "reused": self.reused,
            "late": self.late,
            "failed": self.failed,
            "cancelled": self.cancelled,
            "refused": self.refused,
        }

    def _member_skipped(self, event: MemberSkipped) -> None:
        self.skipped += 1

    def _warning(self, event: WarningRaised) -> None:
        self.warnings.append(f"{event.member}: {event.message}" if event.member else event.message)

    def _run_ended(self, event: RunFinished | RunFailed | RunInterrupted) -> None:
        if event.ts:
            self.ended_at = event.ts

    async def __call__(self, event: BaseEvent) -> None:
        self.update(event)

    @property
    def wall_time(self) -> float | None:
        if self.started_at is None or self.ended_at is None:
            return None
        return self.ended_at - self.started_at


# What each event type adds to the totals, by its `type`, so that a stored payload read back
# without its model (`panel history show`) counts as the event did. Every type is either here
# or in IGNORED, never in both: tests/test_event_consumers.py checks it.
COUNTS: dict[str, Callable[[RunTotals, Any], None]] = {
    "run_started": RunTotals._run_started,
    "call_finished": RunTotals._call_finished,
    "call_failed": RunTotals._call_failed,
    "member_skipped": RunTotals._member_skipped,
    "warning": RunTotals._warning,
    "run_finished": RunTotals._run_ended,
    "run_failed": RunTotals._run_ended,
    "run_interrupted": RunTotals._run_ended,
}

# What adds nothing to the totals: how a run goes (its stages, calls started, votes, plans,
# tasks, tool calls) rather than what it spent. A tool call costs no tokens of its own: the
# model call that made it counts them.
IGNORED: frozenset[str] = frozenset(
    {
        "stage_started",
        "call_started",
        "call_text_grew",
        "asking_stopped",
        "vote_cast",
        "round_tallied",
        "ranking_parsed",
        "plan_proposed",
        "plan_rejected",
        "plan_accepted",
        "task_started",
        "task_finished",
        "task_failed",
        "task_skipped",
        "delphi_contribution",
        "delphi_round_ended",
        "supervise_verdict",
        "vote_opened",
        "vote_received",
        "quorum_reached",
        "vote_tallied",
        "leader_chose",
        "decision_recorded",
        "tool_server_started",
        "tool_call_started",
        "tool_call_finished",
    }
)
