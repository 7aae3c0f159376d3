"""The transcript store: one SQLite file that holds every run.

Writing and reading are split. `TranscriptStore` is an async EventBus subscriber that
commits each event as it arrives, so Ctrl-C or a crash keeps everything up to that
moment. `TranscriptReader` uses the standard library driver, so `panel history` starts
without an event loop. WAL mode lets the two work on the same file at the same time, and
any number of writing processes at once (each event is one short transaction).

How runs are laid out (each text once, times as ISO-8601 text) is in `texts`, `rows` and
`migrations`; this module is what the rest of panel uses.
"""

from __future__ import annotations

import json
import os
import random
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from panel_cli.errors import UserError
from panel_cli.redact import redact_obj, secret_values
from panel_cli.run_keys import TAGS_KEY
from panel_cli.store.migrations import MIGRATIONS, TEXTS_VERSION, migrate, schema_version
from panel_cli.store.processes import process_alive, this_host
from panel_cli.store.rows import call_fields, decision_fields, envelope, restore, run_fields
from panel_cli.store.texts import MissingTextError, TextCache, collect_garbage, decode, dumps, refs_in
from panel_cli.store.times import epoch, iso_time, optional_epoch

if TYPE_CHECKING:
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from panel_cli.run_keys import BaseEvent
    from panel_cli.store.stats import StatsReport
    from panel_cli.store.writer import RunWriter

RunStatus = Literal["running", "finished", "no_answer", "failed", "interrupted"]
ListedStatus = RunStatus | Literal["stale"]  # "stale": running, but its process is gone

Changed = TypeVar("Changed")

PAGE_SIZE = 8192
# Long enough for a writer to wait out any other (eight processes writing at once, a purge).
BUSY_TIMEOUT_MS = 30000
# The most runs a thread of follow-ups is read to, each way from a run: a loop of `--continue
# last` can make a long chain, and `history show` lists the thread a line a run.
THREAD_LIMIT = 100


def default_db_path() -> Path:
    """`PANEL_DB` lets a shell or a test point every command at one file without `--db`."""
    if env := os.environ.get("PANEL_DB"):
        return Path(env).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("panel", appauthor=False)) / "panel.db"


def resolve_db_path(db: Path | str | None = None) -> Path:
    """A `--db` given on the command line wins over `PANEL_DB` and the default."""
    return Path(db).expanduser() if db else default_db_path()


def connect(path: Path, *, threads: bool = False) -> sqlite3.Connection:
    """Open a transcript file for writing, creating it if needed, and bring its schema forward.
    `threads`: the connection is handed to another thread (the store's own).

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
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=not threads)
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        version = schema_version(db)
        if version > len(MIGRATIONS):
            raise _newer_schema_error(path, version)
        # A new file only: texts are a kilobyte or two, and fill 8 KiB pages better than 4.
        db.execute(f"PRAGMA page_size = {PAGE_SIZE}")
        _use_wal(db)
        db.execute("PRAGMA synchronous = NORMAL")
        migrate(db)
        if 0 < version < TEXTS_VERSION:
            _reclaim(db)
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


def _use_wal(db: sqlite3.Connection) -> None:
    """Put the file in WAL mode, which the file keeps: set by whichever panel opens a new file
    first. Panels opening the same new file at once can find it locked while another switches
    it, and there SQLite answers `database is locked` at once instead of waiting (its busy
    handler is skipped where waiting could deadlock), so the switch is asked again, for as
    long as the busy timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if not _error_name(error).startswith("SQLITE_BUSY") or time.monotonic() > deadline:
                raise
            time.sleep(random.uniform(0.005, 0.05))


