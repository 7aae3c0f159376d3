"""A run's totals counted from its events, so the result envelope, the live view and a replay
all count calls, tokens, cost and warnings the same way."""

from __future__ import annotations

from dataclasses import dataclass, field

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
        match event:
            case RunStarted(ts=ts) if ts:
                self.started_at = ts
            case CallFinished():
                self.calls += 1
                if event.tokens_in is not None or event.tokens_out is not None:
                    self.tokens = (self.tokens or 0) + (event.tokens_in or 0) + (event.tokens_out or 0)
                if event.cost is not None:
                    self.cost = (self.cost or 0.0) + event.cost
            case CallFailed(kind="budget"):
                self.refused += 1
            case CallFailed(kind="cancelled"):
                self.calls += 1
                self.cancelled += 1
            case CallFailed():
                self.calls += 1
                self.failed += 1
            case MemberSkipped():
                self.skipped += 1
            case WarningRaised():
                self.warnings.append(f"{event.member}: {event.message}" if event.member else event.message)
            case RunFinished(ts=ts) | RunFailed(ts=ts) | RunInterrupted(ts=ts) if ts:
                self.ended_at = ts

    async def __call__(self, event: BaseEvent) -> None:
        self.update(event)

    @property
    def wall_time(self) -> float | None:
        if self.started_at is None or self.ended_at is None:
            return None
        return self.ended_at - self.started_at
