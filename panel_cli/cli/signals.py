"""Ctrl-C and SIGTERM during a run: stop it once, clean up within a bound, exit 130 or 143.

`timeout`, a CI cancel and `docker stop` send SIGTERM; a person presses Ctrl-C, often more
than once. The first signal cancels the run: in-flight calls are recorded as cancelled and
the run as interrupted. Later signals are ignored while that clean-up runs, so it cannot be
interrupted half way, and the clean-up is bounded, so the process always exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

from panel_cli.errors import PanelError
from panel_cli.exit_status import ExitStatus

T = TypeVar("T")

# How long the interrupted run may take to record its cancelled calls and close the store.
CLEANUP_SECONDS = 5.0
# How long leftover tasks and litellm's worker threads get once the run itself has ended.
SHUTDOWN_SECONDS = 2.0
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(PanelError):
    """A run stopped by a signal; the exit code is 128 + the signal's number (130, 143)."""

    def __init__(self, signum: int, run_id: str | None = None) -> None:
        name = signal.Signals(signum).name
        kept = f"; run {run_id} is kept as interrupted" if run_id else ""
        super().__init__(f"interrupted by {name}{kept}.")
        self.exit_code = ExitStatus.for_signal(signum)


def _raise_interrupted(signum: int, frame: object) -> None:
    raise Interrupted(signum)


def on_sigterm_exit() -> None:
    """Before the run's event loop exists, SIGTERM stops the command as Ctrl-C does (an
    exception, exit 143) instead of killing it outright."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_interrupted)


def run_until_signal(main: Callable[[], Awaitable[T]], run_id: str) -> T:
    """Run `main()` on a fresh event loop. The first SIGINT or SIGTERM cancels it, and it gets
    CLEANUP_SECONDS to finish cancelling; later signals are ignored. Raises Interrupted."""
    loop = asyncio.new_event_loop()
    task = loop.create_task(_as_coroutine(main))
    received: list[int] = []

    def on_signal(signum: int) -> None:
        if received:
            return
        received.append(signum)
        task.cancel()
        loop.call_later(CLEANUP_SECONDS, loop.stop)

    watching = threading.current_thread() is threading.main_thread()
    if watching:
        for signum in SIGNALS:
            loop.add_signal_handler(signum, on_signal, signum)
    try:
        return loop.run_until_complete(task)
    except (asyncio.CancelledError, RuntimeError):
        # RuntimeError: the clean-up outlasted its bound and the loop was stopped under it.
        if received:
            raise Interrupted(received[0], run_id) from None
        raise
    finally:
        _shutdown(loop, watching)
        if received:
            _ignore_signals()
            _exit_if_threads_linger(Interrupted(received[0], run_id))
        elif watching:
            on_sigterm_exit()


async def _as_coroutine(main: Callable[[], Awaitable[T]]) -> T:
    return await main()


def _shutdown(loop: asyncio.AbstractEventLoop, watching: bool) -> None:
    """Cancel what is left, then give litellm's worker threads a moment; never wait forever."""
    pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in pending:
        task.cancel()
    with contextlib.suppress(BaseException):
        if pending:
            loop.run_until_complete(asyncio.wait(pending, timeout=SHUTDOWN_SECONDS))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(asyncio.wait_for(loop.shutdown_default_executor(), SHUTDOWN_SECONDS))
    if watching:
        for signum in SIGNALS:
            loop.remove_signal_handler(signum)
    loop.close()


def _ignore_signals() -> None:
    for signum in SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


def _exit_if_threads_linger(interrupted: Interrupted) -> None:
    """A worker thread stuck in a provider's socket would hold the interpreter's exit open;
    after an interrupt, once what we have is on disk, do not wait for it."""
    if any(
        thread.is_alive() and not thread.daemon
        for thread in threading.enumerate()
        if thread is not threading.main_thread()
    ):
        sys.stdout.flush()
        sys.stderr.write(f"panel: {interrupted.message}\n")
        sys.stderr.flush()
        os._exit(interrupted.exit_code)
