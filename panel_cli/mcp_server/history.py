"""The `history` tool: the stored runs, newest first, found as `panel history list` finds them
(a protocol, a status, every word of a search in the question or the final answer)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from panel_cli.mcp_server.resources import run_uri
from panel_cli.protocols.registry import names
from panel_cli.store.records import RUN_STATUSES
from panel_cli.view import fmt

DEFAULT_LIMIT = 10
MAX_LIMIT = 100
SEARCH_LIMIT = 500


def history_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "search": {
                "type": "string",
                "minLength": 1,
                "maxLength": SEARCH_LIMIT,
                "description": "Only runs whose question or final answer holds every word of this.",
            },
            "protocol": {"type": "string", "enum": list(names()), "description": "Only runs of this protocol."},
            "status": {
                "type": "string",
                "enum": [*RUN_STATUSES, "stale", "damaged"],
                "description": "Only runs of this status (stale: still marked running, its process gone).",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LIMIT,
                "description": f"At most this many runs (default {DEFAULT_LIMIT}).",
            },
        },
        "additionalProperties": False,
    }


def recent_runs(db: Path, arguments: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The runs asked for, as `history list --json` gives them (each with its resource's URI),
    and as lines for a person."""
    from panel_cli.store.reader import TranscriptReader
    from panel_cli.view.history_json import run_row

    with TranscriptReader.open(db) as reader:
        runs = reader.list_runs(
            int(arguments.get("limit", DEFAULT_LIMIT)),
            status=arguments.get("status"),
            protocol=arguments.get("protocol"),
            search=arguments.get("search"),
        )
    rows = [{**run_row(run), "uri": run_uri(run.id)} for run in runs]
    lines = [
        f"{run.id}  {run.protocol}  {run.status}  {fmt.one_line(run.question, 80)}"
        + (f"  → {fmt.one_line(run.outcome, 80)}" if run.outcome else "")
        for run in runs
    ]
    return {"runs": rows}, "\n".join(lines) if lines else "No stored run matches."
