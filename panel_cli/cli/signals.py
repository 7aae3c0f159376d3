"""Ctrl-C, SIGTERM and SIGHUP during a run: stop it once, clean up within a bound, exit 130,
143 or 129.

`timeout`, a CI cancel and `docker stop` send SIGTERM; a person presses Ctrl-C, often more
than once; a closed terminal sends SIGHUP (unless `nohup` had it ignored, which is kept). The
first signal cancels the run: in-flight calls are recorded as cancelled and the run as
interrupted. Later signals are ignored while that clean-up runs, so it cannot be
interrupted half way, and the clean-up is bounded, so the process always exits.

A command changes the process's signal handlers only for as long as it runs
(`KeepsSignalHandlers`): run in process (tests, a program that embeds panel) it hands them back
as it found them, so a SIGTERM that reaches the host afterwards is the host's again.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from panel_cli.errors import PanelError
from panel_cli.exit_status import ExitStatus

if TYPE_CHECKING:  # asyncio is imported by the runs themselves: `panel --help` does without it
    import asyncio

    from typer import _click as click

    # To the checker, the Click command a mixin goes before (Typer's own click, which it vendors).
    _Command = click.Command
else:
    _Command = object

T = TypeVar("T")

# How long the interrupted run may take to record its cancelled calls and close the store.
CLEANUP_SECONDS = 5.0
# How long leftover tasks and litellm's worker threads get once the run itself has ended.
SHUTDOWN_SECONDS = 2.0
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(PanelError):
    """A run stopped by a signal; the exit code is 128 + the signal's number (130, 143, 129).
    `resume`: the command that continues the run, said as batch and eval say theirs."""

    def __init__(self, signum: int, run_id: str | None = None, resume: str | None = None) -> None:
        name = signal.Signals(signum).name
        kept = f"; run {run_id} is kept as interrupted" if run_id else ""
        way_on = f": `{resume}` continues it" if run_id and resume else ""
        super().__init__(f"interrupted by {name}{kept}{way_on}.")
        self.exit_code = ExitStatus.for_signal(signum)


@contextlib.contextmanager
def ctrl_c_as_interrupted() -> Iterator[None]:
    """A Ctrl-C that reaches Python as KeyboardInterrupt (while the command line is parsed,
    modules imported, the panel checked) becomes `Interrupted`, so it ends the command as one
    during a run does: one line, exit 130. Typer would exit 130 without a word."""
    try:
        yield
    except KeyboardInterrupt:
        raise Interrupted(signal.SIGINT) from None


def _raise_interrupted(signum: int, frame: object) -> None:
    raise Interrupted(signum)


def on_sigterm_exit() -> None:
    """Before the run's event loop exists, SIGTERM and SIGHUP stop the command as Ctrl-C does
    (an exception, exit 143 or 129) instead of killing it outright. Until the command ends: the
    command (`KeepsSignalHandlers`) puts back the handlers this replaces."""
    if threading.current_thread() is threading.main_thread():
        for signum in watched_signals():
            if signum != signal.SIGINT:
                signal.signal(signum, _raise_interrupted)


def watched_signals() -> tuple[int, ...]:
    """The signals that stop a command: SIGINT, SIGTERM, and SIGHUP unless the process was
    started with it ignored (`nohup panel …` must outlive its terminal)."""
    return tuple(
        signum for signum in SIGNALS if signum != signal.SIGHUP or signal.getsignal(signum) is not signal.SIG_IGN
    )


class _Process:
    """Whether the command running is the whole life of this process (`panel` itself, through
    `main`) rather than a call in someone else's (a test's CliRunner, a program embedding panel)."""

    owned = False


@contextlib.contextmanager
def owning_the_process() -> Iterator[None]:
    """Around `main`'s command: when a signal stops it, the process exits right after."""
    _Process.owned = True
    try:
        yield
    finally:
        _Process.owned = False


@contextlib.contextmanager
def handlers_kept() -> Iterator[None]:
    """Put SIGINT's and SIGTERM's handlers back as they were on entry, whatever the body
    installed. A child process inherits an ignored signal, so handlers left ignored in a test
    run would make every later subprocess deaf to Ctrl-C. Only when a signal stopped the
    command (`Interrupted`) of a process that ends with it, both stay ignored: a late Ctrl-C
    must not cut the exit message short."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    found = {signum: signal.getsignal(signum) for signum in SIGNALS}
    try:
        yield
    except Interrupted:
        if _Process.owned:
            _ignore_signals()
        else:
            _restore(found)
        raise
    except BaseException:
        _restore(found)
        raise
    _restore(found)


class KeepsSignalHandlers(_Command):
    """A Click command that leaves the process's signal handlers as it found them (a mixin,
    before the command class: `class PanelCommand(KeepsSignalHandlers, TyperCommand)`)."""

    def invoke(self, ctx: click.Context) -> Any:
        with handlers_kept():
            return super().invoke(ctx)


def _restore(handlers: Mapping[signal.Signals, Any]) -> None:
    for signum, handler in handlers.items():
        if handler is not None:  # None: set outside Python, which cannot be put back from here
            signal.signal(signum, handler)


def run_until_signal(main: Callable[[], Awaitable[T]], run_id: str, resume: str | None = None) -> T:
    """Run `main()` on a fresh event loop. The first SIGINT, SIGTERM or SIGHUP cancels it, and it gets
    CLEANUP_SECONDS to finish cancelling; later signals are ignored. Raises Interrupted (saying
    `resume`, the command that continues run `run_id`). When no signal came, the handlers in
    place before are put back (the loop's own replace them)."""
    import asyncio

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
    found = {signum: signal.getsignal(signum) for signum in SIGNALS}
    watched = watched_signals() if watching else ()
    for signum in watched:
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        return loop.run_until_complete(task)
    except BaseException:
        # Once a signal came, however the run ended is its interruption: cancelled, or the
        # loop stopped under a clean-up that outlasted its bound (RuntimeError).
        if received:
            raise Interrupted(received[0], run_id, resume) from None
        raise
    finally:
        _shutdown(loop, watched)
        if received:
            _ignore_signals()
            _exit_if_threads_linger(Interrupted(received[0], run_id, resume))
        elif watching:
            _restore(found)


async def _as_coroutine(main: Callable[[], Awaitable[T]]) -> T:
    return await main()


def _shutdown(loop: asyncio.AbstractEventLoop, watched: tuple[int, ...]) -> None:
    """Cancel what is left, then give litellm's worker threads a moment; never wait forever."""
    import asyncio

    pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in pending:
        task.cancel()
    with contextlib.suppress(BaseException):
        if pending:
            loop.run_until_complete(asyncio.wait(pending, timeout=SHUTDOWN_SECONDS))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(asyncio.wait_for(loop.shutdown_default_executor(), SHUTDOWN_SECONDS))
    for signum in watched:
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
