"""Reading runs back for `panel history`, resume, follow-ups and exports.

Reading never writes: the file is opened read-only and never migrated (see
`panel_cli.store.connection.open_for_reading`), so history works on a file the person cannot
write, while a run may still be writing to it.

Every reader survives a damaged row: SQLite keeps whatever a column is given, so a file
edited by hand, or damaged, can hold text where a time belongs or JSON that does not parse.
Each value is checked for the type its column holds as it is read (`Columns`); what cannot
be read is left out, and the run says so (`damage`, and `damaged` as its status when its row
itself is unreadable), so it can still be listed, shown, exported and deleted.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from panel_cli.errors import UserError
from panel_cli.run_keys import TAGS_KEY
from panel_cli.store.connection import database_error, open_for_reading
from panel_cli.store.migrations import SCHEMA_VERSION
from panel_cli.store.paths import resolve_db_path
from panel_cli.store.processes import this_host
from panel_cli.store.records import (
    CALL_STATUSES,
    RUN_STATUSES,
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
    read_time,
)
from panel_cli.store.row_like import RowLike
from panel_cli.store.rows import call_fields, decision_fields, envelope, restore, run_fields
from panel_cli.store.texts import MissingTextError, TextCache, decode, refs_in
from panel_cli.store.times import iso_time
from panel_cli.totals import ledger_cost

if TYPE_CHECKING:
    from panel_cli.store.stats import StatsReport

# What every command that takes a run id takes for the run started last.
LAST = "last"
# Deeper JSON than this in a stored column is damage, not data: panel writes a few levels.
JSON_DEPTH = 100
_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def json_depth(text: str) -> int:
    """How deeply `text`'s arrays and objects nest, counted without parsing (the parser
    recurses, and a file can nest far deeper than the interpreter's stack)."""
    depth = deepest = 0
    for token in _BRACKETS.finditer(text):
        mark = token.group()
        if mark in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif mark in "]}":
            depth -= 1
    return deepest


def load_json(text: Any) -> Any:
    """A stored JSON column's value; ValueError for one that is not JSON of a sane depth."""
    if not isinstance(text, str):
        raise ValueError("not JSON text")
    if json_depth(text) > JSON_DEPTH:
        raise ValueError(f"JSON nested more than {JSON_DEPTH} levels deep")
    try:
        return json.loads(text)
    except RecursionError as error:
        raise ValueError("JSON nested too deeply") from error


class Columns:
    """A row's columns, each read as the type the schema gives it. A value of another type
    reads as its default and is noted in `bad` (the column's name), for the run's `damage`."""

    def __init__(self, row: RowLike) -> None:
        self.row = row
        self.bad: list[str] = []

    def _checked(self, column: str, value: Any, good: bool, default: Any) -> Any:
        if value is None:
            return default
        if good:
            return value
        self.bad.append(column)
        return default

    def text(self, column: str, default: str | None = None) -> str | None:
        value = self.row[column]
        return self._checked(column, value, isinstance(value, str), default)

    def whole(self, column: str, default: int | None = None) -> int | None:
        value = self.row[column]
        return self._checked(column, value, isinstance(value, int), default)

    def real(self, column: str) -> float | None:
        value = self.row[column]
        good = isinstance(value, int | float) and math.isfinite(value)
        return self._checked(column, float(value) if good else value, good, None)

    def time(self, column: str) -> float | None:
        value = self.row[column]
        moment = read_time(value)
        if value is not None and moment is None:
            self.bad.append(column)
        return moment

    def note(self, problem: str) -> None:
        self.bad.append(problem)

    @property
    def damage(self) -> str | None:
        return f"unreadable {', '.join(dict.fromkeys(self.bad))}" if self.bad else None


