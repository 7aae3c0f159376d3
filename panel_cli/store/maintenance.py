"""Changing what the store holds outside a run: keeping a recount, deleting runs, purging old
ones. Each is one write transaction on a connection of its own, so every `history` command
but these stays read-only."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from panel_cli.errors import UserError
from panel_cli.store.connection import connect, database_error
from panel_cli.store.paths import resolve_db_path
from panel_cli.store.processes import this_host
from panel_cli.store.records import ListedStatus, RetallyRecord, RunStatus, listed_status
from panel_cli.store.texts import collect_garbage, dumps
from panel_cli.store.times import iso_time

Changed = TypeVar("Changed")


def record_retally(path: Path, record: RetallyRecord) -> None:
    """Keep a recount beside the run it recounted; the run itself is never touched."""
    db = connect(path)
    try:
        db.execute(
            "INSERT INTO retallies (id, run_id, method, threshold, quorum, winner, leader_override, result_json, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                record.id,
                record.run_id,
                record.method,
                record.threshold,
                record.quorum,
                record.winner,
                int(record.leader_override),
                dumps(record.result),
                iso_time(record.created_at),
            ),
        )
    except sqlite3.DatabaseError as error:
        raise database_error(path, error, writing=True) from error
    finally:
        db.close()


def refuse_running(run_id: str, status: ListedStatus, pid: int | None, host: str | None) -> None:
    """A run whose process on this host is still writing it cannot be deleted: asked before
    `history delete` asks for confirmation, and again inside the transaction."""
    if status == "running" and host == this_host():
        raise UserError(f"Run {run_id} is still running (process {pid}); stop it, or wait for it to end.")


def delete_run(path: Path | None, run_id: str) -> None:
    """Delete one run (its events, calls, decision and recounts) and every text no other run
    needs. A run whose process is still writing it is refused."""
    path = resolve_db_path(path)
    _maintain(path, lambda db: _delete_one(db, run_id))


def purge_runs(path: Path | None, *, older_than: float, status: RunStatus | None = None) -> list[str]:
    """Delete the runs started before `older_than` (epoch seconds), only those with `status`
    if given, except any still being written; returns their ids, oldest first."""
    path = resolve_db_path(path)

    def purge(db: sqlite3.Connection) -> list[str]:
        where, params = "started_at < ?", [iso_time(older_than)]
        if status is not None:
            where, params = f"{where} AND status = ?", [*params, status]
        rows = db.execute(f"SELECT * FROM runs WHERE {where} ORDER BY started_at, id", params).fetchall()
        ids = [row["id"] for row in rows if listed_status(row) != "running"]
        _delete_rows(db, ids)
        return ids

    return _maintain(path, purge)


def _maintain(path: Path, change: Callable[[sqlite3.Connection], Changed]) -> Changed:
    """One write transaction that changes runs, then drops the texts left unreferenced."""
    db = connect(path)
    try:
        db.execute("BEGIN IMMEDIATE")
        try:
            outcome = change(db)
            collect_garbage(db)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        return outcome
    except sqlite3.DatabaseError as error:
        raise database_error(path, error, writing=True) from error
    finally:
        db.close()


def _delete_one(db: sqlite3.Connection, run_id: str) -> None:
    row = db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        raise UserError(f"No run has the id '{run_id}'; `panel history list` shows the stored runs.")
    refuse_running(run_id, listed_status(row), row["pid"], row["host"])
    _delete_rows(db, [run_id])


def _delete_rows(db: sqlite3.Connection, run_ids: list[str]) -> None:
    ids = json.dumps(run_ids)
    for table in ("events", "calls", "decisions", "retallies", "tool_calls"):
        db.execute(f"DELETE FROM {table} WHERE run_id IN (SELECT value FROM json_each(?))", (ids,))
    db.execute("DELETE FROM runs WHERE id IN (SELECT value FROM json_each(?))", (ids,))
