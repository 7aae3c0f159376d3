"""Run totals counted from the events themselves, so a replay sums up exactly like the live run."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from panel_cli.events import BaseEvent, CallFailed, CallFinished, RunFailed, RunFinished, RunInterrupted, RunStarted
from panel_cli.view import fmt


@dataclass
class RunTotals:
    """Calls, tokens, cost and wall time of one run. `tokens` and `cost` stay None until a call
    reports them: an unknown cost is shown as unknown, not as free."""

    calls: int = 0
    failed: int = 0
    cancelled: int = 0
    tokens: int | None = None
    cost: float | None = None
    started_at: float | None = None
    ended_at: float | None = None

    @classmethod
    def from_events(cls, events: Iterable[BaseEvent]) -> RunTotals:
        totals = cls()
        for event in events:
            totals.update(event)
        return totals

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
            case CallFailed(kind="cancelled"):
                self.calls += 1
                self.cancelled += 1
            case CallFailed():
                self.calls += 1
                self.failed += 1
            case RunFinished(ts=ts) | RunFailed(ts=ts) | RunInterrupted(ts=ts) if ts:
                self.ended_at = ts

    @property
    def wall_time(self) -> float | None:
        if self.started_at is None or self.ended_at is None:
            return None
        return self.ended_at - self.started_at


def _council_fields(result: dict[str, Any]) -> list[tuple[str, str]]:
    fields: list[tuple[str, str]] = []
    synthesis = result.get("stage3_synthesis")
    if isinstance(synthesis, dict) and synthesis.get("chairman"):
        fields.append(("chairman", str(synthesis["chairman"])))
    if result.get("top_ranked"):
        fields.append(("top ranked", str(result["top_ranked"])))
    bias = result.get("bias")
    if isinstance(bias, dict):
        for key, name in (("own_first_share", "own first"), ("shown_first_share", "shown first")):
            if bias.get(key) is not None:
                fields.append((name, fmt.percent(float(bias[key]))))
    return fields


def _ensemble_fields(result: dict[str, Any]) -> list[tuple[str, str]]:
    if "mode" not in result:
        return []
    fields = [("mode", str(result["mode"]))]
    if result.get("chosen"):
        fields.append(("chosen", str(result["chosen"])))
    if result.get("reason"):
        fields.append(("why", str(result["reason"])))
    return fields


def summary_fields(event: RunFinished, totals: RunTotals | None) -> list[tuple[str, str]]:
    """The summary of a finished run as (name, value) pairs, for the live and the plain view.

    The protocol's own facts come from `event.result`, and only those it has: confer has a
    winner and a confidence, council has neither, and a missing one is simply left out."""
    result = event.result
    fields: list[tuple[str, str]] = []
    if result.get("winner") is not None:
        fields.append(("winner", str(result["winner"])))
    if result.get("confidence_score") is not None:
        fields.append(("confidence", fmt.percent(float(result["confidence_score"]))))
    if result.get("converged") is not None:
        fields.append(("converged", "yes" if result["converged"] else "no"))
    if isinstance(result.get("rounds"), list):
        fields.append(("rounds", str(len(result["rounds"]))))
    fields += _council_fields(result) + _ensemble_fields(result)
    if totals is not None:
        notes = [f"{count} {what}" for count, what in ((totals.failed, "failed"), (totals.cancelled, "cancelled")) if count]
        calls = str(totals.calls) + (f" ({', '.join(notes)})" if notes else "")
        fields += [("calls", calls), ("tokens", fmt.tokens(totals.tokens)), ("cost", fmt.cost(totals.cost))]
        if totals.wall_time is not None:
            fields.append(("time", f"{totals.wall_time:.1f}s"))
    fields.append(("run", event.run_id or fmt.UNKNOWN))
    return fields
