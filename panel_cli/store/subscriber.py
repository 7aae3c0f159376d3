"""`TranscriptStore`: the subscriber that writes runs into the store as they happen.

This is the whole of writing as the rest of panel sees it: open one, subscribe it to each
run's EventBus, close it. How the events become rows is `writer.RunWriter`'s; how and when
they reach the file is this module's alone, so it can change without anything outside
`panel_cli.store` noticing.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from panel_cli.errors import PanelError
from panel_cli.events import json_payload
from panel_cli.redact import secret_values
from panel_cli.store.connection import WritingConnection
from panel_cli.store.paths import resolve_db_path
from panel_cli.store.processes import this_host
from panel_cli.store.writer import RunWriter

if TYPE_CHECKING:
    from panel_cli.events import BaseEvent

# The events that move a run on: each waits until it, and everything before it, is on disk.
# A run exists on disk before its first call, a stage's answers before the next stage
# begins, and its end before the command goes on to print it.
MOVES_ON = frozenset({"run_started", "stage_started", "run_finished", "run_failed", "run_interrupted"})
SHOWN_RUNS = 3  # run ids a failure names before "and N more"


class StoreFailure(PanelError):
    """Part of what the store was given could not be written (the disk filled up, the file
    was deleted or made unwritable). The runs went on without it; exit code 1."""


class TranscriptStore:
    """Writes runs as they happen; subscribe it to each run's EventBus (any number at once).

    Events are queued in the order they come and written by a connection of the store's own
    (`WritingConnection`: aiosqlite's thread), all those queued meanwhile in one transaction:
    a tick's or a stage's worth at a time. A call's events only join the queue, so no request
    waits for the disk; the events that move a run on (`MOVES_ON`) wait for the commit that
    holds them. So an answer is on disk before its run moves to the next stage, and a run's
    end is on disk when the bus hands it on: Ctrl-C loses nothing, and a crash only what
    had not reached the file in the last moments of the stage under way, never an earlier
    stage. Each event arrives dumped and scrubbed by the bus (`json_payload`); the store
    scrubs again only the secrets the bus did not have.

    When a write fails, the runs go on: nothing more is written, every run under way is
    marked failed where its row still can be, and `close` raises `StoreFailure` saying which
    runs are not kept whole. A file deleted or replaced mid-run is found the same way."""

    def __init__(self, connection: WritingConnection, secrets: list[str]) -> None:
        self.path = connection.path
        self._connection = connection
        self._secrets = secrets
        self._writer = RunWriter(connection.db, pid=os.getpid(), host=this_host())
        self._queued: Queued | None = None
        self._writing: asyncio.Task[None] | None = None
        self._error: str | None = None  # why writing stopped
        self._moved = False  # it stopped because the file is not there any more
        self._seen: dict[str, None] = {}  # every run given, in order
        self._lost: dict[str, None] = {}  # runs not kept whole, in order
        self._marked: list[str] = []  # of those, the runs marked failed

    @classmethod
    async def open(cls, path: Path | str | None = None, *, secret_names: Iterable[str] = ()) -> TranscriptStore:
        """`secret_names` are the `api_key_env` variables a panel uses, whatever their
        names, so their values are redacted along with the usual `*_API_KEY` ones."""
        connection = await WritingConnection.open(resolve_db_path(path))
        return cls(connection, secret_values(secret_names))

    async def __call__(self, event: BaseEvent) -> None:
        self._seen.setdefault(event.run_id)
        if self._error is not None:
            self._lost.setdefault(event.run_id)
            return
        loop = asyncio.get_running_loop()
        if self._queued is None:
            self._queued = Queued([], loop.create_future())
        queued = self._queued
        payload = json_payload(event, self._secrets)
        queued.payloads.append(payload)
        if self._writing is None:
            self._writing = loop.create_task(self._write_queued())
        if payload["type"] in MOVES_ON:
            # Shielded: a cancelled run stops waiting, the transaction goes on.
            await asyncio.shield(queued.written)

    async def _drain(self) -> None:
        """Wait until everything given so far is written (or could not be)."""
        while self._writing is not None:
            await asyncio.shield(self._writing)

    async def close(self) -> None:
        """Write what is queued, close the file; raise `StoreFailure` if anything the store
        was given could not be written."""
        try:
            await self._drain()
            if self._error is None and self._connection.moved():
                await self._stop(FileMovedError())
        finally:
            await self._connection.close()
        if self._error is not None:
            raise StoreFailure(self._failure_message())

    async def __aenter__(self) -> TranscriptStore:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def _write_queued(self) -> None:
        """The writer: one transaction at a time, each holding everything queued meanwhile.
        Once writing has failed, what is queued is dropped."""
        try:
            while self._queued is not None:
                queued, self._queued = self._queued, None
                if self._error is None:
                    try:
                        await self._connection.run(partial(self._commit, queued.payloads))
                    except Exception as error:  # reported by `close`; a run goes on without its store
                        await self._stop(error)
                if self._error is not None:
                    self._lost.update(dict.fromkeys(payload["run_id"] for payload in queued.payloads))
                queued.written.set_result(None)
        finally:
            self._writing = None

    def _commit(self, payloads: list[dict[str, Any]]) -> None:
        """On the connection's thread: one transaction, then whether the file is still there."""
        self._writer.write_all(payloads)
        if self._connection.moved():
            raise FileMovedError

    async def _stop(self, error: Exception) -> None:
        """Writing failed: nothing more is written, and the runs under way are marked failed
        where they still can be."""
        self._moved = isinstance(error, FileMovedError)
        self._error = str(error) if isinstance(error, sqlite3.Error) else f"{type(error).__name__}: {error}"
        if self._moved:  # every run written so far went with the file
            self._lost.update(self._seen)
            return
        reason = f"the transcript database could not be written: {self._error}"
        try:
            self._marked = await self._connection.run(partial(self._writer.give_up, reason, time.time()))
        except Exception:
            self._marked = []
        self._lost.update(dict.fromkeys(self._marked))

    def _failure_message(self) -> str:
        lost = list(self._lost)
        if self._moved:
            return (
                f"The transcript database {self.path} was deleted or replaced while panel was writing it:"
                f" {_runs(lost)} not kept."
            )
        marked = [run for run in lost if run in self._marked]
        others = [run for run in lost if run not in self._marked]
        parts = [f"{_runs(marked)} kept up to that point, marked failed"] if marked else []
        parts += [f"{_runs(others)} not kept whole"] if others else []
        return f"Could not write to the transcript database {self.path} ({self._error}): {'; '.join(parts)}."


@dataclass
class Queued:
    """The events queued for the next transaction; `written` is done once it is committed (or
    has failed)."""

    payloads: list[dict[str, Any]]
    written: asyncio.Future[None]


class FileMovedError(Exception):
    """The file the store writes is no longer at its path."""


def _runs(ids: list[str]) -> str:
    """`run a1b2 is`, `runs a1b2 and c3d4 are`, `runs a, b, c and 4 more are`."""
    if len(ids) <= 1:
        return f"run {ids[0]} is" if ids else "no run is"
    shown = ids[:SHOWN_RUNS]
    rest = f"{len(ids) - SHOWN_RUNS} more" if len(ids) > SHOWN_RUNS else shown.pop()
    return f"runs {', '.join(shown)} and {rest} are"
