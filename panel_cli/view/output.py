"""The console a command draws its output on, as wide as where the output goes.

A terminal gives its width. Off a terminal (a pipe, a file) Rich assumes 80 columns, which cuts
ids and names in tables and folds lines that a script reads; there the width is what `COLUMNS`
says, and with no `COLUMNS` there is no limit: a table is as wide as its cells need, a line as
long as its text."""

from __future__ import annotations

import os

from rich.console import Console

# Wider than any line a run's output holds: off a terminal, nothing is cut or folded to fit.
NO_LIMIT = 100_000


def output_console(*, stderr: bool = False) -> Console:
    console = Console(stderr=stderr)
    if not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        console.width = NO_LIMIT
    return console
