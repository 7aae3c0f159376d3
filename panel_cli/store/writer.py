"""Writing runs' events into the transcript tables, any number of events in one transaction.

Synchronous on purpose: `TranscriptStore` (`panel_cli.store.subscriber`) decides how and when
it reaches the file. Migrations never use it: a shipped migration must not change when it does.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from panel_cli.store.records import outcome_of
from panel_cli.store.rows import (
    ENVELOPE,
    batch_of,
    call_fields,
    decision_fields,
    envelope,
    leftover,
    parent_of,
    restore,
    resumed_source,
    run_fields,
)
from panel_cli.store.texts import Composer, TextCache, Texts, decode, dumps, encode
from panel_cli.store.times import iso_time

ENDINGS = ("run_finished", "run_failed", "run_interrupted")


class RunWriter:
    """Writes events of any number of runs to one connection (autocommit mode, as `connect`
    opens it); `pid` and `host` are the process's, kept with each run it starts."""

    def __init__(self, db: sqlite3.Connection, *, pid: int | None, host: str | None) -> None:
        self._db = db
        self.texts = Texts(db)
        self._pid = pid
        self._host = host
        # The runs begun and not ended, each with what it has stored so far.
        self._composers: dict[str, Composer] = {}
        # call_started events whose call has not ended yet: (run, call) -> (columns, payload)
        self._started: dict[tuple[str, str], tuple[dict[str, Any], dict[str, Any]]] = {}

    def write(self, payload: dict[str, Any], messages: list[dict[str, Any]] | None = None) -> None:
        """Store one event (already redacted) and what it changes, in a transaction of its own."""
        self.write_all([payload if messages is None else {**payload, "messages": messages}])

    def write_all(self, payloads: Sequence[dict[str, Any]]) -> None:
        """Store events (`payloads`: each event as JSON, already redacted) in order, and what
        they change, in one transaction: all of them or, should one fail, none. The write lock
        is taken first, so a concurrent writer waits instead of failing. No payload is changed."""
        composers = {payload["run_id"]: self._composer(payload["run_id"]) for payload in payloads}
        self._db.execute("BEGIN IMMEDIATE")
        try:
            for payload in payloads:
                self._write(payload, composers[payload["run_id"]])
            self._db.execute("COMMIT")
        except BaseException:
            self._roll_back()
            for composer in composers.values():
                composer.rollback()
            raise
        for composer in composers.values():
            composer.commit()
        for payload in payloads:
            if payload["type"] in ENDINGS:
                self._composers.pop(payload["run_id"], None)

    def give_up(self, error: str, ts: float) -> list[str]:
        """After a write that failed: every run begun and not ended, marked failed with
        `error`, where its row is still running; forgotten either way. Returns the runs
        marked. Raises what SQLite raises, marking nothing, when even that cannot be written."""
        runs, self._composers = list(self._composers), {}
        self._started.clear()
        marked = []
        self._db.execute("BEGIN IMMEDIATE")
        try:
            for run_id in runs:
                cursor = self._db.execute(
                    "UPDATE runs SET status = 'failed', error = ?, finished_at = ? WHERE id = ? AND status = 'running'",
                    (error, iso_time(ts), run_id),
                )
                if cursor.rowcount:
                    marked.append(run_id)
            self._db.execute("COMMIT")
        except BaseException:
            self._roll_back()
            raise
        return marked

    def _composer(self, run_id: str) -> Composer:
        composer = self._composers.get(run_id)
        if composer is None:
            composer = self._composers[run_id] = Composer(self.texts)
        return composer

    def _roll_back(self) -> None:
        """After a failure inside a transaction; SQLite may have rolled it back already (a
        full disk, an I/O error), or fail to (then the next BEGIN says so)."""
        if self._db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")

    def _write(self, payload: dict[str, Any], composer: Composer) -> None:
        messages: list[dict[str, Any]] = []
        if "messages" in payload:  # a call's prompt: kept in its row, not in its event
            messages = payload["messages"]
            payload = {key: value for key, value in payload.items() if key != "messages"}
        columns = {key: payload[key] for key in ENVELOPE}
        write_row = ROW_WRITERS.get(columns["type"])
        given = None if write_row is None else write_row(self, payload, messages, composer)
        self.insert_event(columns, leftover(payload, columns, given), composer)

    def _call_started(self, payload: dict[str, Any], messages: list[dict[str, Any]], composer: Composer) -> None:
        """Held until the call ends: its row then claims this event too."""
        self._started[(payload["run_id"], payload["call_id"])] = ({key: payload[key] for key in ENVELOPE}, payload)

    def _call_ended(
        self, payload: dict[str, Any], messages: list[dict[str, Any]], composer: Composer
    ) -> dict[str, Any]:
        run_id = payload["run_id"]
        started = self._started.pop((run_id, payload["call_id"]), None)
        values = {key: value for key, value in payload.items() if key not in ENVELOPE}
        given = self.insert_call(run_id, payload["seq"], payload["ts"], values, messages, started, composer)
        self.update_totals(run_id)
        return given

    def _tool_call_finished(self, payload: dict[str, Any], messages: list[dict[str, Any]], composer: Composer) -> None:
        self.insert_tool_call(payload["run_id"], payload["seq"], payload["ts"], payload)

    def insert_tool_call(self, run_id: str, seq: int, ts: float | None, values: Mapping[str, Any]) -> None:
        """The row of a finished tool call; its event keeps every field (the result's text too)."""
        self._db.execute(
            "INSERT INTO tool_calls (run_id, seq, call_id, tool_call_id, member, stage, round, about, server, tool,"
            " arguments_json, status, result_chars, truncated, error, duration, ts)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run_id,
                seq,
                values.get("call_id"),
                values.get("tool_call_id"),
                values.get("member"),
                values.get("stage"),
                values.get("round"),
                values.get("about"),
                values.get("server"),
                values.get("tool"),
                dumps(values.get("arguments")),
                values.get("status"),
                values.get("result_chars"),
                None if values.get("truncated") is None else int(values["truncated"]),
                values.get("error"),
                values.get("duration"),
                None if ts is None else iso_time(ts),
            ),
        )

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

    def json(self, value: Any, composer: Composer) -> str | None:
        """A JSON column with its long strings as texts; None for nothing to keep."""
        return dumps(encode(value, self.put(composer))) if value else None

    def put(self, composer: Composer, *, compose: bool = False) -> Callable[[str], int]:
        return lambda text: self.texts.put(text, composer=composer, compose=compose)

    def _start_run(self, payload: dict[str, Any], messages: list[dict[str, Any]], composer: Composer) -> dict[str, Any]:
        run_id = payload["run_id"]
        self._db.execute(
            "INSERT INTO runs (id, protocol, panel, question_text, config_text, status, started_at, calls, pid, host,"
            " started_seq) VALUES (?, ?, ?, ?, ?, 'running', ?, 0, ?, ?, ?)",
            (
                run_id,
                payload["protocol"],
                payload["panel"],
                self.texts.put(payload["question"], composer=composer, searchable=True),
                self.texts.put(dumps(payload["config"]), composer=composer),
                iso_time(payload["ts"]),
                self._pid,
                self._host,
                payload["seq"],
            ),
        )
        batch = batch_of(payload["config"])
        if batch is not None:
            self._db.execute("UPDATE runs SET batch_id = ? WHERE id = ?", (batch, run_id))
        parent = parent_of(payload["config"])
        if parent is not None:
            self._db.execute("UPDATE runs SET parent_id = ? WHERE id = ?", (parent, run_id))
        source = resumed_source(payload["config"])
        if source is not None:
            # A run resumed again (`--force`, once its resume failed or crashed) abandons that
            # resume: the end of the chain of resumes that took it over is taken over too, so it
            # can no longer be resumed and finished, and its calls paid, a second time.
            self._db.execute(
                "WITH RECURSIVE chain(id) AS (SELECT resumed_by FROM runs WHERE id = ?"
                " UNION SELECT runs.resumed_by FROM runs JOIN chain ON runs.id = chain.id"
                " WHERE runs.resumed_by IS NOT NULL)"
                " UPDATE runs SET status = 'resumed', resumed_by = ?"
                " WHERE id IN (SELECT id FROM chain) AND status IN ('running', 'interrupted', 'failed')",
                (source, run_id),
            )
            # In the transaction that starts the run, so its source is never left unmarked. Only a
            # run that stopped before its end can be taken over (a finished one keeps its answer).
            self._db.execute(
                "UPDATE runs SET status = 'resumed', resumed_by = ?"
                " WHERE id = ? AND status IN ('running', 'interrupted', 'failed', 'resumed')",
                (run_id, source),
            )
        return run_fields(self._run_row(run_id), TextCache(self._db), "run_started")

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
            " response_text, truncated, reused, late, request_hash, tokens_in, tokens_out, cost, latency, error_kind,"
            " error, detail, attempts, ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                int(values["late"]) if values.get("late") is not None else None,
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

    def update_totals(self, run_id: str) -> None:
        """Kept current after every call, so a run that crashed still shows what it spent.
        SQL's SUM skips NULLs and is NULL when all are: an unknown cost stays unknown
        rather than becoming 0, and a partly known one is the sum of what is known. A call the
        budget refused is kept as a row but not counted: no request went out (as `RunTotals`)."""
        calls, tokens_in, tokens_out, cost = self._db.execute(
            "SELECT COUNT(*) FILTER (WHERE error_kind IS NOT 'budget'), SUM(tokens_in), SUM(tokens_out), SUM(cost)"
            " FROM calls WHERE run_id = ?",
            (run_id,),
        ).fetchone()
        tokens = None if tokens_in is None and tokens_out is None else (tokens_in or 0) + (tokens_out or 0)
        self._db.execute("UPDATE runs SET calls = ?, tokens = ?, cost = ? WHERE id = ?", (calls, tokens, cost, run_id))

    def _end_run(
        self, payload: dict[str, Any], messages: list[dict[str, Any]], composer: Composer
    ) -> dict[str, Any] | None:
        """A run normally ends once; should it end again, the event that ended it before gets
        back every field the run row is about to lose."""
        run_id, kind = payload["run_id"], payload["type"]
        row = self._run_row(run_id)
        if row is None:
            return None
        if row["ended_seq"] is not None:
            self.expand(run_id, row["ended_seq"], composer)
        finished_at = iso_time(payload["ts"])
        if kind == "run_finished":
            answer = payload["final_answer"]
            self._db.execute(
                "UPDATE runs SET status = ?, final_answer_text = ?, result_json = ?, outcome = ?, finished_at = ?,"
                " ended_seq = ? WHERE id = ?",
                (
                    "finished" if payload["reached_answer"] else "no_answer",
                    None if answer is None else self.texts.put(answer, composer=composer, searchable=True),
                    dumps(encode(payload["result"], self.put(composer))),
                    outcome_of(answer, payload["result"]),
                    finished_at,
                    payload["seq"],
                    run_id,
                ),
            )
        elif kind == "run_failed":
            self._db.execute(
                "UPDATE runs SET status = 'failed', error = ?, finished_at = ?, ended_seq = ? WHERE id = ?",
                (payload["message"], finished_at, payload["seq"], run_id),
            )
        else:
            self._db.execute(
                "UPDATE runs SET status = 'interrupted', finished_at = ?, ended_seq = NULL WHERE id = ?",
                (finished_at, run_id),
            )
            return None
        return run_fields(self._run_row(run_id), TextCache(self._db), kind)

    def _record_decision(
        self, payload: dict[str, Any], messages: list[dict[str, Any]], composer: Composer
    ) -> dict[str, Any]:
        run_id = payload["run_id"]
        before = self._db.execute("SELECT seq FROM decisions WHERE run_id = ?", (run_id,)).fetchone()
        if before is not None and before[0] is not None:
            self.expand(run_id, before[0], composer)
        self.insert_decision(run_id, payload["seq"], payload, payload["ts"])
        return decision_fields(self._db.execute("SELECT * FROM decisions WHERE run_id = ?", (run_id,)).fetchone())

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

    def expand(self, run_id: str, seq: int, composer: Composer) -> None:
        """Give a claimed event every field back, before the row claiming it changes."""
        event = self._db.execute("SELECT * FROM events WHERE run_id = ? AND seq = ?", (run_id, seq)).fetchone()
        if event is None:
            return
        texts = TextCache(self._db)
        kept = decode(json.loads(event["payload_json"]), texts) if event["payload_json"] else {}
        if event["type"] == "decision_recorded":
            given = decision_fields(self._db.execute("SELECT * FROM decisions WHERE run_id = ?", (run_id,)).fetchone())
        else:
            given = run_fields(self._run_row(run_id), texts, event["type"])
        columns = envelope(event, run_id)
        payload = restore(columns, kept, given)
        self._db.execute(
            "UPDATE events SET payload_json = ? WHERE run_id = ? AND seq = ?",
            (self.json(leftover(payload, columns), composer), run_id, seq),
        )

    def _run_row(self, run_id: str) -> sqlite3.Row:
        return self._db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()