class Texts:
    """A run's texts by id: a text the file cannot give (missing, made of itself, not text)
    reads as None, and is noted in `bad`."""

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self._cache = TextCache(db)
        self._path = path
        self.broken: set[int] = set()

    def load(self, ids: Iterable[Any]) -> Texts:
        wanted = [text_id for text_id in ids if isinstance(text_id, int)]
        try:
            self._cache.load(wanted)
        except MissingTextError:
            for text_id in wanted:
                try:
                    self._cache.load([text_id])
                except MissingTextError:
                    self.broken.add(text_id)
        except sqlite3.DatabaseError as error:
            raise database_error(self._path, error, writing=False) from error
        return self

    def get(self, text_id: Any) -> str | None:
        if not isinstance(text_id, int) or text_id in self.broken:
            return None
        try:
            return self._cache.get(text_id)
        except MissingTextError:
            self.broken.add(text_id)
            return None
        except sqlite3.DatabaseError as error:
            raise database_error(self._path, error, writing=False) from error

    def optional(self, text_id: Any) -> str | None:
        return None if text_id is None else self.get(text_id)

    def column(self, columns: Columns, name: str) -> str | None:
        """The text a column points at, noting the column when it points at none."""
        text_id = columns.row[name]
        if text_id is None:
            return None
        found = self.get(text_id)
        if found is None:
            columns.note(name)
        return found

    def json_column(self, columns: Columns, name: str, default: Any = None) -> Any:
        """A JSON column with its texts in place, noting the column when it cannot be read."""
        raw = columns.row[name]
        if raw is None:
            return default
        try:
            value = decode(load_json(raw), self)
        except (ValueError, RecursionError):
            columns.note(name)
            return default
        if any(text_id in self.broken for text_id in refs_in(raw)):
            columns.note(name)
        return value


def _refs(raw: Any) -> list[int]:
    return list(refs_in(raw)) if isinstance(raw, str) else []


def _summary(row: RowLike, question: str | None, columns: Columns | None = None) -> dict[str, Any]:
    """The fields of a `RunSummary` from a run row; a column of the wrong type is noted in
    `damage`, and a run whose row cannot be read as a run is `damaged`."""
    columns = columns or Columns(row)
    fields: dict[str, Any] = {
        "id": row["id"] if isinstance(row["id"], str) else str(row["id"]),
        "protocol": columns.text("protocol", ""),
        "panel": columns.text("panel", ""),
        "question": question if question is not None else "",
        "started_at": columns.time("started_at"),
        "finished_at": columns.time("finished_at"),
        "calls": columns.whole("calls", 0),
        "tokens": columns.whole("tokens"),
        "cost": columns.real("cost"),
        "outcome": columns.text("outcome"),
        "parent_id": columns.text("parent_id"),
        "resumed_by": columns.text("resumed_by"),
    }
    if "real_calls" in tuple(row.keys()):  # a sqlite3.Row's `in` looks at values
        unpriced = sorted(str(row["unpriced"]).split(",")) if row["unpriced"] is not None else []
        real_calls = row["real_calls"] if isinstance(row["real_calls"], int) else 0
        fields["cost"], fields["cost_basis"] = ledger_cost(fields["calls"] or 0, real_calls, fields["cost"], unpriced)
        fields["unpriced"] = unpriced
        fields["calls_by_status"] = _by_status(row["by_status"])
    if row["status"] not in RUN_STATUSES:
        columns.note("status")
    if fields["started_at"] is None:
        if row["started_at"] is None:
            columns.note("started_at")
        fields["started_at"] = 0.0
    if question is None and row["question_text"] is not None:
        columns.note("question_text")
    fields["damage"] = columns.damage
    fields["status"] = "damaged" if columns.bad else listed_status(row)
    return fields


def _by_status(counted: Any) -> dict[str, int]:
    """`status=count,...` as the ledger's query gives it, a count for every status."""
    found = dict(pair.split("=") for pair in counted.split(",")) if isinstance(counted, str) else {}
    return {status: int(found.get(status, 0)) for status in CALL_STATUSES}


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


