"""Copying the runs of a version 3 file (every text inline, REAL times) into the tables of
version 4, with the writer's own code, so an old run is stored exactly as a new one would be
and reads back exactly as it did.

The old rows are the authority for what they hold; each event is then claimed by the row
holding its fields (see `panel_cli.store.rows`), which keeps whatever the row does not give
back exactly, so even odd old data (an event without its envelope, a field an old panel did
not write) reads back as it was.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from panel_cli.store.rows import decision_fields, leftover, run_fields
from panel_cli.store.texts import Composer, TextCache, dumps, encode
from panel_cli.store.times import iso_time
from panel_cli.store.writer import RunWriter, outcome_of

ENDED_BY = ("run_finished", "run_failed", "run_interrupted")


def copy_version_3(db: sqlite3.Connection) -> None:
    """Runs in the order they started; then rows of runs that have no run row, if any."""
    factory = db.row_factory
    db.row_factory = sqlite3.Row
    try:
        writer = RunWriter(db, pid=None, host=None)
        run_ids = [row[0] for row in db.execute("SELECT id FROM runs_v3 ORDER BY started_at, rowid")]
        known = set(run_ids)
        for table in ("events_v3", "calls_v3", "decisions_v3"):
            for (run_id,) in db.execute(f"SELECT DISTINCT run_id FROM {table}").fetchall():
                if run_id not in known:
                    known.add(run_id)
                    run_ids.append(run_id)
        for run_id in run_ids:
            _copy_run(db, writer, run_id)
        for row in db.execute("SELECT * FROM retallies_v3 ORDER BY rowid").fetchall():
            db.execute(
                "INSERT INTO retallies (id, run_id, method, threshold, quorum, winner, leader_override, result_json,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    row["id"],
                    row["run_id"],
                    row["method"],
                    row["threshold"],
                    row["quorum"],
                    row["winner"],
                    row["leader_override"],
                    _compact(row["result_json"]),
                    _time(row["created_at"]),
                ),
            )
    finally:
        db.row_factory = factory


def _compact(json_text: str | None) -> str | None:
    return None if json_text is None else dumps(json.loads(json_text))


def _time(ts: float | None) -> str | None:
    return None if ts is None else iso_time(ts)


def _copy_run(db: sqlite3.Connection, writer: RunWriter, run_id: str) -> None:
    composer = Composer(writer.texts)
    old = db.execute("SELECT * FROM runs_v3 WHERE id = ?", (run_id,)).fetchone()
    events = [
        (row, json.loads(row["payload_json"]) if row["payload_json"] else {})
        for row in db.execute("SELECT * FROM events_v3 WHERE run_id = ? ORDER BY seq", (run_id,))
    ]
    calls = {
        row["id"]: row for row in db.execute("SELECT * FROM calls_v3 WHERE run_id = ? ORDER BY ts, rowid", (run_id,))
    }
    decision = db.execute("SELECT * FROM decisions_v3 WHERE run_id = ?", (run_id,)).fetchone()

    started_seq = next((row["seq"] for row, _ in events if row["type"] == "run_started"), None)
    endings = [row for row, _ in events if row["type"] in ENDED_BY]
    ended_seq = endings[-1]["seq"] if endings and endings[-1]["type"] != "run_interrupted" else None
    decided = [row["seq"] for row, _ in events if row["type"] == "decision_recorded"]
    decision_seq = decided[-1] if decided and decision is not None else None
    call_seqs: dict[str, int] = {}
    for row, payload in events:
        call_id = payload.get("call_id")
        if row["type"] in ("call_finished", "call_failed") and call_id in calls and call_id not in call_seqs:
            call_seqs[call_id] = row["seq"]

    if old is not None:
        _copy_run_row(db, writer, composer, old, started_seq, ended_seq)
        composer.commit()
    texts = TextCache(db)
    started: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    for row, payload in events:
        kind, seq = row["type"], row["seq"]
        columns = {"run_id": run_id, "seq": seq, "ts": row["ts"], "type": kind}
        given: dict[str, Any] | None = None
        call_id = payload.get("call_id")
        if kind == "call_started" and isinstance(call_id, str):
            started.setdefault(call_id, (columns, payload))
        elif kind in ("call_finished", "call_failed") and call_seqs.get(call_id) == seq:
            given = _copy_call(writer, composer, calls.pop(call_id), payload, started.pop(call_id, None), seq)
        elif (
            old is not None
            and seq in (started_seq, ended_seq)
            and kind in ("run_started", "run_finished", "run_failed")
        ):
            given = run_fields(db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone(), texts, kind)
        elif kind == "decision_recorded" and seq == decision_seq:
            _copy_decision(writer, decision, seq)
            decision = None
            given = decision_fields(db.execute("SELECT * FROM decisions WHERE run_id = ?", (run_id,)).fetchone())
        writer.insert_event(columns, leftover(payload, columns, given), composer)
        composer.commit()
    for call in calls.values():
        _copy_call(writer, composer, call, {}, None, None)
        composer.commit()
    if decision is not None:
        _copy_decision(writer, decision, None)


def _copy_run_row(
    db: sqlite3.Connection,
    writer: RunWriter,
    composer: Composer,
    old: sqlite3.Row,
    started_seq: int | None,
    ended_seq: int | None,
) -> None:
    def searchable(text: str | None) -> int | None:
        return None if text is None else writer.texts.put(text, composer=composer, searchable=True)

    result = json.loads(old["result_json"]) if old["result_json"] else None
    db.execute(
        "INSERT INTO runs (id, protocol, panel, question_text, config_text, status, started_at, finished_at,"
        " final_answer_text, result_json, error, outcome, calls, tokens, cost, started_seq, ended_seq)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            old["id"],
            old["protocol"],
            old["panel"],
            searchable(old["question"]),
            None
            if old["config_json"] is None
            else writer.texts.put(dumps(json.loads(old["config_json"])), composer=composer),
            old["status"],
            _time(old["started_at"]),
            _time(old["finished_at"]),
            searchable(old["final_answer"]),
            None if old["result_json"] is None else dumps(encode(result, writer.put(composer))),
            old["error"],
            outcome_of(old["final_answer"], result),
            old["calls"] or 0,
            old["tokens"],
            old["cost"],
            started_seq,
            ended_seq,
        ),
    )


def _copy_call(
    writer: RunWriter,
    composer: Composer,
    call: sqlite3.Row,
    event: dict[str, Any],
    started: tuple[dict[str, Any], dict[str, Any]] | None,
    seq: int | None,
) -> dict[str, Any]:
    """The old row's fields, and from its event those the old row had no column for."""
    values = {
        "call_id": call["id"],
        "member": call["member"],
        "model": call["model"],
        "stage": call["stage"],
        "round": call["round"],
        "about": event.get("about"),
        "text": call["response"],
        "truncated": call["truncated"],
        "reused": event.get("reused"),
        "request_hash": event.get("request_hash"),
        "tokens_in": call["tokens_in"],
        "tokens_out": call["tokens_out"],
        "cost": call["cost"],
        "latency": call["latency"],
        "kind": call["error_kind"],
        "message": call["error"],
        "detail": call["detail"],
        "attempts": call["attempts"],
    }
    messages = json.loads(call["request_json"]) if call["request_json"] else []
    return writer.insert_call(call["run_id"], seq, call["ts"], values, messages, started, composer)


def _copy_decision(writer: RunWriter, decision: sqlite3.Row, seq: int | None) -> None:
    values = dict(decision)
    values["vote_counts"] = (
        json.loads(decision["vote_counts_json"]) if decision["vote_counts_json"] is not None else None
    )
    writer.insert_decision(decision["run_id"], seq, values, decision["decided_at"])
