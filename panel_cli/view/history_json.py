"""The JSON `panel history` prints: a line of `list --json`, and the run of `show --json`,
which `history export --format json` prints too.

Both begin with the result envelope every protocol's `--json` shares, so a script reads a
stored run as it reads a live one. Built when first used (`--json`): building them on import
would cost every history command.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from panel_cli.store.records import CallRecord, ListedStatus, RunMember, RunRecord, RunSummary, RunThread


class RunRow(BaseModel):
    """A run in `history list --json`. `parent_id`: the run it follows up (`--continue`), null
    for none."""

    model_config = ConfigDict(defer_build=True)

    run_id: str
    protocol: str
    question: str
    reached_answer: bool
    duration_s: float | None
    calls: int
    tokens: int | None
    cost: float | None
    parent_id: str | None
    panel: str
    status: ListedStatus
    outcome: str | None
    started_at: float
    finished_at: float | None

    @classmethod
    def of(cls, run: RunSummary) -> RunRow:
        return cls(
            **_envelope(run),
            panel=run.panel,
            status=run.status,
            outcome=run.outcome,
            started_at=run.started_at,
            finished_at=run.finished_at,
        )


class RunDetail(BaseModel):
    """`history show --json`: the envelope, then what the store kept. `calls` is the count, as
    in the envelope; the calls themselves are `call_records`. `thread`: the runs it follows up,
    oldest first, and its follow-ups (`--continue`)."""

    model_config = ConfigDict(defer_build=True)

    run_id: str
    protocol: str
    question: str
    final_answer: str | None
    reached_answer: bool
    duration_s: float | None
    calls: int
    tokens: int | None
    cost: float | None
    warnings: list[Any]
    parent_id: str | None
    panel: str
    status: ListedStatus
    outcome: str | None = None
    started_at: float
    finished_at: float | None
    members: list[RunMember]
    config: dict[str, Any]
    result: dict[str, Any] | None
    error: str | None
    thread: RunThread
    call_records: list[CallRecord]
    events: list[dict[str, Any]]

    @classmethod
    def of(cls, run: RunRecord, calls: list[CallRecord], events: list[dict[str, Any]]) -> RunDetail:
        return cls(
            **_envelope(run),
            final_answer=run.final_answer,
            warnings=run.warnings,
            panel=run.panel,
            status=run.status,
            outcome=run.outcome,
            started_at=run.started_at,
            finished_at=run.finished_at,
            members=run.members,
            config=run.config,
            result=run.result,
            error=run.error,
            thread=run.thread,
            call_records=calls,
            events=events,
        )


def _envelope(run: RunSummary) -> dict[str, Any]:
    return {
        "run_id": run.id,
        "protocol": run.protocol,
        "question": run.question,
        "reached_answer": run.reached_answer,
        "duration_s": run.duration_s,
        "calls": run.calls,
        "tokens": run.tokens,
        "cost": run.cost,
        "parent_id": run.parent_id,
    }
