"""Reading runs back for `panel history`, resume, follow-ups and exports.

Reading never writes: the file is opened read-only and never migrated (see
`panel_cli.store.connection.open_for_reading`), so history works on a file the person cannot
write, while a run may still be writing to it.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from panel_cli.errors import UserError
from panel_cli.run_keys import TAGS_KEY
from panel_cli.store.connection import damaged_error, database_error, open_for_reading
from panel_cli.store.migrations import SCHEMA_VERSION
from panel_cli.store.paths import resolve_db_path
from panel_cli.store.processes import this_host
from panel_cli.store.records import (
    THREAD_LIMIT,
    BatchRun,
    CallRecord,
    DecisionRecord,
    ListedStatus,
    RetallyRecord,
    RunMember,
    RunRecord,
    RunSummary,
    RunThread,
    ThreadRun,
    listed_status,
    preview,
)
from panel_cli.store.rows import call_fields, decision_fields, envelope, restore, run_fields
from panel_cli.store.texts import MissingTextError, TextCache, decode, refs_in
from panel_cli.store.times import epoch, iso_time, optional_epoch

if TYPE_CHECKING:
    from panel_cli.store.stats import StatsReport


def _summary(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        **{
            key: row[key]
            for key in ("id", "protocol", "panel", "question", "calls", "tokens", "cost", "outcome", "parent_id")
        },
        "status": listed_status(row),
        "started_at": optional_epoch(row["started_at"]),
        "finished_at": optional_epoch(row["finished_at"]),
    }


def search_query(text: str) -> str | None:
    """FTS5 syntax for what a person typed: every word (or word-with-punctuation, as a
    phrase) must occur, whatever quotes or operators the text holds."""
    terms = [term for term in text.split() if re.search(r"\w", term)]
    return " ".join('"' + term.replace('"', '""') + '"' for term in terms) or None


def prefix_successor(prefix: str) -> str | None:
    """The smallest string after every string that begins with `prefix` (None: there is
    none), so a prefix is a range of the primary-key index: `id >= prefix AND id < next`."""
    while prefix:
        last = ord(prefix[-1])
        if last < 0x10FFFF:
            return prefix[:-1] + chr(last + 1 + (0x800 if 0xD7FF <= last < 0xE000 else 0))
        prefix = prefix[:-1]
    return None


_SUMMARY = (
    "SELECT r.id, r.protocol, r.panel, question.body AS question, r.status, r.started_at, r.finished_at, r.calls,"
    " r.tokens, r.cost, r.outcome, r.pid, r.host, r.parent_id FROM runs r LEFT JOIN texts question ON question.id = r.question_text"
)
# A run's ancestors, nearest first: the chain of parent ids, up to the first run no longer stored.
_ANCESTORS = """
WITH RECURSIVE chain(id, depth) AS (
    SELECT parent_id, 1 FROM runs WHERE id = :id AND parent_id IS NOT NULL
    UNION ALL
    SELECT r.parent_id, chain.depth + 1 FROM chain JOIN runs r ON r.id = chain.id
    WHERE r.parent_id IS NOT NULL AND chain.depth < :limit
)
SELECT r.*, chain.depth FROM chain JOIN runs r ON r.id = chain.id ORDER BY chain.depth
"""
# A run's follow-ups, through the parent_id index, depth first: ordered by the path of start
# times (ISO text of one width, so it sorts as time) and ids from the run down.
_FOLLOW_UPS = """
WITH RECURSIVE tree(id, depth, path) AS (
    SELECT id, 1, started_at || id FROM runs WHERE parent_id = :id
    UNION ALL
    SELECT r.id, tree.depth + 1, tree.path || ' ' || r.started_at || r.id FROM tree JOIN runs r ON r.parent_id = tree.id
    WHERE tree.depth < :limit
)
SELECT r.*, tree.depth FROM tree JOIN runs r ON r.id = tree.id ORDER BY tree.path LIMIT :limit
"""


class TranscriptReader:
    """Reads runs back, while a run may still be writing to the file.

    Records are made with `model_construct`: their fields come from the store's own columns,
    typed by its schema, and validating them would first build each model's validator, which
    costs `history list` and `history show` a seventh of their time."""

    def __init__(self, db: sqlite3.Connection, path: Path, version: int = SCHEMA_VERSION) -> None:
        self.path = path
        self.version = version  # of the file, before any copy was brought forward
        self._db = db

    @classmethod
    def open(cls, path: Path | str | None = None) -> TranscriptReader:
        path = resolve_db_path(path)
        db, version = open_for_reading(path)
        return cls(db, path, version)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> TranscriptReader:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _query(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[sqlite3.Row]:
        """Every read goes through here, so damage found on any page is one sentence rather
        than a traceback."""
        try:
            return self._db.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as error:
            raise database_error(self.path, error, writing=False) from error

    def _texts(self, ids: Iterable[int | None]) -> TextCache:
        """The texts of `ids`, loaded at once."""
        texts = TextCache(self._db)
        try:
            texts.load(text_id for text_id in ids if text_id is not None)
        except sqlite3.DatabaseError as error:
            raise database_error(self.path, error, writing=False) from error
        except MissingTextError as error:
            raise damaged_error(self.path, error) from error
        return texts

    def count_runs(self, status: ListedStatus | None = None) -> int:
        if status in ("running", "stale"):
            return len(self.list_runs(limit=-1, status=status))
        where, params = ("WHERE status = ?", [status]) if status else ("", [])
        return int(self._query(f"SELECT count(*) FROM runs {where}", params)[0][0])

    def list_runs(
        self,
        limit: int = 20,
        *,
        status: ListedStatus | None = None,
        protocol: str | None = None,
        search: str | None = None,
        since: float | None = None,
    ) -> list[RunSummary]:
        """Newest first; `limit` -1 for all. `search` is full-text over questions and final
        answers (every word must occur, in any case); `since` is epoch seconds."""
        where: list[str] = []
        params: list[Any] = []
        if protocol:
            where.append("r.protocol = ?")
            params.append(protocol)
        if since is not None:
            where.append("r.started_at >= ?")
            params.append(iso_time(since))
        if search is not None and (query := search_query(search)) is not None:
            found = "SELECT rowid FROM text_search WHERE text_search MATCH ?"
            where.append(f"(r.question_text IN ({found}) OR r.final_answer_text IN ({found}))")
            params += [query, query]
        # Whether a running run is stale is known only here, so those are counted in Python.
        by_process = status in ("running", "stale")
        if by_process:
            where.append("r.status = 'running'")
            if status == "stale":
                where.append("r.host = ?")
                params.append(this_host())
        elif status:
            where.append("r.status = ?")
            params.append(status)
        sql = f"{_SUMMARY} {'WHERE ' + ' AND '.join(where) if where else ''} ORDER BY r.started_at DESC, r.id"
        if not by_process:
            sql += " LIMIT ?"
            params.append(limit)
        summaries = [RunSummary.model_construct(**_summary(row)) for row in self._query(sql, params)]
        if by_process:
            summaries = [summary for summary in summaries if summary.status == status]
            summaries = summaries if limit < 0 else summaries[:limit]
        return summaries

    def get_run(self, id_or_prefix: str) -> RunRecord:
        """Accepts any unique prefix of an id, as `git` does, since ids are long to type;
        found through the primary-key index, as a range."""
        rows = self._query("SELECT * FROM runs WHERE id = ?", (id_or_prefix,))
        if not rows and id_or_prefix:
            upper = prefix_successor(id_or_prefix)
            rows = self._query(
                f"SELECT * FROM runs WHERE id >= ?{' AND id < ?' if upper else ''} ORDER BY id LIMIT 6",
                (id_or_prefix, upper) if upper else (id_or_prefix,),
            )
        if not rows:
            raise UserError(f"No run has the id '{id_or_prefix}'; `panel history list` shows the stored runs.")
        if len(rows) > 1:
            matches = ", ".join(row["id"] for row in rows[:5]) + (", …" if len(rows) > 5 else "")
            raise UserError(f"The id '{id_or_prefix}' matches several runs ({matches}); give more of it.")
        row = rows[0]
        texts = self._texts(
            [row["question_text"], row["final_answer_text"], row["config_text"], *refs_in(row["result_json"])]
        )
        config = texts.optional(row["config_text"])
        return RunRecord.model_construct(
            **{
                **_summary({**dict(row), "question": texts.optional(row["question_text"])}),
                "members": self._members(row["id"]),
                "config": json.loads(config) if config else {},
                "final_answer": texts.optional(row["final_answer_text"]),
                "result": decode(json.loads(row["result_json"]), texts) if row["result_json"] else None,
                "error": row["error"],
                "pid": row["pid"],
                "host": row["host"],
                "thread": self.thread(row["id"]),
            }
        )

    def thread(self, run_id: str) -> RunThread:
        """The runs `run_id` follows up and its follow-ups (see `RunThread`)."""
        found = {"id": run_id, "limit": THREAD_LIMIT}
        ancestors = self._query(_ANCESTORS, found)[::-1]
        follow_ups = self._query(_FOLLOW_UPS, found)
        texts = self._texts(
            text_id for row in [*ancestors, *follow_ups] for text_id in (row["question_text"], row["final_answer_text"])
        )
        return RunThread.model_construct(
            ancestors=[self._thread_run(row, texts) for row in ancestors],
            follow_ups=[self._thread_run(row, texts) for row in follow_ups],
        )

    @staticmethod
    def _thread_run(row: sqlite3.Row, texts: TextCache) -> ThreadRun:
        answer = texts.optional(row["final_answer_text"])
        return ThreadRun.model_construct(
            run_id=row["id"],
            parent_id=row["parent_id"],
            depth=row["depth"],
            protocol=row["protocol"],
            question=texts.optional(row["question_text"]) or "",
            status=listed_status(row),
            started_at=optional_epoch(row["started_at"]),
            answer_preview=None if answer is None else preview(answer),
        )

    @property
    def connection(self) -> sqlite3.Connection:
        """The read-only connection, for `panel_cli.store.merge` to copy rows from."""
        return self._db

    def batch_runs(self, batch_id: str) -> list[BatchRun]:
        """Every run of a batch, oldest first, with its tags, its final answer and why it has
        none (found through the batch id's index)."""
        rows = self._query("SELECT * FROM runs WHERE batch_id = ? ORDER BY started_at, id", (batch_id,))
        texts = self._texts(
            text_id
            for row in rows
            for text_id in (
                row["question_text"],
                row["final_answer_text"],
                row["config_text"],
                *refs_in(row["result_json"]),
            )
        )
        runs = []
        for row in rows:
            config = texts.optional(row["config_text"])
            tags = (json.loads(config) if config else {}).get(TAGS_KEY)
            result = decode(json.loads(row["result_json"]), texts) if row["result_json"] else {}
            reason = result.get("failure_reason") if isinstance(result, dict) else None
            runs.append(
                BatchRun.model_construct(
                    **_summary({**dict(row), "question": texts.optional(row["question_text"])}),
                    tags=tags if isinstance(tags, dict) else {},
                    final_answer=texts.optional(row["final_answer_text"]),
                    failure_reason=reason if isinstance(reason, str) else None,
                )
            )
        return runs

    def short_id(self, run_id: str, min_length: int = 8) -> str:
        """The shortest beginning of `run_id` that no other run shares, as `git` abbreviates
        hashes: it keeps the id column of `panel history list` narrow, and `get_run`
        accepts it. Only the neighbours in sort order can share a longer prefix."""
        neighbours = self._query(
            "SELECT (SELECT max(id) FROM runs WHERE id < :id), (SELECT min(id) FROM runs WHERE id > :id)",
            {"id": run_id},
        )[0]
        shared = max((len(os.path.commonprefix([run_id, other])) for other in neighbours if other), default=0)
        return run_id[: max(min_length, shared + 1)]

    def _members(self, run_id: str) -> list[RunMember]:
        """The members live in the `run_started` event rather than a column of their own."""
        rows = self._query("SELECT payload_json FROM events WHERE run_id = ? AND type = 'run_started'", (run_id,))
        if not rows or not rows[0]["payload_json"]:
            return []
        payload = json.loads(rows[0]["payload_json"])
        members = decode(payload, self._texts(refs_in(rows[0]["payload_json"]))).get("members", [])
        return [RunMember.model_construct(**{"label": None, **member}) for member in members]

    def run_events(self, run_id: str) -> list[dict[str, Any]]:
        """Payloads in emission order, every text in place; `panel_cli.events.parse_event`
        turns each back into the event a live run emitted (its `messages`, if any, are in
        `run_calls`)."""
        events = self._query("SELECT * FROM events WHERE run_id = ? ORDER BY seq", (run_id,))
        run = next(iter(self._query("SELECT * FROM runs WHERE id = ?", (run_id,))), None)
        calls = self._query("SELECT * FROM calls WHERE run_id = ?", (run_id,))
        decision = next(iter(self._query("SELECT * FROM decisions WHERE run_id = ?", (run_id,))), None)
        ids: list[int | None] = [call["response_text"] for call in calls]
        for row in events:
            ids += refs_in(row["payload_json"])
        if run is not None:
            ids += [run["question_text"], run["final_answer_text"], run["config_text"], *refs_in(run["result_json"])]
        texts = self._texts(ids)
        claims: dict[int, dict[str, Any]] = {}
        for call in calls:
            given = call_fields(call, texts)
            claims.update((seq, given) for seq in (call["seq"], call["started_seq"]) if seq is not None)
        if run is not None:
            claims.update((run[seq], {}) for seq in ("started_seq", "ended_seq") if run[seq] is not None)
        if decision is not None and decision["seq"] is not None:
            claims[decision["seq"]] = decision_fields(decision)
        payloads = []
        for row in events:
            kept = decode(json.loads(row["payload_json"]), texts) if row["payload_json"] else {}
            given = claims.get(row["seq"])
            if given == {} and run is not None:
                given = run_fields(run, texts, row["type"])
            payloads.append(restore(envelope(row, run_id), kept, given))
        return payloads

    def list_decisions(self, limit: int = 20, topic: str | None = None) -> list[DecisionRecord]:
        """Newest first; with `topic`, only decisions whose topic holds it, in any case."""
        rows = self._query("SELECT * FROM decisions ORDER BY decided_at DESC")
        wanted = topic.casefold() if topic else None
        found: list[DecisionRecord] = []
        for row in rows:
            if wanted is not None and wanted not in (row["topic"] or "").casefold():
                continue
            fields = dict(row)
            fields["vote_counts"] = json.loads(fields.pop("vote_counts_json") or "{}")
            fields["decided_at"] = optional_epoch(fields["decided_at"])
            found.append(DecisionRecord.model_validate(fields))
            if len(found) == limit:
                break
        return found

    def run_retallies(self, run_id: str) -> list[RetallyRecord]:
        """A run's recounts, oldest first."""
        rows = self._query("SELECT * FROM retallies WHERE run_id = ? ORDER BY created_at, rowid", (run_id,))
        records = []
        for row in rows:
            fields = dict(row)
            fields["result"] = json.loads(fields.pop("result_json") or "{}")
            fields["created_at"] = optional_epoch(fields["created_at"])
            records.append(RetallyRecord.model_validate(fields))
        return records

    def run_calls(self, run_id: str) -> list[CallRecord]:
        """Every call in the order it ended, its messages and response whole. `truncated` is
        NULL for a failed call."""
        rows = self._query("SELECT * FROM calls WHERE run_id = ? ORDER BY ts, seq", (run_id,))
        ids: list[int | None] = []
        for row in rows:
            ids += [row["response_text"], *refs_in(row["request_json"])]
        texts = self._texts(ids)
        return [
            CallRecord.model_construct(
                id=row["id"],
                run_id=row["run_id"],
                member=row["member"],
                model=row["model"],
                stage=row["stage"],
                round=row["round"],
                about=row["about"],
                messages=decode(json.loads(row["request_json"] or "[]"), texts),
                response=texts.optional(row["response_text"]),
                truncated=bool(row["truncated"]),
                request_hash=row["request_hash"],
                tokens_in=row["tokens_in"],
                tokens_out=row["tokens_out"],
                cost=row["cost"],
                latency=row["latency"],
                error_kind=row["error_kind"],
                error=row["error"],
                detail=row["detail"],
                attempts=row["attempts"],
                ts=epoch(row["ts"]),
            )
            for row in rows
        ]

    def answered_calls(self, run_id: str) -> dict[str, list[CallRecord]]:
        """The run's answered calls by request hash, in the order they ended, for a resumed
        run to take instead of paying for them again. Every one is kept, not one per hash: a
        run that asked the same thing twice (two members on one model, a round whose prompt
        did not change) got two samples, and so does its resume."""
        answered: dict[str, list[CallRecord]] = {}
        for call in self.run_calls(run_id):
            if call.request_hash and call.error_kind is None and call.response is not None:
                answered.setdefault(call.request_hash, []).append(call)
        return answered

    def stats(self) -> StatsReport:
        """Totals over every run. SQL's SUM skips NULLs and is NULL when all are: an unknown
        cost stays unknown."""
        from panel_cli.store.stats import ModelUsage, MonthUsage, ProtocolUsage, StatsReport, Usage

        usage = "count(*) AS runs, coalesce(sum(calls), 0) AS calls, sum(tokens) AS tokens, sum(cost) AS cost"
        (total,) = self._query(f"SELECT {usage} FROM runs")
        by_protocol = self._query(f"SELECT protocol, {usage} FROM runs GROUP BY protocol ORDER BY protocol")
        by_month = self._query(
            f"SELECT substr(started_at, 1, 7) AS month, {usage} FROM runs GROUP BY month ORDER BY month"
        )
        by_model = self._query(
            "SELECT model, count(DISTINCT run_id) AS runs, count(*) AS calls,"
            " CASE WHEN count(tokens_in) + count(tokens_out) THEN coalesce(sum(tokens_in), 0) + coalesce(sum(tokens_out), 0) END"
            " AS tokens, sum(cost) AS cost FROM calls GROUP BY model ORDER BY model"
        )
        return StatsReport(
            total=Usage.model_validate(dict(total)),
            by_model=[ModelUsage.model_validate(dict(row)) for row in by_model],
            by_protocol=[
                ProtocolUsage.model_validate({**dict(row), "protocol": row["protocol"] or ""}) for row in by_protocol
            ],
            by_month=[MonthUsage.model_validate({**dict(row), "month": row["month"] or ""}) for row in by_month],
        )
