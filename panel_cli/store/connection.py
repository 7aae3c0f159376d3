"""Opening a transcript file: for writing (created if needed, WAL, brought forward), or for
reading (read-only, never migrated), and one sentence for each way SQLite refuses a file.

WAL mode lets readers and any number of writing processes work on the same file at once;
the busy timeout is how long one waits for another's transaction. A run writes through
`WritingConnection`: an aiosqlite connection, which keeps the file on a thread of its own.
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from panel_cli.errors import UserError
from panel_cli.store.migrations import SCHEMA_VERSION, TEXTS_VERSION, migrate, schema_version

if TYPE_CHECKING:
    import aiosqlite

PAGE_SIZE = 8192
# Long enough for a writer to wait out any other (eight processes writing at once, a purge).
BUSY_TIMEOUT_MS = 30000


T = TypeVar("T")


def connect(path: Path) -> sqlite3.Connection:
    """Open a transcript file for writing, creating it if needed, and bring its schema forward.

    Every way a file can be unusable becomes a `UserError`: the person can pick another
    `--db` or upgrade panel, and a traceback would tell them neither."""
    _refuse_not_a_file(path)
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
        if version > SCHEMA_VERSION:
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


class WritingConnection:
    """A transcript file open for writing on a thread of its own: an aiosqlite connection.

    aiosqlite runs everything sent to a connection on the connection's thread, in the order
    sent; each of its public methods sends one statement. A transaction of the writer is
    dozens of statements with reads between them, so it goes as one function through the
    same queue (`run`, by `aiosqlite.Connection._execute`, which every one of those methods is
    built on): one trip to the thread per transaction, not one per statement. The function
    then works on `db`, the sqlite3 connection of that thread.

    The thread is a daemon: a store nobody closed (a bug) must not hold the process open
    at its exit; what was committed is on disk either way."""

    def __init__(self, connection: aiosqlite.Connection, db: sqlite3.Connection, path: Path) -> None:
        self._connection = connection
        self.db = db
        self.path = path
        self._identity = _identity(path)

    @classmethod
    async def open(cls, path: Path) -> WritingConnection:
        """`connect(path)` on the new connection's thread; its UserError as it is. (aiosqlite,
        and asyncio with it, is imported here: `panel history` only reads.)"""
        import aiosqlite

        opened: list[sqlite3.Connection] = []

        def connect_here() -> sqlite3.Connection:
            opened.append(connect(path))
            return opened[0]

        connection = aiosqlite.Connection(connect_here, iter_chunk_size=64)
        connection._thread.daemon = True
        try:
            await connection
        except BaseException:
            # aiosqlite has told its thread to stop; it answers while this loop still runs.
            connection._thread.join()
            raise
        return cls(connection, opened[0], path)

    async def run(self, work: Callable[[], T]) -> T:
        """`work()` on the connection's thread, after everything sent before it."""
        result: T = await self._connection._execute(work)
        return result

    def moved(self) -> bool:
        """Whether the file at `path` is no longer the one this connection writes: deleted or
        replaced. SQLite would go on writing to the file it has open, which nobody can read."""
        return _identity(self.path) != self._identity

    async def close(self) -> None:
        await self._connection.close()


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino


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


def open_for_reading(path: Path) -> tuple[sqlite3.Connection, int]:
    """A connection that reads `path` without writing anything, and the file's schema version.

    A file that does not exist, or is blank, reads as an empty store instead of being created,
    so a mistyped `--db` leaves nothing behind. A file from an older panel is read through a
    copy in memory brought forward; the next run written to it brings the file itself forward."""
    _refuse_not_a_file(path)
    if not path.exists():
        return _empty_store(), SCHEMA_VERSION
    db = _open_read_only(path)
    try:
        version = schema_version(db)
        if version > SCHEMA_VERSION:
            raise _newer_schema_error(path, version)
        if version == 0:
            if db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                raise UserError(f"{path} is an SQLite file but not a panel transcript database.")
            # A blank file, or one a writer has created and not yet set up: no runs yet.
            db.close()
            return _empty_store(), SCHEMA_VERSION
        if version < SCHEMA_VERSION:
            db = _brought_forward(db, path, version)
    except sqlite3.DatabaseError as error:
        db.close()
        raise database_error(path, error, writing=False) from error
    except BaseException:
        db.close()
        raise
    return db, version


def _open_read_only(path: Path) -> sqlite3.Connection:
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


def _empty_store() -> sqlite3.Connection:
    """What a missing or blank file reads as: the current schema with no runs."""
    empty = sqlite3.connect(":memory:", isolation_level=None)
    migrate(empty)
    empty.row_factory = sqlite3.Row
    return empty


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


def database_error(path: Path, error: sqlite3.Error, *, writing: bool) -> UserError:
    """One sentence for each way SQLite refuses a file, saying what the person can do."""
    name = _error_name(error)
    if name == "SQLITE_NOTADB":
        return UserError(f"{path} is not a panel transcript database (it is not an SQLite file).")
    if name.startswith("SQLITE_CORRUPT"):
        return damaged_error(path, error)
    if writing and name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN")):
        return UserError(
            f"Cannot write to the transcript database {path} ({error}); make the file and its folder writable,"
            " or pick another file with --db or PANEL_DB."
        )
    return UserError(f"Cannot {'open' if writing else 'read'} the transcript database {path}: {error}.")


def damaged_error(path: Path, error: Exception) -> UserError:
    """A file whose rows refer to something it does not hold."""
    return UserError(
        f"The transcript database {path} is damaged ({error}); move it aside, or pick another file with --db or PANEL_DB."
    )


def _newer_schema_error(path: Path, version: int) -> UserError:
    return UserError(
        f"{path} was written by a newer version of panel (schema version {version}, "
        f"this one knows up to {SCHEMA_VERSION}); upgrade panel to use it."
    )


def _refuse_not_a_file(path: Path) -> None:
    """A folder, or a pipe, device or socket: opening a named pipe to read waits for a writer
    for ever (a signal only restarts the wait), and /dev/null reads as an empty store."""
    if path.is_dir():
        raise UserError(f"{path} is a folder; the transcript database must be a file (give one with --db or PANEL_DB).")
    if path.exists() and not path.is_file():
        raise UserError(
            f"{path} is not a regular file (a pipe, a device or a socket); the transcript database must be a file"
            " (give one with --db or PANEL_DB)."
        )


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


def _error_name(error: sqlite3.Error) -> str:
    return getattr(error, "sqlite_errorname", None) or ""
