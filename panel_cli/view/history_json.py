"""The JSON `panel history` prints: a line of `list --json`, and the run of `show --json`,
which `history export --format json` prints too.

Both begin with the result envelope every protocol's `--json` shares, so a script reads a
stored run as it reads a live one. Plain dicts from the reader's records: `damage` says what
of a run could not be read (null: nothing).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from panel_cli.store.records import CallRecord, RunRecord, RunSummary


def run_row(run: RunSummary) -> dict[str, Any]:
    """A run in `history list --json`. `parent_id`: the run it follows up (`--continue`), null
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
        "parent_id": run.parent_id,
    }
