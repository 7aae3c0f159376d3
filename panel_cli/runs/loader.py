"""litellm's import (seconds), started in a thread as soon as a run knows it will call a model,
so it overlaps the checks, the question and the store that need no model."""

from __future__ import annotations

import threading
from types import ModuleType

from rich.console import Console


class GatewayLoader:
    """litellm's import, under way in a thread from the moment this is made."""

    def __init__(self) -> None:
        self._module: ModuleType | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._load, name="panel-load-litellm", daemon=True)
        self._thread.start()

    def _load(self) -> None:
        from panel_cli.llm.gateway import load_litellm

        try:
            self._module = load_litellm()
        except BaseException as exc:  # re-raised in the main thread, where it can be reported
            self._error = exc

    def wait(self, console: Console, show_progress: bool) -> ModuleType:
        """litellm, once loaded; a spinner says why the wait when `show_progress`."""
        if self._thread.is_alive() and show_progress:
            with console.status("Loading the model gateway…", spinner="dots"):
                self._thread.join()
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._module is not None
        return self._module
