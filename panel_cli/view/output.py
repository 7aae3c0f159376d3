"""The console a command draws its output on, as wide as where the output goes.

A terminal gives its width. Off a terminal (a pipe, a file) Rich assumes 80 columns, which cuts
ids and names in tables and folds lines that a script reads; there the width is what `COLUMNS`
says, and with no `COLUMNS` there is no limit: a table is as wide as its cells need, a line as
long as its text."""

from __future__ import annotations

import os
from typing import TextIO

from rich.console import Console

# Wider than any line a run's output holds: off a terminal, nothing is cut or folded to fit.
NO_LIMIT = 100_000


def output_console(*, stderr: bool = False, file: TextIO | None = None, terminal: bool | None = None) -> Console:
    """A console on `file` (else stdout, or stderr with `stderr`); `terminal` overrules whether
    Rich takes it for one."""
    console = Console(stderr=stderr, file=file, force_terminal=terminal)
    if not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        console.width = NO_LIMIT
    return console
