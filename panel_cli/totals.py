"""A run's totals counted from its events, so the result envelope, the live view and a replay
all count calls, tokens, cost and warnings the same way."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

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


@dataclass
class RunTotals:
    """Calls made (failed and cancelled ones included; skipped ones and those the budget refused
    not, since no request went out), tokens, cost, wall
    time and warnings of one run. `tokens` and `cost` stay None until a call reports them: an
    unknown cost is shown as unknown, not as free."""

    calls: int = 0
    failed: int = 0
    cancelled: int = 0
    skipped: int = 0
    refused: int = 0
    tokens: int | None = None
    cost: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    warnings: list[str] = field(default_factory=list)

    def update(self, event: BaseEvent) -> None:
        count = COUNTS.get(getattr(event, "type", ""))
        if count is not None:
            count(self, event)

    def _run_started(self, event: RunStarted) -> None:
        if event.ts:
            self.started_at = event.ts

    def _call_finished(self, event: CallFinished) -> None:
        self.calls += 1
        if event.tokens_in is not None or event.tokens_out is not None:
            self.tokens = (self.tokens or 0) + (event.tokens_in or 0) + (event.tokens_out or 0)
        if event.cost is not None:
            self.cost = (self.cost or 0.0) + event.cost

    def _call_failed(self, event: CallFailed) -> None:
        if event.kind == "budget":
            self.refused += 1
            return
        self.calls += 1
        if event.kind == "cancelled":
            self.cancelled += 1
        else:
            self.failed += 1

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
