"""Copying the runs of a version 3 file (every text inline, REAL times) into the tables of
version 4, for migration 4, so an old run is stored exactly as panel then stored a new one and
reads back exactly as it did.

Frozen: this module and `upgrade_texts` hold the code of schema version 4 that the copy needs
(the writer's statements, which fields an event leaves to the row claiming it, the text store,
how times are written), copied from the live store when migration 4 stopped using it, and
never edited. They import nothing else of panel's, so no change to the live store can change
what migration 4 does; `tests/store/test_frozen_migrations.py` checks its result row for row.

The old rows are the authority for what they hold; each event is then claimed by the row
holding its fields, which keeps whatever the row does not give back exactly, so even odd old
data (an event without its envelope, a field an old panel did not write) reads back as it was.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from collections.abc import Callable, Mapping
from typing import Any

from panel_cli.store.upgrade_texts import Composer, TextCache, Texts, decode, dumps, encode

ENDED_BY = ("run_finished", "run_failed", "run_interrupted")
OUTCOME_LENGTH = 80
FRACTION_DIGITS = 9


def copy_version_3(db: sqlite3.Connection) -> None:
    """Runs in the order they started; then rows of runs that have no run row, if any."""
    factory = db.row_factory
    db.row_factory = sqlite3.Row
    try:
        writer = Copier(db)
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
                    _iso(row["created_at"]),
                ),
            )
    finally:
        db.row_factory = factory


def _compact(json_text: str | None) -> str | None:
    return None if json_text is None else dumps(json.loads(json_text))


def _iso(ts: float | None) -> str | None:
    return None if ts is None else iso_time(ts)


def _copy_run(db: sqlite3.Connection, writer: Copier, run_id: str) -> None:
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
        # A call's id is TEXT in every version of the schema, so only a string can name one.
        if not isinstance(call_id, str):
            continue
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
        elif kind in ("call_finished", "call_failed") and isinstance(call_id, str) and call_seqs.get(call_id) == seq:
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
    writer: Copier,
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
            _iso(old["started_at"]),
            _iso(old["finished_at"]),
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
    writer: Copier,
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


def _copy_decision(writer: Copier, decision: sqlite3.Row, seq: int | None) -> None:
    values = dict(decision)
    values["vote_counts"] = (
        json.loads(decision["vote_counts_json"]) if decision["vote_counts_json"] is not None else None
    )
    writer.insert_decision(decision["run_id"], seq, values, decision["decided_at"])


class Copier:
    """The statements of the version 4 writer that the copy makes, on one connection inside
    the migration's transaction."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self.texts = Texts(db)

    def put(self, composer: Composer, *, compose: bool = False) -> Callable[[str], int]:
        return lambda text: self.texts.put(text, composer=composer, compose=compose)

    def json(self, value: Any, composer: Composer) -> str | None:
        """A JSON column with its long strings as texts; None for nothing to keep."""
        return dumps(encode(value, self.put(composer))) if value else None

    def insert_event(self, columns: dict[str, Any], kept: dict[str, Any], composer: Composer) -> None:
        self._db.execute(
            "INSERT INTO events (run_id, seq, ts, type, payload_json) VALUES (?, ?, ?, ?, ?)",
            (
                columns["run_id"],
                columns["seq"],
                None if columns["ts"] is None else iso_time(columns["ts"]),
                columns["type"],
                self.json(kept, composer),
            ),
        )

    def insert_call(
        self,
        run_id: str,
        seq: int | None,
        ts: float | None,
        values: dict[str, Any],
        messages: list[dict[str, Any]],
        started: tuple[dict[str, Any], dict[str, Any]] | None,
        composer: Composer,
    ) -> dict[str, Any]:
        """One row for a finished or a failed call, from its event's fields (`values`): each
        leaves the other's fields empty. A skipped member made no call, so `member_skipped`
        is kept as an event only. `started`, the call's `call_started` event (its columns and
        payload), already stored, is claimed too. Returns what the row gives back to the
        events."""
        call_id = values["call_id"]
        self._db.execute(
            "INSERT INTO calls (run_id, id, seq, started_seq, member, model, stage, round, about, request_json,"
            " response_text, truncated, reused, request_hash, tokens_in, tokens_out, cost, latency, error_kind, error,"
            " detail, attempts, ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run_id,
                call_id,
                seq,
                started[0]["seq"] if started else None,
                values["member"],
                values["model"],
                values["stage"],
                values.get("round"),
                values.get("about"),
                dumps(encode(messages, self.put(composer, compose=True))),
                self.texts.put(values["text"], composer=composer) if values.get("text") is not None else None,
                int(values["truncated"]) if values.get("truncated") is not None else None,
                int(values["reused"]) if values.get("reused") is not None else None,
                values.get("request_hash"),
                values.get("tokens_in"),
                values.get("tokens_out"),
                values.get("cost"),
                values.get("latency"),
                values.get("kind"),
                values.get("message"),
                values.get("detail"),
                values.get("attempts"),
                None if ts is None else iso_time(ts),
            ),
        )
        row = self._db.execute("SELECT * FROM calls WHERE run_id = ? AND id = ?", (run_id, call_id)).fetchone()
        given = call_fields(row, TextCache(self._db))
        if started is not None:
            columns, started_payload = started
            self._db.execute(
                "UPDATE events SET payload_json = ? WHERE run_id = ? AND seq = ?",
                (self.json(leftover(started_payload, columns, given), composer), run_id, columns["seq"]),
            )
        return given

    def insert_decision(self, run_id: str, seq: int | None, values: Mapping[str, Any], ts: float | None) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO decisions (run_id, seq, topic, winner, vote_counts_json, method, total_votes,"
            " ballots_cast, leader, leader_override, consensus_reached, decided_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run_id,
                seq,
                values["topic"],
                values["winner"],
                None if values["vote_counts"] is None else dumps(values["vote_counts"]),
                values["method"],
                values["total_votes"],
                values["ballots_cast"],
                values["leader"],
                None if values["leader_override"] is None else int(values["leader_override"]),
                None if values["consensus_reached"] is None else int(values["consensus_reached"]),
                None if ts is None else iso_time(ts),
            ),
        )


