"""Whether the process that was writing a run is still there, so that a run whose process
crashed or was killed reads as `stale` instead of `running` for ever."""

from __future__ import annotations

import functools
import os


@functools.cache
def this_host() -> str:
    import socket

    return socket.gethostname()


def process_alive(pid: int, started_at: float | None = None) -> bool:
    """Whether `pid` still runs on this host and can be the one that started a run at
    `started_at`. A zombie is gone; a process that began after the run did only reuses the
    pid. Where /proc is missing, the pid existing is all there is to go on."""
    if pid <= 0:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    except OSError:
        return False
    found = _proc_start(pid)
    if found is None:
        return True
    state, began = found
    if state in ("Z", "X"):
        return False
    return started_at is None or began is None or began <= started_at + 1.0


def _proc_start(pid: int) -> tuple[str, float | None] | None:
    """(state, start time in epoch seconds) from /proc, or None where there is no /proc."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            # The command name is in parentheses and may hold anything, spaces included.
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return None
    boot = _boot_time()
    if boot is None or len(fields) < 20:
        return fields[0] if fields else "?", None
    return fields[0], boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")


@functools.cache
def _boot_time() -> float | None:
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            for line in stat:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except OSError:
        pass
    return None
