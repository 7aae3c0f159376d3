"""litellm's import (seconds), started in a thread as soon as a run knows it will call a model
that is not a demo persona, so it overlaps the checks, the question and the store that need
no model. A run of demo personas alone never imports it."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from panel_cli.config import Panel


class GatewayLoader:
    """litellm's import, in a thread, started once a run's panel is known to need it (`start`).

    It says nothing itself. `waiting`, given by a caller that shows something while a wait
    lasts (the command line's spinner), is entered around a wait that has to block."""

    def __init__(self, waiting: Callable[[], AbstractContextManager[object]] | None = None) -> None:
        self._waiting = waiting
        self._module: ModuleType | None = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def start(self, panel: Panel) -> None:
        """Start the import if a member of the panel is not a demo persona (once)."""
        from panel_cli.models.routes import needs_litellm

        if needs_litellm(panel.callable_members()):
            self._begin()

    def _begin(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._load, name="panel-load-litellm", daemon=True)
            self._thread.start()

    def _load(self) -> None:
        from panel_cli.llm.gateway import load_litellm

        try:
            self._module = load_litellm()
        except BaseException as exc:  # re-raised in the caller's thread, where it can be reported
            self._error = exc

    def wait(self) -> ModuleType:
        """litellm, once imported, blocking until it is (inside `waiting`, if the import is still
        under way). A caller that needs it whatever the panel (an estimate counts tokens with
        it) starts the import here if nothing did."""
        self._begin()
        assert self._thread is not None
        if self._thread.is_alive():
            with self._waiting() if self._waiting is not None else contextlib.nullcontext():
                self._thread.join()
        return self._loaded()

    async def loaded(self) -> ModuleType:
        """`wait` for a caller on an event loop: the loop goes on serving others meanwhile."""
        self._begin()
        assert self._thread is not None
        if self._thread.is_alive():
            await asyncio.to_thread(self._thread.join)
        return self._loaded()

    def _loaded(self) -> ModuleType:
        if self._error is not None:
            raise self._error
        assert self._module is not None
        return self._module
