"""The transcript store: one SQLite file that holds every run.

Writing and reading are split. `TranscriptStore` is an async EventBus subscriber that
commits each event as it arrives, so Ctrl-C or a crash keeps everything up to that
moment. `TranscriptReader` uses the standard library driver, so `panel history` starts
without an event loop. WAL mode lets the two work on the same file at the same time.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

import aiosqlite
from platformdirs import user_data_dir
from pydantic import BaseModel

from panel_cli.errors import UserError
from panel_cli.redact import redact_obj, secret_values
from panel_cli.store.migrations import MIGRATIONS, migrate, schema_version

if TYPE_CHECKING:
    from panel_cli.events import BaseEvent

RunStatus = Literal["running", "finished", "no_answer", "failed", "interrupted"]

BUSY_TIMEOUT_MS = 5000


def default_db_path() -> Path:
    """`PANEL_DB` lets a shell or a test point every command at one file without `--db`."""
    if env := os.environ.get("PANEL_DB"):
        return Path(env).expanduser()
    return Path(user_data_dir("panel", appauthor=False)) / "panel.db"


def resolve_db_path(db: Path | str | None = None) -> Path:
    """A `--db` given on the command line wins over `PANEL_DB` and the default."""
    return Path(db).expanduser() if db else default_db_path()


def connect(path: Path) -> sqlite3.Connection:
    """Open a transcript file for writing, creating it if needed, and bring its schema forward.

    Every way a file can be unusable becomes a `UserError`: the person can pick another
    `--db` or upgrade panel, and a traceback would tell them neither."""
    _refuse_folder(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(
            f"Cannot create the folder {path.parent} for the transcript database: {error.strerror}."
        ) from error
    _check_writable(path)
    db: sqlite3.Connection | None = None
    try:
        db = sqlite3.connect(path, isolation_level=None)
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        version = schema_version(db)
        if version > len(MIGRATIONS):
            raise _newer_schema_error(path, version)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        migrate(db)
    except sqlite3.DatabaseError as error:
        if db is not None:
            db.close()
        raise database_error(path, error, writing=True) from error
    except BaseException:
        if db is not None:
            db.close()
        raise
    db.row_factory = sqlite3.Row
    return db


def database_error(path: Path, error: sqlite3.Error, *, writing: bool) -> UserError:
    """One sentence for each way SQLite refuses a file, saying what the person can do."""
    name = _error_name(error)
    if name == "SQLITE_NOTADB":
        return UserError(f"{path} is not a panel transcript database (it is not an SQLite file).")
    if name.startswith("SQLITE_CORRUPT"):
        return UserError(
            f"The transcript database {path} is damaged ({error}); move it aside, or pick another file with --db or PANEL_DB."
        )
    if writing and name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN")):
        return UserError(
            f"Cannot write to the transcript database {path} ({error}); make the file and its folder writable,"
            " or pick another file with --db or PANEL_DB."
        )
    return UserError(f"Cannot {'open' if writing else 'read'} the transcript database {path}: {error}.")


def _newer_schema_error(path: Path, version: int) -> UserError:
    return UserError(
        f"{path} was written by a newer version of panel (schema version {version}, "
        f"this one knows up to {len(MIGRATIONS)}); upgrade panel to use it."
    )


def _refuse_folder(path: Path) -> None:
    if path.is_dir():
        raise UserError(f"{path} is a folder; the transcript database must be a file (give one with --db or PANEL_DB).")


def _check_writable(path: Path) -> None:
    """SQLite opens a write-protected file read-only without a word and fails at the first
    write, in the middle of a run; asking the system first fails before any model is called.
    Opening for writing is the real test (a permission check says nothing of an immutable
    file or a read-only mount)."""
    try:
        descriptor = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return
    except OSError as error:
        raise UserError(
            f"The transcript database {path} is write-protected ({error.strerror}); make it writable,"
            " or pick another file with --db or PANEL_DB."
        ) from error
    os.close(descriptor)


def open_read_only(path: Path) -> sqlite3.Connection:
    """Open an existing transcript file without writing anything, not even SQLite's own files.

    While a writer has the file open, its -wal file exists and holds the latest commits, so
    the reader joins it with `mode=ro`. Otherwise the main file holds everything, and
    `immutable=1` reads it without creating the -wal and -shm files that any connection to
    a WAL database creates (files a read-only folder refuses, and that, made by another user,
    would lock the owner's next run out). When `mode=ro` cannot create the -shm file of a
    -wal left in a read-only folder, `immutable=1` still reads what the main file holds."""
    uri = path.resolve().as_uri()
    if Path(f"{path}-wal").exists():
        try:
            return _open_uri(f"{uri}?mode=ro")
        except sqlite3.DatabaseError as error:
            if not _error_name(error).startswith(("SQLITE_CANTOPEN", "SQLITE_READONLY")):
                raise database_error(path, error, writing=False) from error
    try:
        return _open_uri(f"{uri}?mode=ro&immutable=1")
    except sqlite3.DatabaseError as error:
        raise database_error(path, error, writing=False) from error


def _open_uri(uri: str) -> sqlite3.Connection:
    db = sqlite3.connect(uri, uri=True, isolation_level=None)
    try:
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        schema_version(db)  # SQLite opens lazily: a refusal shows at the first statement
    except BaseException:
        db.close()
        raise
    db.row_factory = sqlite3.Row
    return db


def _error_name(error: sqlite3.Error) -> str:
    return getattr(error, "sqlite_errorname", None) or ""


def _empty_store() -> sqlite3.Connection:
    """What a missing or blank file reads as: the current schema with no runs."""
    empty = sqlite3.connect(":memory:", isolation_level=None)
    migrate(empty)
    empty.row_factory = sqlite3.Row
    return empty


class TranscriptStore:
    """Writes a run as it happens; subscribe it to the run's EventBus.

    The bus awaits each subscriber, and each event is committed before `__call__`
    returns, so the engine never gets ahead of what is on disk."""

    def __init__(self, db: aiosqlite.Connection, path: Path, secrets: list[str]) -> None:
        self.path = path
        self._db = db
        self._secrets = secrets
        # Calls in a stage finish concurrently; one event's statements must commit together.
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, path: Path | str | None = None, *, secret_names: Iterable[str] = ()) -> TranscriptStore:
        """`secret_names` are the `api_key_env` variables a panel uses, whatever their
        names, so their values are redacted along with the usual `*_API_KEY` ones."""
        path = resolve_db_path(path)
        await asyncio.to_thread(lambda: connect(path).close())
        db = await aiosqlite.connect(path)
        await db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        await db.execute("PRAGMA synchronous = NORMAL")
        return cls(db, path, secret_values(secret_names))

    async def close(self) -> None:
        await self._db.close()

    async def __aenter__(self) -> TranscriptStore:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def __call__(self, event: BaseEvent) -> None:
        # Redacting the whole payload once means every column below is already clean.
        payload: dict[str, Any] = redact_obj(event.model_dump(mode="json"), self._secrets)
        messages = payload.pop("messages", [])
        async with self._lock:
            try:
                await self._write(payload, messages)
                await self._db.commit()
            except BaseException:
                await self._db.rollback()
                raise

    async def _write(self, payload: dict[str, Any], messages: list[dict[str, Any]]) -> None:
        run_id = payload["run_id"]
        if payload["type"] == "run_started":
            await self._db.execute(
                "INSERT INTO runs (id, protocol, panel, question, config_json, status, started_at, calls)"
                " VALUES (?, ?, ?, ?, ?, 'running', ?, 0)",
                (
                    run_id,
                    payload["protocol"],
                    payload["panel"],
                    payload["question"],
                    _json(payload["config"]),
                    payload["ts"],
                ),
            )
        await self._db.execute(
            "INSERT INTO events (run_id, seq, ts, type, payload_json) VALUES (?, ?, ?, ?, ?)",
            (run_id, payload["seq"], payload["ts"], payload["type"], _json(payload)),
        )
        match payload["type"]:
            case "call_finished" | "call_failed":
                await self._insert_call(payload, messages)
                await self._update_totals(run_id)
            case "run_finished":
                await self._db.execute(
                    "UPDATE runs SET status = ?, final_answer = ?, result_json = ?, finished_at = ? WHERE id = ?",
                    (
                        "finished" if payload["reached_answer"] else "no_answer",
                        payload["final_answer"],
                        _json(payload["result"]),
                        payload["ts"],
                        run_id,
                    ),
                )
            case "run_failed":
                await self._db.execute(
                    "UPDATE runs SET status = 'failed', error = ?, finished_at = ? WHERE id = ?",
                    (payload["message"], payload["ts"], run_id),
                )
            case "run_interrupted":
                await self._db.execute(
                    "UPDATE runs SET status = 'interrupted', finished_at = ? WHERE id = ?", (payload["ts"], run_id)
                )
            case "decision_recorded":
                await self._db.execute(
                    "INSERT OR REPLACE INTO decisions (run_id, topic, winner, vote_counts_json, method, total_votes,"
                    " ballots_cast, leader, leader_override, consensus_reached, decided_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        run_id,
                        payload["topic"],
                        payload["winner"],
                        _json(payload["vote_counts"]),
                        payload["method"],
                        payload["total_votes"],
                        payload["ballots_cast"],
                        payload["leader"],
                        int(payload["leader_override"]),
                        int(payload["consensus_reached"]),
                        payload["ts"],
                    ),
                )

    async def _insert_call(self, payload: dict[str, Any], messages: list[dict[str, Any]]) -> None:
        """One row for a finished or a failed call: each leaves the other's fields empty. A
        skipped member made no call, so `member_skipped` is kept as an event only."""
        await self._db.execute(
            "INSERT INTO calls (id, run_id, member, model, stage, round, request_json, response, truncated,"
            " tokens_in, tokens_out, cost, latency, error_kind, error, detail, attempts, ts)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                payload["call_id"],
                payload["run_id"],
                payload["member"],
                payload["model"],
                payload["stage"],
                payload["round"],
                _json(messages),
                payload.get("text"),
                int(payload["truncated"]) if "truncated" in payload else None,
                payload.get("tokens_in"),
                payload.get("tokens_out"),
                payload.get("cost"),
                payload["latency"],
                payload.get("kind"),
                payload.get("message"),
                payload.get("detail"),
                payload["attempts"],
                payload["ts"],
            ),
        )

    async def _update_totals(self, run_id: str) -> None:
        """Kept current after every call, so a run that crashed still shows what it spent.
        SQL's SUM skips NULLs and is NULL when all are: an unknown cost stays unknown
        rather than becoming 0, and a partly known one is the sum of what is known."""
        async with self._db.execute(
            "SELECT COUNT(*), SUM(tokens_in), SUM(tokens_out), SUM(cost) FROM calls WHERE run_id = ?", (run_id,)
        ) as cursor:
            row = await cursor.fetchone()
        assert row is not None
        calls, tokens_in, tokens_out, cost = row
        tokens = None if tokens_in is None and tokens_out is None else (tokens_in or 0) + (tokens_out or 0)
        await self._db.execute(
            "UPDATE runs SET calls = ?, tokens = ?, cost = ? WHERE id = ?", (calls, tokens, cost, run_id)
        )


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


class RunSummary(BaseModel):
    """A line of `panel history list`. `tokens` and `cost` are None when no call reported them."""

    id: str
    protocol: str
    panel: str
    question: str
    status: RunStatus
    started_at: float
    finished_at: float | None = None
    calls: int = 0
    tokens: int | None = None
    cost: float | None = None

    @property
    def reached_answer(self) -> bool:
        return self.status == "finished"

    @property
    def duration_s(self) -> float | None:
        """Wall time; None while the run is still going (or crashed before it ended)."""
        return None if self.finished_at is None else self.finished_at - self.started_at


class RunMember(BaseModel):
    """`events.MemberInfo` as stored. Declared here so that reading history does not
    build every event model, which costs `panel history` a noticeable part of its start."""

    name: str
    model: str
    label: str | None = None


class RunRecord(RunSummary):
    members: list[RunMember]
    config: dict[str, Any]
    final_answer: str | None = None
    result: dict[str, Any] | None = None
    error: str | None = None

    @property
    def warnings(self) -> list[Any]:
        """The warnings the protocol put in its result; a run that never finished has none."""
        found = (self.result or {}).get("warnings")
        return found if isinstance(found, list) else []


class CallRecord(BaseModel):
    """One model call; a failed call has `error_kind`, `error` and the provider's raw
    `detail` instead of a response. A `truncated` response is the beginning of the reply."""

    id: str
    run_id: str
    member: str
    model: str
    stage: str
    round: int | None = None
    messages: list[dict[str, Any]]
    response: str | None = None
    truncated: bool = False
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None
    latency: float | None = None
    error_kind: str | None = None
    error: str | None = None
    detail: str | None = None
    attempts: int = 1
    ts: float


class DecisionRecord(BaseModel):
    """A decide run's outcome as `panel history decisions` lists it; its id is the run's."""

    run_id: str
    topic: str
    winner: str | None = None
    vote_counts: dict[str, int]
    method: str
    total_votes: int
    ballots_cast: int
    leader: str | None = None
    leader_override: bool
    consensus_reached: bool
    decided_at: float


class RetallyRecord(BaseModel):
    """One recount of a stored vote by `panel history retally`; `result` is what it printed."""

    id: str
    run_id: str
    method: str
    threshold: float | None = None
    quorum: int
    winner: str | None = None
    leader_override: bool = False
    result: dict[str, Any]
    created_at: float


def record_retally(path: Path, record: RetallyRecord) -> None:
    """Keep a recount beside the run it recounted; the run itself is never touched. Opened
    for writing (and migrated) only here, so every other `history` command stays read-only."""
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
                _json(record.result),
                record.created_at,
            ),
        )
    except sqlite3.DatabaseError as error:
        raise database_error(path, error, writing=True) from error
    finally:
        db.close()


_SUMMARY_COLUMNS = "id, protocol, panel, question, status, started_at, finished_at, calls, tokens, cost"


class TranscriptReader:
    """Reads runs back for `panel history`, while a run may still be writing to the file.

    Reading never writes: the file is opened read-only and never migrated, so history works
    on a file the person cannot write (a read-only folder or mount, another user's file). A
    file from an older panel is read as it is when its schema allows it."""

    def __init__(self, db: sqlite3.Connection, path: Path, version: int = len(MIGRATIONS)) -> None:
        self.path = path
        self.version = version
        self._db = db

    @classmethod
    def open(cls, path: Path | str | None = None) -> TranscriptReader:
        """A file that does not exist reads as an empty store instead of being created,
        so a mistyped `--db` leaves nothing behind."""
        path = resolve_db_path(path)
        _refuse_folder(path)
        if not path.exists():
            return cls(_empty_store(), path)
        db = open_read_only(path)
        try:
            version = schema_version(db)
            if version > len(MIGRATIONS):
                raise _newer_schema_error(path, version)
            if version == 0:
                if db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                    raise UserError(f"{path} is an SQLite file but not a panel transcript database.")
                # A blank file, or one a writer has created and not yet set up: no runs yet.
                db.close()
                return cls(_empty_store(), path)
        except sqlite3.DatabaseError as error:
            db.close()
            raise database_error(path, error, writing=False) from error
        except BaseException:
            db.close()
            raise
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
        """Every read goes through here, so damage found on any page, or a table an older
        schema lacks, is one sentence rather than a traceback."""
        try:
            return self._db.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as error:
            missing = str(error).startswith(("no such table", "no such column"))
            if isinstance(error, sqlite3.OperationalError) and missing and self.version < len(MIGRATIONS):
                raise UserError(
                    f"{self.path} was written by an older panel (schema version {self.version}) and cannot be read"
                    f" as it is; run any protocol command with it (for example `panel confer FILE --db {self.path}`)"
                    " to upgrade it."
                ) from error
            raise database_error(self.path, error, writing=False) from error

    def count_runs(self, status: RunStatus | None = None) -> int:
        where, params = ("WHERE status = ?", [status]) if status else ("", [])
        return int(self._query(f"SELECT count(*) FROM runs {where}", params)[0][0])

    def list_runs(self, limit: int = 20, status: RunStatus | None = None) -> list[RunSummary]:
        """Newest first."""
        where, params = ("WHERE status = ?", [status]) if status else ("", [])
        rows = self._query(
            f"SELECT {_SUMMARY_COLUMNS} FROM runs {where} ORDER BY started_at DESC LIMIT ?", [*params, limit]
        )
        return [RunSummary.model_validate(dict(row)) for row in rows]

    def get_run(self, id_or_prefix: str) -> RunRecord:
        """Accepts any unique prefix of an id, as `git` does, since ids are long to type."""
        rows = self._query("SELECT * FROM runs WHERE id = ?", (id_or_prefix,))
        if not rows:
            rows = self._query(
                "SELECT * FROM runs WHERE substr(id, 1, ?) = ? ORDER BY started_at DESC LIMIT 6",
                (len(id_or_prefix), id_or_prefix),
            )
        if not rows:
            raise UserError(f"No run has the id '{id_or_prefix}'; `panel history list` shows the stored runs.")
        if len(rows) > 1:
            matches = ", ".join(row["id"] for row in rows[:5]) + (", …" if len(rows) > 5 else "")
            raise UserError(f"The id '{id_or_prefix}' matches several runs ({matches}); give more of it.")
        row = rows[0]
        return RunRecord.model_validate(
            {
                **dict(row),
                "members": self._members(row["id"]),
                "config": json.loads(row["config_json"] or "{}"),
                "result": json.loads(row["result_json"]) if row["result_json"] else None,
            }
        )

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
        if not rows:
            return []
        return [RunMember.model_validate(member) for member in json.loads(rows[0]["payload_json"])["members"]]

    def run_events(self, run_id: str) -> list[dict[str, Any]]:
        """Payloads in emission order; `panel_cli.events.parse_event` turns each back into
        the event a live run emitted (its `messages`, if any, are in `run_calls`)."""
        rows = self._query("SELECT payload_json FROM events WHERE run_id = ? ORDER BY seq", (run_id,))
        return [json.loads(row["payload_json"]) for row in rows]

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
            records.append(RetallyRecord.model_validate(fields))
        return records

    def run_calls(self, run_id: str) -> list[CallRecord]:
        """`truncated` is NULL for a failed call and absent from a file that predates it."""
        rows = self._query("SELECT * FROM calls WHERE run_id = ? ORDER BY ts, rowid", (run_id,))
        calls = []
        for row in rows:
            fields = dict(row)
            fields["truncated"] = bool(fields.get("truncated"))
            fields["messages"] = json.loads(fields["request_json"] or "[]")
            calls.append(CallRecord.model_validate(fields))
        return calls