def _reclaim(db: sqlite3.Connection) -> None:
    """Give back the space an older file's inline texts took, once, right after they moved to
    `texts`. Not worth waiting for: with another process reading, it is left for later."""
    db.execute("PRAGMA busy_timeout = 0")
    try:
        db.execute("VACUUM")
    except sqlite3.OperationalError:
        pass
    finally:
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")


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
    returns, so the engine never gets ahead of what is on disk. The writing happens on a
    thread of the store's own, one event at a time."""

    def __init__(self, db: sqlite3.Connection, path: Path, secrets: list[str]) -> None:
        # Here rather than at the top: `panel history` imports this module and needs neither.
        import asyncio
        from concurrent.futures import ThreadPoolExecutor

        from panel_cli.store.writer import RunWriter

        self.path = path
        self._db = db
        self._secrets = secrets
        self._writer: RunWriter = RunWriter(db, pid=os.getpid(), host=this_host())
        self._thread: ThreadPoolExecutor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="panel-store")
        # Calls in a stage finish concurrently; one event's statements must commit together.
        self._lock: asyncio.Lock = asyncio.Lock()

    @classmethod
    async def open(cls, path: Path | str | None = None, *, secret_names: Iterable[str] = ()) -> TranscriptStore:
        """`secret_names` are the `api_key_env` variables a panel uses, whatever their
        names, so their values are redacted along with the usual `*_API_KEY` ones."""
        import asyncio

        path = resolve_db_path(path)
        db = await asyncio.to_thread(connect, path, threads=True)
        return cls(db, path, secret_values(secret_names))

    async def close(self) -> None:
        import asyncio

        await asyncio.get_running_loop().run_in_executor(self._thread, self._db.close)
        self._thread.shutdown()

    async def __aenter__(self) -> TranscriptStore:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def __call__(self, event: BaseEvent) -> None:
        import asyncio

        # Redacting the whole payload once means every column and text is already clean.
        payload: dict[str, Any] = redact_obj(event.model_dump(mode="json"), self._secrets)
        messages = payload.pop("messages", None)
        async with self._lock:
            try:
                await asyncio.get_running_loop().run_in_executor(self._thread, self._writer.write, payload, messages)
            except sqlite3.DatabaseError as error:
                raise database_error(self.path, error, writing=True) from error


class RunSummary(BaseModel):
    """A line of `panel history list`. `tokens` and `cost` are None when no call reported them;
    `outcome` is the winner (confer, vote, decide) or the final answer's first line."""

    model_config = ConfigDict(defer_build=True)

    id: str
    protocol: str
    panel: str
    question: str
    status: ListedStatus
    started_at: float
    finished_at: float | None = None
    calls: int = 0
    tokens: int | None = None
    cost: float | None = None
    outcome: str | None = None
    parent_id: str | None = None

    @property
    def reached_answer(self) -> bool:
        return self.status == "finished"

    @property
    def duration_s(self) -> float | None:
        return None if self.finished_at is None else self.finished_at - self.started_at


class RunMember(BaseModel):
    """`events.MemberInfo` as stored. Declared here so that reading history does not
    build every event model, which costs `panel history` a noticeable part of its start."""

    model_config = ConfigDict(defer_build=True)

    name: str
    model: str
    label: str | None = None


class ThreadRun(BaseModel):
    """A run of a thread of follow-ups, as `history show` lists it beside the run it shows:
    `depth` is how many follow-up steps away it is (1: the run's parent, or a direct follow-up);
    `answer_preview` is its final answer on one short line (None: it has none)."""

    model_config = ConfigDict(defer_build=True)

    run_id: str
    parent_id: str | None = None
    depth: int
    protocol: str
    question: str
    status: ListedStatus
    started_at: float
    answer_preview: str | None = None


class RunThread(BaseModel):
    """Where a run sits among follow-ups: the runs it continues, oldest first, up to the first
    one no longer stored; and every follow-up of it and of those, depth first, each run's
    follow-ups in the order they started. At most THREAD_LIMIT each way."""

    model_config = ConfigDict(defer_build=True)

    ancestors: list[ThreadRun] = []
    follow_ups: list[ThreadRun] = []


class RunRecord(RunSummary):
    """A whole run. `pid` and `host` are the process that wrote it (None for a run from a
    file older than them). `thread`: the runs it follows up and its follow-ups."""

    members: list[RunMember]
    config: dict[str, Any]
    final_answer: str | None = None
    result: dict[str, Any] | None = None
    error: str | None = None
    pid: int | None = None
    host: str | None = None
    thread: RunThread = Field(default_factory=RunThread)

    @property
    def warnings(self) -> list[Any]:
        """The warnings the protocol put in its result; a run that never finished has none."""
        found = (self.result or {}).get("warnings")
        return found if isinstance(found, list) else []


