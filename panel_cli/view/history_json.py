"""The JSON `panel history` prints: a line of `list --json`, and the run of `show --json`,
which `history export --format json` prints too.

Both begin with the result envelope every protocol's `--json` shares, so a script reads a
stored run as it reads a live one. Plain dicts from the reader's records: `damage` says what
of a run could not be read (null: nothing).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from panel_cli.store.records import CALL_STATUSES, CallRecord, RunRecord, RunSummary


def run_row(run: RunSummary) -> dict[str, Any]:
    """A run in `history list --json`: the envelope's figures (`calls_by_status` too, from the
    run's call rows; no `spent_anew`). `parent_id`: the run it follows up (`--continue`), null
    for none; `resumed_by`: the run that took it over (`panel resume`), null for none."""
    return {
        **_envelope(run),
        "panel": run.panel,
        "status": run.status,
        "resumed_by": run.resumed_by,
        "outcome": run.outcome,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "damage": run.damage,
    }


def run_detail(run: RunRecord, calls: list[CallRecord], events: list[dict[str, Any]]) -> dict[str, Any]:
    """`history show --json`: the envelope, then what the store kept. `calls` is the count, as
    in the envelope; the calls themselves are `call_records`. `thread`: the runs it follows up,
    oldest first, and its follow-ups (`--continue`). `resumed_from` and `resumed_by`: the run it
    resumes and the run that resumed it (`panel resume`), null for none."""
    envelope = _envelope(run)
    return {
        **{key: envelope[key] for key in ("run_id", "protocol", "question")},
        "final_answer": run.final_answer,
        **{key: envelope[key] for key in ("reached_answer", "duration_s", "calls", "tokens", "cost")},
        **{key: envelope[key] for key in ("cost_basis", "unpriced_models")},
        **calls_ledger(calls),
        "warnings": run.warnings,
        "parent_id": run.parent_id,
        "panel": run.panel,
        "status": run.status,
        "resumed_from": run.resumed_from,
        "resumed_by": run.resumed_by,
        "outcome": run.outcome,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "members": [asdict(member) for member in run.members],
        "config": run.config,
        "result": run.result,
        "error": run.error,
        "thread": asdict(run.thread),
        "call_records": [asdict(call) for call in calls],
        "events": events,
        "damage": run.damage,
    }


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
        "cost_basis": run.cost_basis,
        "unpriced_models": run.unpriced,
        "calls_by_status": run.calls_by_status,
        "parent_id": run.parent_id,
    }


def calls_ledger(calls: list[CallRecord]) -> dict[str, Any]:
    """The envelope's `calls_by_status` and `spent_anew`, from the run's call rows as the live
    run counted them from its events (`panel_cli.totals.RunTotals`)."""
    by_status = {status: sum(call.status == status for call in calls) for status in CALL_STATUSES}
    anew = [call for call in calls if call.status not in ("reused", "refused")]
    if not by_status["reused"]:
        return {"calls_by_status": by_status, "spent_anew": None}
    counts = [count for call in anew for count in (call.tokens_in, call.tokens_out) if count is not None]
    costs = [0.0 if call.model.startswith("demo/") and call.cost is None else call.cost for call in anew]
    known = [cost for cost in costs if cost is not None]
    spent = {"calls": len(anew), "tokens": sum(counts) if counts else None, "cost": sum(known) if known else None}
    return {"calls_by_status": by_status, "spent_anew": spent}
