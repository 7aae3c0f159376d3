"""`panel_cli.history`: the runs kept in the transcript store, as `panel history` reads them
(docs/python.md). Reading never writes: a database that is not there reads as an empty one."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from panel_cli.api.paths import given_path
from panel_cli.api.result import RunResult
from panel_cli.events import BaseEvent, parse_event
from panel_cli.store.reader import TranscriptReader
from panel_cli.store.records import ListedStatus, RunRecord, RunSummary

Database = str | os.PathLike[str] | None


def list_runs(
    limit: int = 20,
    *,
    protocol: str | None = None,
    status: ListedStatus | None = None,
    search: str | None = None,
    since: datetime | float | None = None,
    db: Database = None,
) -> list[RunSummary]:
    """The runs `panel history list` shows, newest first: at most `limit` (-1 for all), of
    `protocol`, of `status`, whose question or answer holds every word of `search`, started
    since `since` (a datetime, or epoch seconds)."""
    after = since.timestamp() if isinstance(since, datetime) else since
    with TranscriptReader.open(_path(db)) as reader:
        return reader.list_runs(limit, status=status, protocol=protocol, search=search, since=after)


def get_run(run_id: str, *, db: Database = None) -> RunRecord:
    """One run, as `panel history show` reads it: `run_id` is an id, any unique beginning of
    one, or `last`. UserError, in the command line's words, for an id no run has."""
    with TranscriptReader.open(_path(db)) as reader:
        return reader.get_run(run_id)


def get_result(run_id: str, *, db: Database = None) -> RunResult | None:
    """A stored run's result, as `panel_cli.run` returned it and `--json` printed it; None for a
    run that ended without one (interrupted, failed, or still running)."""
    record = get_run(run_id, db=db)
    return RunResult.from_payload(record.result) if record.result is not None else None


def run_events(run_id: str, *, db: Database = None) -> list[BaseEvent]:
    """Every event of a run, in order, as the run emitted them (a replay feeds these to a view)."""
    with TranscriptReader.open(_path(db)) as reader:
        return [parse_event(payload) for payload in reader.run_events(reader.get_run(run_id).id)]


def _path(db: Database) -> Path | None:
    return given_path(db, "db") if db is not None else None