# A call whose reply came but whose price is unknown (a demo persona's costs nothing).
UNPRICED_CALL = (
    "c.cost IS NULL AND c.error_kind IS NOT 'budget' AND substr(CAST(c.model AS TEXT), 1, 5) IS NOT 'demo/'"
    " AND (c.response_text IS NOT NULL OR c.tokens_in IS NOT NULL OR c.tokens_out IS NOT NULL)"
)
# A call's final status from its row, as `panel_cli.store.records.call_status` reads it.
_CALL_STATUS = (
    "CASE WHEN c.error_kind IS 'budget' THEN 'refused' WHEN c.error_kind IS 'cancelled' THEN 'cancelled'"
    " WHEN c.error_kind IS NOT NULL THEN 'failed' WHEN c.late THEN 'late' WHEN c.reused THEN 'reused'"
    " ELSE 'answered' END"
)
# What a run's cost basis is read from (`panel_cli.totals.ledger_cost`): its calls of a real
# model, and the models whose calls had no price; `r` is the run's row.
_LEDGER = (
    ", (SELECT count(*) FROM calls c WHERE c.run_id = r.id AND c.error_kind IS NOT 'budget'"
    " AND substr(CAST(c.model AS TEXT), 1, 5) IS NOT 'demo/') AS real_calls"
    f", (SELECT group_concat(DISTINCT CAST(c.model AS TEXT)) FROM calls c WHERE c.run_id = r.id AND {UNPRICED_CALL})"
    " AS unpriced"
    ", (SELECT group_concat(status || '=' || n) FROM"
    f" (SELECT {_CALL_STATUS} AS status, count(*) AS n FROM calls c WHERE c.run_id = r.id GROUP BY 1)) AS by_status"
)
_SUMMARY = (
    "SELECT r.id, r.protocol, r.panel, question.body AS question, r.question_text, r.status, r.started_at,"
    f" r.finished_at, r.calls, r.tokens, r.cost, r.outcome, r.pid, r.host, r.parent_id, r.resumed_by{_LEDGER}"
    " FROM runs r LEFT JOIN texts question ON question.id = r.question_text"
)
_RUN = f"SELECT r.*{_LEDGER} FROM runs r"
# The same over a group of runs (`{}`: what ties a run `r2` to the group's `r`), for `stats`.
_GROUP_LEDGER = (
    ", (SELECT count(*) FROM calls c JOIN runs r2 ON r2.id = c.run_id WHERE c.error_kind IS NOT 'budget'"
    " AND substr(CAST(c.model AS TEXT), 1, 5) IS NOT 'demo/' {0}) AS real_calls"
    ", (SELECT group_concat(DISTINCT CAST(c.model AS TEXT)) FROM calls c JOIN runs r2 ON r2.id = c.run_id"
    f" WHERE {UNPRICED_CALL} {{0}}) AS unpriced"
    ", (SELECT count(*) FROM calls c JOIN runs r2 ON r2.id = c.run_id WHERE c.late IS 1 {0}) AS late"
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
    """Reads runs back, while a run may still be writing to the file."""

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

    def _texts(self, ids: Iterable[Any]) -> Texts:
        """The texts of `ids`, loaded at once."""
        return Texts(self._db, self.path).load(ids)

    def count_runs(self, status: ListedStatus | None = None) -> int:
        if status in ("running", "stale", "damaged"):
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
        from panel_cli.store.times import iso_time

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
        # Whether a running run is stale, or a row damaged, is known only here, so those
        # are counted in Python.
        by_reading = status in ("running", "stale", "damaged")
        if status in ("running", "stale"):
            where.append("r.status = 'running'")
            if status == "stale":
                where.append("r.host = ?")
                params.append(this_host())
        elif status and not by_reading:
            where.append("r.status = ?")
            params.append(status)
        sql = f"{_SUMMARY} {'WHERE ' + ' AND '.join(where) if where else ''} ORDER BY r.started_at DESC, r.id"
        if not by_reading:
            sql += " LIMIT ?"
            params.append(limit)
        summaries = [RunSummary(**_summary(row, row["question"])) for row in self._query(sql, params)]
        if by_reading:
            summaries = [summary for summary in summaries if summary.status == status]
            summaries = summaries if limit < 0 else summaries[:limit]
        return summaries

    def get_run(self, id_or_prefix: str) -> RunRecord:
        """Accepts any unique prefix of an id, as `git` does, since ids are long to type;
        found through the primary-key index, as a range."""
        row = self._find(id_or_prefix)
        columns = Columns(row)
        texts = self._texts(
            [row["question_text"], row["final_answer_text"], row["config_text"], *_refs(row["result_json"])]
        )
        fields = _summary(row, texts.get(row["question_text"]), columns)
        config = texts.column(columns, "config_text")
        config_value: Any = {}
        if config is not None:
            try:
                config_value = load_json(config)
            except ValueError:
                columns.note("config_text")
        result = texts.json_column(columns, "result_json")
        if result is not None and not isinstance(result, dict):
            columns.note("result_json")
            result = None
        members = self._members(row["id"], columns)
        answer = texts.column(columns, "final_answer_text")
        extra = {
            "error": columns.text("error"),
            "pid": columns.whole("pid"),
            "host": columns.text("host"),
            "imported_from": columns.text("imported_from"),
        }
        return RunRecord(
            **{
                **fields,
                **extra,
                "damage": columns.damage,
                "members": members,
                "config": config_value if isinstance(config_value, dict) else {},
                "final_answer": answer,
                "result": result,
                "thread": self.thread(row["id"]),
            }
        )

    def _find(self, id_or_prefix: str) -> sqlite3.Row:
        """The run an id names, or a unique beginning of one; `last` is the run started last
        (before now), as `--continue last` takes it."""
        rows = self._query(f"{_RUN} WHERE id = ?", (id_or_prefix,))
        if not rows and id_or_prefix.strip().lower() == LAST:
            # A time still to come is no run's start: an imported file could claim one to be `last`.
            now = iso_time(time.time())
            rows = self._query(f"{_RUN} WHERE started_at <= ? ORDER BY started_at DESC, id LIMIT 1", (now,))
            if not rows:
                later = "started before now" if self._query("SELECT 1 FROM runs LIMIT 1") else "yet"
                raise UserError(f"There is no run in {self.path} {later}, so no last one.")
        if not rows and id_or_prefix:
            upper = prefix_successor(id_or_prefix)
            rows = self._query(
                f"{_RUN} WHERE id >= ?{' AND id < ?' if upper else ''} ORDER BY id LIMIT 6",
                (id_or_prefix, upper) if upper else (id_or_prefix,),
            )
        if not rows:
            raise UserError(f"No run has the id '{id_or_prefix}'; `panel history list` shows the stored runs.")
        if len(rows) > 1:
            matches = ", ".join(str(row["id"]) for row in rows[:5]) + (", …" if len(rows) > 5 else "")
            raise UserError(f"The id '{id_or_prefix}' matches several runs ({matches}); give more of it.")
        return rows[0]

    def has_protocol(self, name: str) -> bool:
        """Whether any stored run is of the protocol `name`."""
        return bool(self._query("SELECT 1 FROM runs WHERE protocol = ? LIMIT 1", (name,)))

    def thread(self, run_id: str) -> RunThread:
        """The runs `run_id` follows up and its follow-ups (see `RunThread`)."""
        found = {"id": run_id, "limit": THREAD_LIMIT}
        ancestors = self._query(_ANCESTORS, found)[::-1]
        follow_ups = self._query(_FOLLOW_UPS, found)
        texts = self._texts(
            text_id for row in [*ancestors, *follow_ups] for text_id in (row["question_text"], row["final_answer_text"])
        )
        return RunThread(
            ancestors=[self._thread_run(row, texts) for row in ancestors],
            follow_ups=[self._thread_run(row, texts) for row in follow_ups],
        )

    @staticmethod
    def _thread_run(row: sqlite3.Row, texts: Texts) -> ThreadRun:
        answer = texts.optional(row["final_answer_text"])
        fields = _summary(row, texts.optional(row["question_text"]))
        return ThreadRun(
            run_id=fields["id"],
            parent_id=fields["parent_id"],
            depth=row["depth"],
            protocol=fields["protocol"],
            question=fields["question"],
            status=fields["status"],
            started_at=fields["started_at"],
            answer_preview=None if answer is None else preview(answer),
        )

    @property
    def connection(self) -> sqlite3.Connection:
        """The read-only connection, for `panel_cli.store.merge` to copy rows from."""
        return self._db

    def batch_runs(self, batch_id: str) -> list[BatchRun]:
        """Every run of a batch, oldest first, with its tags, its final answer and why it has
        none (found through the batch id's index)."""
        rows = self._query(f"{_RUN} WHERE batch_id = ? ORDER BY started_at, id", (batch_id,))
        texts = self._texts(
            text_id
            for row in rows
            for text_id in (
                row["question_text"],
                row["final_answer_text"],
                row["config_text"],
                *_refs(row["result_json"]),
            )
        )
        runs = []
        for row in rows:
            columns = Columns(row)
            fields = _summary(row, texts.optional(row["question_text"]), columns)
            config = texts.column(columns, "config_text")
            try:
                tags = load_json(config).get(TAGS_KEY) if config else None
            except (ValueError, AttributeError):
                tags = None
            result = texts.json_column(columns, "result_json", {})
            reason = result.get("failure_reason") if isinstance(result, dict) else None
            runs.append(
                BatchRun(
                    **{**fields, "damage": columns.damage},
                    tags=tags if isinstance(tags, dict) else {},
                    final_answer=texts.column(columns, "final_answer_text"),
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
        shared = max(
            (len(os.path.commonprefix([run_id, other])) for other in neighbours if isinstance(other, str)), default=0
        )
        return run_id[: max(min_length, shared + 1)]

    def _members(self, run_id: str, columns: Columns) -> list[RunMember]:
        """The members live in the `run_started` event rather than a column of their own."""
        rows = self._query("SELECT payload_json FROM events WHERE run_id = ? AND type = 'run_started'", (run_id,))
        if not rows or not rows[0]["payload_json"]:
            return []
        event = Columns(rows[0])
        payload = self._texts(_refs(rows[0]["payload_json"])).json_column(event, "payload_json", {})
        members = payload.get("members") if isinstance(payload, dict) else None
        found = []
        for member in members if isinstance(members, list) else []:
            if (
                isinstance(member, dict)
                and isinstance(member.get("name"), str)
                and isinstance(member.get("model"), str)
            ):
                label = member.get("label")
                found.append(
                    RunMember(
                        name=member["name"], model=member["model"], label=label if isinstance(label, str) else None
                    )
                )
            else:
                event.note("members")
        if event.bad:
            columns.note("the run_started event")
        return found

    def run_events(self, run_id: str) -> list[dict[str, Any]]:
        """Payloads in emission order, every text in place; `panel_cli.events.parse_event`
        turns each back into the event a live run emitted (its `messages`, if any, are in
        `run_calls`). An event whose row cannot be read is left out."""
        events = self._query("SELECT * FROM events WHERE run_id = ? ORDER BY seq", (run_id,))
        run = next(iter(self._query("SELECT * FROM runs WHERE id = ?", (run_id,))), None)
        calls = self._query("SELECT * FROM calls WHERE run_id = ?", (run_id,))
        decision = next(iter(self._query("SELECT * FROM decisions WHERE run_id = ?", (run_id,))), None)
        ids: list[Any] = [call["response_text"] for call in calls]
        for row in events:
            ids += _refs(row["payload_json"])
        if run is not None:
            ids += [run["question_text"], run["final_answer_text"], run["config_text"], *_refs(run["result_json"])]
        texts = self._texts(ids)
        claims: dict[Any, dict[str, Any]] = {}
        for call in calls:
            fields = call_fields(call, texts)
            claims.update((seq, fields) for seq in (call["seq"], call["started_seq"]) if seq is not None)
        if run is not None:
            claims.update((run[seq], {}) for seq in ("started_seq", "ended_seq") if run[seq] is not None)
        if decision is not None and decision["seq"] is not None:
            with contextlib.suppress(ValueError, TypeError, RecursionError):
                claims[decision["seq"]] = decision_fields(decision)
        payloads = []
        for row in events:
            columns = Columns(row)
            kept = texts.json_column(columns, "payload_json", {})
            if columns.bad or not isinstance(kept, dict) or not isinstance(row["type"], str):
                continue
            given = claims.get(row["seq"])
            try:
                if given == {} and run is not None:
                    given = run_fields(run, texts, row["type"])
                payloads.append(restore(envelope(row, run_id), kept, given))
            except (ValueError, TypeError, AttributeError, RecursionError):
                continue
        return payloads

    def list_decisions(self, limit: int = 20, topic: str | None = None) -> list[DecisionRecord]:
        """Newest first; with `topic`, only decisions whose topic holds it, in any case. A
        decision whose row cannot be read is left out."""
        rows = self._query("SELECT * FROM decisions ORDER BY decided_at DESC")
        wanted = topic.casefold() if topic else None
        found: list[DecisionRecord] = []
        for row in rows:
            decision = _decision(row)
            if decision is None or (wanted is not None and wanted not in decision.topic.casefold()):
                continue
            found.append(decision)
            if len(found) == limit:
                break
        return found

    def run_retallies(self, run_id: str) -> list[RetallyRecord]:
        """A run's recounts, oldest first; one whose row cannot be read is left out."""
        rows = self._query("SELECT * FROM retallies WHERE run_id = ? ORDER BY created_at, rowid", (run_id,))
        records = []
        for row in rows:
            columns = Columns(row)
            try:
                result = load_json(row["result_json"] or "{}")
            except ValueError:
                continue
            created = columns.time("created_at")
            quorum = columns.whole("quorum")
            if columns.bad or created is None or quorum is None or not isinstance(result, dict):
                continue
            records.append(
                RetallyRecord(
                    id=str(row["id"]),
                    run_id=run_id,
                    method=columns.text("method", "") or "",
                    threshold=columns.real("threshold"),
                    quorum=quorum,
                    winner=columns.text("winner"),
                    leader_override=bool(row["leader_override"]),
                    result=result,
                    created_at=created,
                )
            )
        return records

    def run_calls(self, run_id: str) -> list[CallRecord]:
        """Every call in the order it ended, its messages and response whole. `truncated` is
        NULL for a failed call. A call whose row cannot be read keeps what can be."""
        rows = self._query("SELECT * FROM calls WHERE run_id = ? ORDER BY ts, seq", (run_id,))
        ids: list[Any] = []
        for row in rows:
            ids += [row["response_text"], *_refs(row["request_json"])]
        texts = self._texts(ids)
        calls = []
        for row in rows:
            columns = Columns(row)
            messages = texts.json_column(columns, "request_json", [])
            calls.append(
                CallRecord(
                    id=str(row["id"]),
                    run_id=run_id,
                    member=columns.text("member", "") or "",
                    model=columns.text("model", "") or "",
                    stage=columns.text("stage", "") or "",
                    round=columns.whole("round"),
                    about=columns.text("about"),
                    messages=[message for message in messages if isinstance(message, dict)]
                    if isinstance(messages, list)
                    else [],
                    response=texts.column(columns, "response_text"),
                    truncated=bool(row["truncated"]),
                    request_hash=columns.text("request_hash"),
                    reused=bool(row["reused"]),
                    late=bool(row["late"]),
                    tokens_in=columns.whole("tokens_in"),
                    tokens_out=columns.whole("tokens_out"),
                    cost=columns.real("cost"),
                    latency=columns.real("latency"),
                    error_kind=columns.text("error_kind"),
                    error=columns.text("error"),
                    detail=columns.text("detail"),
                    attempts=columns.whole("attempts", 1) or 1,
                    ts=columns.time("ts") or 0.0,
                )
            )
        return calls

    def answered_calls(self, run_id: str) -> dict[str, list[CallRecord]]:
        """The run's answered calls by request hash, in the order they ended, for a resumed
        run to take instead of paying for them again. Every one is kept, not one per hash: a
        run that asked the same thing twice (two members on one model, a round whose prompt
        did not change) got two samples, and so does its resume. A late reply is left out: the
        run did not use it, so its resume asks again."""
        answered: dict[str, list[CallRecord]] = {}
        for call in self.run_calls(run_id):
            if call.request_hash and call.error_kind is None and not call.late and call.response is not None:
                answered.setdefault(call.request_hash, []).append(call)
        return answered

    def stats(self) -> StatsReport:
        """Totals over every run. SQL's SUM skips NULLs and is NULL when all are: an unknown
        cost stays unknown. Only numbers are added: a damaged row's text is left out."""
        from panel_cli.store.stats import ModelUsage, MonthUsage, ProtocolUsage, StatsReport, Usage

        # total() rather than sum(): a sum past SQLite's integers is a float, not an error.
        number = "CASE WHEN typeof({0}) IN ('integer', 'real') THEN {0} END"
        known = "CASE WHEN count({0}) THEN total({0}) END"
        calls, tokens, cost = (number.format(column) for column in ("calls", "tokens", "cost"))
        usage = (
            f"count(*) AS runs, total({calls}) AS calls, {known.format(tokens)} AS tokens, {known.format(cost)} AS cost"
        )
        (total,) = self._query(f"SELECT {usage}{_GROUP_LEDGER.format('')} FROM runs r")
        by_protocol = self._query(
            f"SELECT CAST(protocol AS TEXT) AS protocol, {usage}"
            f"{_GROUP_LEDGER.format('AND r2.protocol IS r.protocol')} FROM runs r GROUP BY 1 ORDER BY 1"
        )
        same_month = "AND substr(CAST(r2.started_at AS TEXT), 1, 7) IS substr(CAST(r.started_at AS TEXT), 1, 7)"
        by_month = self._query(
            f"SELECT substr(CAST(started_at AS TEXT), 1, 7) AS month, {usage}{_GROUP_LEDGER.format(same_month)}"
            " FROM runs r GROUP BY month ORDER BY month"
        )
        tokens_in, tokens_out, call_cost = (number.format(column) for column in ("tokens_in", "tokens_out", "cost"))
        # A call the budget refused made no request: it is no call here, as in a run's count.
        by_model = self._query(
            "SELECT CAST(model AS TEXT) AS model, count(DISTINCT run_id) AS runs, count(*) AS calls,"
            f" CASE WHEN count({tokens_in}) + count({tokens_out}) THEN total({tokens_in}) + total({tokens_out}) END"
            f" AS tokens, {known.format(call_cost)} AS cost,"
            " sum(substr(CAST(model AS TEXT), 1, 5) IS NOT 'demo/') AS real_calls,"
            f" CASE WHEN sum({UNPRICED_CALL}) THEN CAST(model AS TEXT) END AS unpriced,"
            " sum(c.late IS 1) AS late FROM calls c WHERE error_kind IS NOT 'budget' GROUP BY 1 ORDER BY 1"
        )
        return StatsReport(
            total=Usage(**_usage(total)),
            by_model=[ModelUsage(model=row["model"] or "", **_usage(row)) for row in by_model],
            by_protocol=[ProtocolUsage(protocol=row["protocol"] or "", **_usage(row)) for row in by_protocol],
            by_month=[MonthUsage(month=row["month"] or "", **_usage(row)) for row in by_month],
        )


def _usage(row: RowLike) -> dict[str, Any]:
    """A sum past what a float holds is unknown rather than infinite; the cost is read as a
    run's is (`ledger_cost`)."""
    cost = row["cost"]
    tokens = row["tokens"]
    calls = int(row["calls"]) if isinstance(row["calls"], int | float) and math.isfinite(row["calls"]) else 0
    unpriced = sorted(str(row["unpriced"]).split(",")) if row["unpriced"] is not None else []
    known = float(cost) if isinstance(cost, int | float) and math.isfinite(cost) else None
    real_calls = int(row["real_calls"] or 0)
    cost, basis = ledger_cost(calls, real_calls, known, unpriced)
    return {
        "runs": int(row["runs"]),
        "calls": calls,
        "tokens": int(tokens) if isinstance(tokens, int | float) and math.isfinite(tokens) else None,
        "cost": cost,
        "cost_basis": basis,
        "unpriced": unpriced,
        "late": int(row["late"] or 0),
    }


def _decision(row: RowLike) -> DecisionRecord | None:
    """A decision row as a record; None for one that cannot be read."""
    columns = Columns(row)
    try:
        counts = load_json(row["vote_counts_json"] or "{}")
    except ValueError:
        return None
    decided = columns.time("decided_at")
    numbers = {name: columns.whole(name, 0) for name in ("total_votes", "ballots_cast")}
    fields = {name: columns.text(name) for name in ("topic", "winner", "method", "leader")}
    valid_counts = isinstance(counts, dict) and all(
        isinstance(count, int) and not isinstance(count, bool) for count in counts.values()
    )
    if columns.bad or decided is None or not valid_counts:
        return None
    return DecisionRecord(
        run_id=str(row["run_id"]),
        topic=fields["topic"] or "",
        winner=fields["winner"],
        vote_counts=counts,
        method=fields["method"] or "",
        total_votes=numbers["total_votes"] or 0,
        ballots_cast=numbers["ballots_cast"] or 0,
        leader=fields["leader"],
        leader_override=bool(row["leader_override"]),
        consensus_reached=bool(row["consensus_reached"]),
        decided_at=decided,
    )