# -- which fields an event leaves to the row claiming it ------------------------------

ABSENT = "$absent"  # the fields a row gives that this event did not have

# The fields of each event type in the order the event model declares them, and which of
# them the claiming row gives back.
FIELD_ORDER: dict[str, tuple[str, ...]] = {
    "run_started": ("protocol", "panel", "question", "members", "config"),
    "call_started": ("call_id", "member", "model", "stage", "round", "about"),
    "call_finished": (
        "call_id",
        "member",
        "model",
        "stage",
        "round",
        "about",
        "text",
        "truncated",
        "request_hash",
        "reused",
        "tokens_in",
        "tokens_out",
        "cost",
        "latency",
        "attempts",
    ),
    "call_failed": (
        "call_id",
        "member",
        "model",
        "stage",
        "round",
        "about",
        "kind",
        "message",
        "detail",
        "latency",
        "attempts",
    ),
    "run_finished": ("final_answer", "reached_answer", "result"),
    "run_failed": ("message",),
    "decision_recorded": (
        "topic",
        "winner",
        "vote_counts",
        "method",
        "total_votes",
        "ballots_cast",
        "leader",
        "leader_override",
        "consensus_reached",
    ),
}
DERIVED: dict[str, frozenset[str]] = {
    **{kind: frozenset(fields) for kind, fields in FIELD_ORDER.items()},
    "run_started": frozenset({"protocol", "panel", "question", "config"}),
}
ENVELOPE = ("run_id", "seq", "ts", "type")