class BatchRun(RunSummary):
    """A run of a `panel batch`, as resuming the batch reads it: its tags say which question
    it answered."""

    tags: dict[str, Any]
    final_answer: str | None = None
    failure_reason: str | None = None


class CallRecord(BaseModel):
    """One model call; a failed call has `error_kind`, `error` and the provider's raw
    `detail` instead of a response. A `truncated` response is the beginning of the reply.
    `request_hash` identifies the request, so a resumed run can reuse the reply."""

    model_config = ConfigDict(defer_build=True)

    id: str
    run_id: str
    member: str
    model: str
    stage: str
    round: int | None = None
    about: str | None = None
    messages: list[dict[str, Any]]
    response: str | None = None
    truncated: bool = False
    request_hash: str | None = None
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

    model_config = ConfigDict(defer_build=True)

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

    model_config = ConfigDict(defer_build=True)

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
                dumps(record.result),
                iso_time(record.created_at),
            ),
        )
    except sqlite3.DatabaseError as error:
        raise database_error(path, error, writing=True) from error
    finally:
        db.close()


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
    if listed_status(row) == "running" and row["host"] == this_host():
        raise UserError(f"Run {run_id} is still running (process {row['pid']}); stop it, or wait for it to end.")
    _delete_rows(db, [run_id])


def _delete_rows(db: sqlite3.Connection, run_ids: list[str]) -> None:
    ids = json.dumps(run_ids)
    for table in ("events", "calls", "decisions", "retallies", "tool_calls"):
        db.execute(f"DELETE FROM {table} WHERE run_id IN (SELECT value FROM json_each(?))", (ids,))
    db.execute("DELETE FROM runs WHERE id IN (SELECT value FROM json_each(?))", (ids,))


def listed_status(row: Mapping[str, Any]) -> ListedStatus:
    """A run's status as listed: `stale` for a `running` run whose process is gone from
    this host. A run written from another host stays `running`: nothing here can tell."""
    status = row["status"]
    mine = status == "running" and row["pid"] is not None and row["host"] == this_host()
    if mine and not process_alive(row["pid"], optional_epoch(row["started_at"])):
        return "stale"
    return status


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
    """Reads runs back for `panel history`, while a run may still be writing to the file.

    Reading never writes: the file is opened read-only and never migrated, so history works
    on a file the person cannot write (a read-only folder or mount, another user's file). A
    file from an older panel is read through a copy in memory brought forward; the next run
    written to it brings the file itself forward.

    Records are made with `model_construct`: their fields come from the store's own columns,
    typed by its schema, and validating them would first build each model's validator, which
    costs `history list` and `history show` a seventh of their time."""

    def __init__(self, db: sqlite3.Connection, path: Path, version: int = len(MIGRATIONS)) -> None:
        self.path = path
        self.version = version  # of the file, before any copy was brought forward
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
            if version < len(MIGRATIONS):
                db = _brought_forward(db, path, version)
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
            raise UserError(
                f"The transcript database {self.path} is damaged ({error}); move it aside, or pick another file with --db or PANEL_DB."
            ) from error
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
        from panel_cli.store.writer import preview  # the writer's code, which `history` rarely needs

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


def _brought_forward(db: sqlite3.Connection, path: Path, version: int) -> sqlite3.Connection:
    """A copy in memory of an older file, migrated; the file itself is left as it is."""
    memory = sqlite3.connect(":memory:", isolation_level=None)
    try:
        db.backup(memory)
        db.close()
        migrate(memory)
    except sqlite3.DatabaseError as error:
        memory.close()
        raise UserError(
            f"{path} was written by an older panel (schema version {version}) and cannot be brought forward: {error}."
        ) from error
    memory.row_factory = sqlite3.Row
    return memory


def __getattr__(name: str) -> Any:
    """The models of `stats()` are built when first asked for: `history list` never needs them."""
    if name in ("Usage", "ModelUsage", "ProtocolUsage", "MonthUsage", "StatsReport"):
        from panel_cli.store import stats

        return getattr(stats, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
