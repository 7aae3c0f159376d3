"""A reader that stops reading never changes what panel does.

`panel confer … | head -3` or `panel history show ID | head`: once `head` has its lines it
closes the pipe, and the next write raises BrokenPipeError (a closed terminal, after SIGHUP,
raises EIO the same way). Left alone, that error would end
a run half-way, store it as failed and exit 1, although every call it made was paid for and
nothing went wrong but the reader's patience. As `git log | head` does, panel goes on quietly:
the closed stream's descriptor is pointed at the null device, the run ends as it would have,
and its exit code is its own.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import Any, TextIO

# A pipe with no reader; a terminal that was closed.
READER_GONE = (errno.EPIPE, errno.EIO)


class QuietWhenClosed:
    """A text stream whose writes succeed after its reader has gone: from the first closed-pipe
    error on, what is written goes to the null device."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as error:
            if error.errno not in READER_GONE:
                raise
            self._discard_from_now_on()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as error:
            if error.errno not in READER_GONE:
                raise
            self._discard_from_now_on()

    def _discard_from_now_on(self) -> None:
        """Point the descriptor at the null device; what the stream still buffers is flushed
        there, so neither this write nor the interpreter's last flush fails again."""
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, self._stream.fileno())
        finally:
            os.close(null)
        self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def keep_going_when_readers_leave() -> None:
    """Wrap stdout and stderr for the life of the process (not in tests' CliRunner, which
    gives commands streams of its own)."""
    if not isinstance(sys.stdout, QuietWhenClosed) and sys.stdout is not None:
        sys.stdout = QuietWhenClosed(sys.stdout)  # type: ignore[assignment]
    if not isinstance(sys.stderr, QuietWhenClosed) and sys.stderr is not None:
        sys.stderr = QuietWhenClosed(sys.stderr)  # type: ignore[assignment]


def flush_quietly() -> None:
    """The last flush before exit, which may be the first to find the pipe closed."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