def run_fields(row: Mapping[str, Any], texts: TextCache, kind: str) -> dict[str, Any]:
    """The fields a run row gives to its `run_started`, `run_finished` or `run_failed` event."""
    if kind == "run_started":
        config = texts.optional(row["config_text"])
        return {
            "protocol": row["protocol"],
            "panel": row["panel"],
            "question": texts.optional(row["question_text"]),
            "config": json.loads(config) if config is not None else None,
        }
    if kind == "run_finished":
        return {
            "final_answer": texts.optional(row["final_answer_text"]),
            "reached_answer": row["status"] == "finished",
            "result": decode(json.loads(row["result_json"]), texts) if row["result_json"] is not None else None,
        }
    return {"message": row["error"]}


def call_fields(row: Mapping[str, Any], texts: TextCache) -> dict[str, Any]:
    """Every field a call row gives to the events of its call."""
    return {
        "call_id": row["id"],
        "member": row["member"],
        "model": row["model"],
        "stage": row["stage"],
        "round": row["round"],
        "about": row["about"],
        "text": texts.optional(row["response_text"]),
        "truncated": None if row["truncated"] is None else bool(row["truncated"]),
        "request_hash": row["request_hash"],
        "reused": None if row["reused"] is None else bool(row["reused"]),
        "tokens_in": row["tokens_in"],
        "tokens_out": row["tokens_out"],
        "cost": row["cost"],
        "latency": row["latency"],
        "attempts": row["attempts"],
        "kind": row["error_kind"],
        "message": row["error"],
        "detail": row["detail"],
    }


def decision_fields(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "topic": row["topic"],
        "winner": row["winner"],
        "vote_counts": json.loads(row["vote_counts_json"]) if row["vote_counts_json"] is not None else None,
        "method": row["method"],
        "total_votes": row["total_votes"],
        "ballots_cast": row["ballots_cast"],
        "leader": row["leader"],
        "leader_override": None if row["leader_override"] is None else bool(row["leader_override"]),
        "consensus_reached": None if row["consensus_reached"] is None else bool(row["consensus_reached"]),
    }


def same(a: Any, b: Any) -> bool:
    """Equal and of the same JSON types, in the same order: `1` is not `1.0` nor `True`."""
    return dumps(a) == dumps(b)


def leftover(
    payload: Mapping[str, Any], columns: Mapping[str, Any], given: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """What the `payload_json` of an event keeps: the payload less its envelope (the event
    row's own `columns`) and less what the row claiming it gives back (`given`, None for an
    event no row claims). A field the event did not have is listed under `$absent`, so that
    reading it back does not add it."""
    kind = columns["type"]
    derived = DERIVED.get(kind, frozenset()) if given is not None else frozenset()
    kept: dict[str, Any] = {}
    absent = [key for key in ENVELOPE if key not in payload]
    for key, value in payload.items():
        if key in ENVELOPE:
            if not same(value, columns[key]):
                kept[key] = value
        elif key not in derived or given is None or not same(value, given[key]):
            kept[key] = value
    absent += [key for key in FIELD_ORDER.get(kind, ()) if key in derived and key not in payload]
    if absent:
        kept[ABSENT] = absent
    return kept


# -- times and outcomes, as version 4 wrote them -----------------------------------------


def iso_time(ts: float) -> str:
    """`1764514392.1234567` -> `2025-11-30T14:53:12.123456700Z`."""
    text = repr(float(ts))
    if ts < 0 or not math.isfinite(ts) or "e" in text:
        # Never a real run's time; kept to the nanosecond rather than exactly.
        seconds = math.floor(ts)
        fraction = f"{ts - seconds:.{FRACTION_DIGITS}f}"[2:]
    else:
        whole, _, fraction = text.partition(".")
        seconds = int(whole)
        fraction = fraction.ljust(FRACTION_DIGITS, "0")
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{fraction}Z"


def outcome_of(final_answer: str | None, result: Any) -> str | None:
    """The winner when the protocol names one, else the final answer's first line."""
    winner = result.get("winner") if isinstance(result, dict) else None
    if isinstance(winner, str) and winner.strip():
        return _preview(winner)
    if final_answer:
        line = next((line for line in final_answer.splitlines() if line.strip()), "")
        return _preview(line) or None
    return None


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= OUTCOME_LENGTH else flat[: OUTCOME_LENGTH - 1].rstrip() + "…"
