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
from collections.abc import Iterable
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
    """Open a transcript file, creating it if needed, and bring its schema forward.

    Every way a file can be unusable becomes a `UserError`: the person can pick another
    `--db` or upgrade panel, and a traceback would tell them neither."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(
            f"Cannot create the folder {path.parent} for the transcript database: {error.strerror}."
        ) from error
    db: sqlite3.Connection | None = None
    try:
        db = sqlite3.connect(path, isolation_level=None)
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        version = schema_version(db)
        if version > len(MIGRATIONS):
            raise UserError(
                f"{path} was written by a newer version of panel (schema version {version}, "
                f"this one knows up to {len(MIGRATIONS)}); upgrade panel to use it."
            )
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        migrate(db)
    except sqlite3.DatabaseError as error:
        if db is not None:
            db.close()
        if error.sqlite_errorname == "SQLITE_NOTADB":
            raise UserError(f"{path} is not a panel transcript database (it is not an SQLite file).") from error
        raise UserError(f"Cannot open the transcript database {path}: {error}.") from error
    except BaseException:
        if db is not None:
            db.close()
        raise
    db.row_factory = sqlite3.Row
    return db


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

    async def _insert_call(self, payload: dict[str, Any], messages: list[dict[str, Any]]) -> None:
        """One row for a finished or a failed call: each leaves the other's fields empty."""
        await self._db.execute(
            "INSERT INTO calls (id, run_id, member, model, stage, round, request_json, response, tokens_in,"
            " tokens_out, cost, latency, error_kind, error, attempts, ts)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                payload["call_id"],
                payload["run_id"],
                payload["member"],
                payload["model"],
                payload["stage"],
                payload["round"],
                _json(messages),
                payload.get("text"),
                payload.get("tokens_in"),
                payload.get("tokens_out"),
                payload.get("cost"),
                payload["latency"],
                payload.get("kind"),
                payload.get("message"),
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


class CallRecord(BaseModel):
    """One model call; a failed call has `error_kind` and `error` instead of a response."""

    id: str
    run_id: str
    member: str
    model: str
    stage: str
    round: int | None = None
    messages: list[dict[str, Any]]
    response: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None
    latency: float | None = None
    error_kind: str | None = None
    error: str | None = None
    attempts: int = 1
    ts: float


_SUMMARY_COLUMNS = "id, protocol, panel, question, status, started_at, finished_at, calls, tokens, cost"


class TranscriptReader:
    """Reads runs back for `panel history`, while a run may still be writing to the file."""

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self.path = path
        self._db = db

    @classmethod
    def open(cls, path: Path | str | None = None) -> TranscriptReader:
        """A file that does not exist reads as an empty store instead of being created,
        so a mistyped `--db` leaves nothing behind."""
        path = resolve_db_path(path)
        if path.exists():
            return cls(connect(path), path)
        empty = sqlite3.connect(":memory:", isolation_level=None)
        migrate(empty)
        empty.row_factory = sqlite3.Row
        return cls(empty, path)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> TranscriptReader:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def list_runs(self, limit: int = 20, status: RunStatus | None = None) -> list[RunSummary]:
        """Newest first."""
        where, params = ("WHERE status = ?", [status]) if status else ("", [])
        rows = self._db.execute(
            f"SELECT {_SUMMARY_COLUMNS} FROM runs {where} ORDER BY started_at DESC LIMIT ?", [*params, limit]
        ).fetchall()
        return [RunSummary.model_validate(dict(row)) for row in rows]

    def get_run(self, id_or_prefix: str) -> RunRecord:
        """Accepts any unique prefix of an id, as `git` does, since ids are long to type."""
        rows = self._db.execute("SELECT * FROM runs WHERE id = ?", (id_or_prefix,)).fetchall()
        if not rows:
            rows = self._db.execute(
                "SELECT * FROM runs WHERE substr(id, 1, ?) = ? ORDER BY started_at DESC LIMIT 6",
                (len(id_or_prefix), id_or_prefix),
            ).fetchall()
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
        neighbours = self._db.execute(
            "SELECT (SELECT max(id) FROM runs WHERE id < :id), (SELECT min(id) FROM runs WHERE id > :id)",
            {"id": run_id},
        ).fetchone()
        shared = max((len(os.path.commonprefix([run_id, other])) for other in neighbours if other), default=0)
        return run_id[: max(min_length, shared + 1)]

    def _members(self, run_id: str) -> list[RunMember]:
        """The members live in the `run_started` event rather than a column of their own."""
        row = self._db.execute(
            "SELECT payload_json FROM events WHERE run_id = ? AND type = 'run_started'", (run_id,)
        ).fetchone()
        if row is None:
            return []
        return [RunMember.model_validate(member) for member in json.loads(row["payload_json"])["members"]]

    def run_events(self, run_id: str) -> list[dict[str, Any]]:
        """Payloads in emission order; `panel_cli.events.parse_event` turns each back into
        the event a live run emitted (its `messages`, if any, are in `run_calls`)."""
        rows = self._db.execute("SELECT payload_json FROM events WHERE run_id = ? ORDER BY seq", (run_id,))
        return [json.loads(row["payload_json"]) for row in rows]

    def run_calls(self, run_id: str) -> list[CallRecord]:
        rows = self._db.execute("SELECT * FROM calls WHERE run_id = ? ORDER BY ts, rowid", (run_id,))
        return [
            CallRecord.model_validate({**dict(row), "messages": json.loads(row["request_json"] or "[]")})
            for row in rows
        ]
