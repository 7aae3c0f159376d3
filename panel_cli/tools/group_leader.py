"""Runs a stdio tool server and ends its whole process group when it ends, however panel ends.

The MCP SDK starts a server in a session of its own and ends that group only when the server
outlives its closed stdin, so the children of a server that exits at once were left running;
and a SIGKILL of panel ran no shutdown at all. The SDK offers no hook into how it starts the
process, so panel starts this small program as the server instead:

    python -I -S group_leader.py PANEL_PID COMMAND [ARG...]

It starts COMMAND in a process group of its own, handing it the SDK's pipes, and ends that
group (SIGTERM, then SIGKILL after `GRACE_SECONDS`) when the server exits, when this program
is told to stop (the SDK's SIGTERM), or when panel is gone: on Linux the kernel sends it
SIGTERM as panel dies (a parent-death signal), elsewhere it notices its parent changed.

It runs outside panel's package, on the standard library alone (`-I -S`), so it starts in a
few milliseconds. A process that leaves the group on purpose (a daemon calling setsid) escapes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

# Less than the SDK gives a server between its SIGTERM and its SIGKILL (two seconds), so the
# group is ended before this program can be killed with it still running.
GRACE_SECONDS = 1.0
# How often the parent is checked where no parent-death signal exists.
PARENT_POLL_SECONDS = 0.5
PR_SET_PDEATHSIG = 1
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


class Stop(Exception):
    """Raised by the signal handler: panel asked the server to stop, or is gone."""


# A stop was asked for (once is enough); `armed` once the server is known, so that raising
# Stop cannot lose it, and again no longer once its group is being ended.
requested = False
armed = False


def main(argv: list[str]) -> int:
    global armed
    parent, command = int(argv[0]), argv[1:]
    for signum in STOP_SIGNALS:
        signal.signal(signum, _stop)
    _die_with_parent()
    if os.getppid() != parent:
        return 128 + signal.SIGTERM
    try:
        server = subprocess.Popen(command, process_group=0)
    except FileNotFoundError:
        sys.stderr.write(f"no such command: {command[0]}\n")
        return 127
    except PermissionError:
        sys.stderr.write(f"not allowed to run {command[0]}\n")
        return 126
    _let_go_of_pipes()
    code = 128 + signal.SIGTERM
    try:
        armed = True
        if not requested:
            code = _wait(server, parent)
    except Stop:
        pass
    finally:
        armed = False
        _end_group(server)
    return code


def _stop(signum: int, frame: object) -> None:
    global requested
    if not requested:
        requested = True
        if armed:
            raise Stop


def _die_with_parent() -> None:
    """On Linux, have the kernel send SIGTERM when panel dies, even by SIGKILL."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def _let_go_of_pipes() -> None:
    """Only the server holds the SDK's pipes, so the SDK sees their end when the server's comes."""
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)


def _wait(server: subprocess.Popen[bytes], parent: int) -> int:
    """The server's exit code, as a shell gives it; raises Stop if panel goes first."""
    while True:
        try:
            code = server.wait(timeout=PARENT_POLL_SECONDS)
        except subprocess.TimeoutExpired:
            if os.getppid() != parent:
                raise Stop from None
            continue
        return code if code >= 0 else 128 - code


def _end_group(server: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's group, whose id is the server's pid (even once the server has
    exited and its children remain); SIGKILL to whatever is left after the grace."""
    group = server.pid
    try:
        os.killpg(group, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + GRACE_SECONDS
    while time.monotonic() < deadline:
        server.poll()  # reap the server, or its zombie keeps the group alive
        if not _group_alive(group):
            return
        time.sleep(0.01)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)
    server.poll()


def _group_alive(group: int) -> bool:
    """Only ESRCH proves the group gone (EPERM may be a member we may not signal)."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
