"""A path a Python caller gives. The command line is never given one that the system cannot
open (its arguments hold no NUL byte, and an undecodable byte comes back as it was), but a
`str` can be anything: one with a NUL byte or a lone surrogate is refused here in a sentence,
where the first `open` would raise ValueError."""

from __future__ import annotations

import os
from pathlib import Path

from panel_cli.errors import UserError


def given_path(value: str | os.PathLike[str], what: str, error: type[UserError] = UserError) -> Path:
    """`value` as a Path; `error` naming `what` when no file can have that name."""
    path = Path(value)
    try:
        named = b"\x00" not in os.fsencode(path)
    except UnicodeEncodeError:
        named = False
    if not named:
        raise error(f"{what} is no file's name: it holds a NUL byte or a lone surrogate.")
    return path
