"""What a report needs to say where its figures came from: when the eval began, the commit panel
ran from (when it runs from a git checkout), the Python that ran it, and the command line.

The commit is read from the checkout's files (`.git/HEAD`, the ref it names, `packed-refs`),
not by running git: no subprocess, no git needed, and a worktree's `.git` file is followed.
Anything unreadable is "unknown", never an error: provenance must not stop an eval.
"""

from __future__ import annotations

import platform
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

# A checkout's files are read, never trusted far: a HEAD or ref this long is not one.
MAX_GIT_FILE = 1 << 20
SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


def started_at() -> str:
    """Now, as ISO-8601 UTC to the second."""
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def python_version() -> str:
    """`3.11.7`, or `3.10.14 (PyPy)` for a Python other than CPython."""
    implementation = platform.python_implementation()
    return platform.python_version() + ("" if implementation == "CPython" else f" ({implementation})")


def source_commit(start: Path | None = None) -> str | None:
    """The commit checked out where panel's code lives (this file, or `start`), or None when it is not a
    git checkout (an installed wheel) or the checkout cannot be read."""
    here = (start or Path(__file__)).resolve()
    for folder in [here, *here.parents]:
        marker = folder / ".git"
        if marker.exists():
            return _commit(marker)
    return None


def _commit(marker: Path) -> str | None:
    try:
        git = marker
        if marker.is_file():  # a worktree: `gitdir: /path/to/main/.git/worktrees/NAME`
            pointed = _read(marker).removeprefix("gitdir:").strip()
            git = (marker.parent / pointed).resolve()
        head = _read(git / "HEAD").strip()
        if SHA.fullmatch(head):
            return head
        ref = head.removeprefix("ref:").strip()
        if not ref.startswith("refs/") or ".." in ref:
            return None
        common = git
        if (git / "commondir").is_file():
            common = (git / _read(git / "commondir").strip()).resolve()
        for folder in (git, common):
            if (folder / ref).is_file():
                found = _read(folder / ref).strip()
                return found if SHA.fullmatch(found) else None
        packed = common / "packed-refs"
        if packed.is_file():
            for line in _read(packed).splitlines():
                sha, _, name = line.partition(" ")
                if name.strip() == ref and SHA.fullmatch(sha):
                    return sha
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return None


def _read(path: Path) -> str:
    with path.open("rb") as file:
        data = file.read(MAX_GIT_FILE + 1)
    if len(data) > MAX_GIT_FILE:
        raise ValueError(f"{path} is too large to be git's")
    return data.decode("utf-8")


def command_line(argv: Sequence[str]) -> list[str]:
    """The command as typed, its program named `panel` whatever path started it."""
    return ["panel", *argv[1:]]
