"""A reader that stops reading never changes what panel does.

`panel confer … | head -3` or `panel history show ID | head`: once `head` has its lines it
closes the pipe, and the next write raises BrokenPipeError (a closed terminal, after SIGHUP,
raises EIO the same way). Left alone, that error would end
a run half-way, store it as failed and exit 1, although every call it made was paid for and
nothing went wrong but the reader's patience. As `git log | head` does, panel goes on quietly:
the closed stream's descriptor is pointed at the null device, the run ends as it would have,
and its exit code is its own.

A stream that was closed before panel started (`2>&-`, `>&-`) gets the null device at once,
before panel opens any file: Python leaves `sys.stderr` None there, and the next file opened
(the transcript database) would take descriptor 2 and receive every progress line. A stream
that cannot be written for another reason (`> /dev/full`: no space left) is given up the same
way, so the run still ends and is stored as it would have; what was lost is said once at the
end, on stderr if it can still be written, and the exit code is 1.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import Any, TextIO

# A pipe with no reader; a terminal that was closed.
READER_GONE = (errno.EPIPE, errno.EIO)


class QuietWhenClosed:
    """A text stream whose writes succeed after its reader has gone: from the first error on
    (a closed pipe, a full disk), what is written goes to the null device. `lost` says why,
    when the reason was not a reader leaving."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.lost: str | None = None

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as error:
            self._given_up(error)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as error:
            self._given_up(error)

    def _given_up(self, error: OSError) -> None:
        if error.errno not in READER_GONE and self.lost is None:
            self.lost = error.strerror or str(error)
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
    gives commands streams of its own), each closed one given the null device first."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            setattr(sys, name, open(fd, mode, encoding="utf-8", errors="backslashreplace", closefd=False))  # noqa: SIM115 - the process's own stream
    if not isinstance(sys.stdout, QuietWhenClosed) and sys.stdout is not None:
        sys.stdout = QuietWhenClosed(sys.stdout)
    if not isinstance(sys.stderr, QuietWhenClosed) and sys.stderr is not None:
        sys.stderr = QuietWhenClosed(sys.stderr)


def flush_quietly() -> str | None:
    """The last flush before exit, which may be the first to find the pipe closed. Why the
    output could not be written, when it could not for a reason other than a reader leaving."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    return getattr(sys.stdout, "lost", None)
