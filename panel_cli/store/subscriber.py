"""`TranscriptStore`: the subscriber that writes a run into the store as it happens.

This is the whole of writing as the rest of panel sees it: open one, subscribe it to the
run's EventBus, close it. How the events become rows is `writer.RunWriter`'s; how they reach
the file (here a thread of the store's own and a transaction per event) is this module's
alone, so it can change without anything outside `panel_cli.store` noticing.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from panel_cli.redact import redact_obj, secret_values
from panel_cli.store.connection import connect, database_error
from panel_cli.store.paths import resolve_db_path
from panel_cli.store.processes import this_host
from panel_cli.store.writer import RunWriter

if TYPE_CHECKING:
    from panel_cli.events import BaseEvent


class TranscriptStore:
    """Writes a run as it happens; subscribe it to the run's EventBus.

    The bus awaits each subscriber, and each event is committed before `__call__`
    returns, so the engine never gets ahead of what is on disk: Ctrl-C or a crash keeps
    everything up to that moment. The writing happens on a thread of the store's own, one
    event at a time."""

    def __init__(self, db: sqlite3.Connection, path: Path, secrets: list[str]) -> None:
        self.path = path
        self._db = db
        self._secrets = secrets
        self._writer = RunWriter(db, pid=os.getpid(), host=this_host())
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="panel-store")
        # Calls in a stage finish concurrently; one event's statements must commit together.
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, path: Path | str | None = None, *, secret_names: Iterable[str] = ()) -> TranscriptStore:
        """`secret_names` are the `api_key_env` variables a panel uses, whatever their
        names, so their values are redacted along with the usual `*_API_KEY` ones."""
        path = resolve_db_path(path)
        db = await asyncio.to_thread(connect, path, threads=True)
        return cls(db, path, secret_values(secret_names))

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._thread, self._db.close)
        self._thread.shutdown()

    async def __aenter__(self) -> TranscriptStore:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def __call__(self, event: BaseEvent) -> None:
        # Redacting the whole payload once means every column and text is already clean.
        payload: dict[str, Any] = redact_obj(event.model_dump(mode="json"), self._secrets)
        messages = payload.pop("messages", None)
        async with self._lock:
            try:
                await asyncio.get_running_loop().run_in_executor(self._thread, self._writer.write, payload, messages)
            except sqlite3.DatabaseError as error:
                raise database_error(self.path, error, writing=True) from error