# The rows each event type writes besides its own row in `events`, by type; each returns the
# fields its row gives back to the event (None: the event keeps them all). Every event type is
# either here or in IGNORED, never in both: tests/test_event_consumers.py checks it.
RowWriter = Callable[[RunWriter, dict[str, Any], list[dict[str, Any]], Composer], dict[str, Any] | None]
ROW_WRITERS: dict[str, RowWriter] = {
    "run_started": RunWriter._start_run,
    "call_started": RunWriter._call_started,
    "call_finished": RunWriter._call_ended,
    "call_failed": RunWriter._call_ended,
    "run_finished": RunWriter._end_run,
    "run_failed": RunWriter._end_run,
    "run_interrupted": RunWriter._end_run,
    "decision_recorded": RunWriter._record_decision,
    "tool_call_finished": RunWriter._tool_call_finished,
}

# The event types that write no row of their own: each is kept whole in `events`. A skipped
# member made no call, so it has no `calls` row; a tool call's row is written when it ends;
# `call_text_grew` never reaches the store (`CallFinished` has the whole text).
IGNORED = frozenset(
    {
        "stage_started",
        "call_text_grew",
        "member_skipped",
        "asking_stopped",
        "vote_cast",
        "round_tallied",
        "ranking_parsed",
        "warning",
        "plan_proposed",
        "plan_rejected",
        "plan_accepted",
        "task_started",
        "task_finished",
        "task_failed",
        "task_skipped",
        "delphi_contribution",
        "delphi_round_ended",
        "supervise_verdict",
        "vote_opened",
        "vote_received",
        "quorum_reached",
        "vote_tallied",
        "leader_chose",
        "tool_server_started",
        "tool_call_started",
    }
)
