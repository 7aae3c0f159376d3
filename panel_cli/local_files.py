"""The text of a local file a panel file names: its `question_file`, each of its attachments,
its weights file.

A panel file may come from someone else, and whatever it names is sent to the models, so the
file is read with the same refusals whatever names it: only a regular file (a FIFO would block
forever, /dev/zero never ends: the kind is checked with stat before opening, and again on the
open file in case it was swapped in between), nothing under /proc or /sys (the system's own
state: /proc/self/environ holds every variable, keys included, and is a "regular" file), at
most one byte past the limit, and text: no NUL byte, UTF-8.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from panel_cli.located_yaml import bad_byte_line, decode_utf8, size_text

# A questions file (`panel batch`) or a dataset (`panel eval`) with more questions than this is
# a mistake (a log, a data dump), not a batch: reading it whole costs minutes and gigabytes.
QUESTION_COUNT_LIMIT = 100_000
SYSTEM_ROOTS = (Path("/proc"), Path("/sys"))
SYSTEM_FILE = "is under /proc or /sys, the system's own state, not a file to send to the models"
NOT_REGULAR = "is not a regular file (a pipe, a device or a socket)"


class FileRefused(ValueError):
    """Why a file cannot be read: what follows its name in the caller's sentence."""


@dataclass(frozen=True)
class TextFileRules:
    """What one kind of file may be, and the words its refusals end with."""

    limit: int
    too_big: str
    """After "is larger than 200 KiB, "."""
    binary: str
    """After "is a binary file; "."""
    not_utf8: str
    """After "line 2 is not UTF-8 text (byte 0xe9); "."""
    not_regular: str = ""
    """Advice after "is not a regular file (…)", if any."""


def read_text_file(path: Path, rules: TextFileRules) -> str:
    """The file's text; raises FileRefused with the reason it cannot be used."""
    try:
        kind = os.stat(path).st_mode
        if stat.S_ISDIR(kind):
            raise FileRefused("is a folder, not a file")
        if not stat.S_ISREG(kind):
            raise FileRefused(_not_regular(rules))
        if under_system_root(path):
            raise FileRefused(SYSTEM_FILE)
        with os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as stream:
            if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
                raise FileRefused(_not_regular(rules))
            data = stream.read(rules.limit + 1)
    except FileNotFoundError:
        raise FileRefused("no such file") from None
    except OSError as exc:
        raise FileRefused(f"cannot be read ({exc.strerror})") from None
    if len(data) > rules.limit:
        raise FileRefused(f"is larger than {size_text(rules.limit)}, {rules.too_big}")
    if b"\x00" in data:
        raise FileRefused(f"is a binary file; {rules.binary}")
    try:
        return decode_utf8(data)
    except UnicodeDecodeError as exc:
        line = bad_byte_line(data, exc)
        raise FileRefused(f"line {line} is not UTF-8 text (byte 0x{data[exc.start]:02x}); {rules.not_utf8}") from None


def read_given_file(path: Path, limit: int) -> bytes:
    """At most `limit` + 1 bytes of a file a person names on the command line (a batch's
    questions, an eval's dataset): a regular file, or a pipe, so that `<(head -50 big.jsonl)`
    works as it does in every shell tool. A device or a socket is refused before it is opened
    (/dev/zero never ends: read whole, it filled memory). Raises FileRefused, whose reason
    reads after the file's name ("… does not exist")."""
    try:
        kind = os.stat(path).st_mode
        if stat.S_ISDIR(kind):
            raise FileRefused("is a folder")
        if not (stat.S_ISREG(kind) or stat.S_ISFIFO(kind)):
            raise FileRefused("is a device or a socket, not a file")
        with path.open("rb") as stream:
            return stream.read(limit + 1)
    except FileNotFoundError:
        raise FileRefused("does not exist") from None
    except OSError as exc:
        raise FileRefused(f"cannot be read ({exc.strerror})") from None


def _not_regular(rules: TextFileRules) -> str:
    return f"{NOT_REGULAR}; {rules.not_regular}" if rules.not_regular else NOT_REGULAR


def under_system_root(path: Path) -> bool:
    """Whether the file really lives under /proc or /sys, through any symlink on the way."""
    real = Path(os.path.realpath(path))
    return any(real.is_relative_to(root) for root in SYSTEM_ROOTS)
