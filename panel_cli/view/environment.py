"""Where a command's output goes: its standard streams, handed in rather than reached for.

As httpie's `Environment` does: by default the process's own streams, and every one of them can
be given instead, which is how a test, or a program that embeds the command line, captures what
a command writes. The run core (`panel_cli.runs`) has no streams at all: a command builds from
its Environment the view it hands a run (`panel_cli.view.base.make_view`) and writes the result
itself, so one run serves a terminal, a pipe, a library caller and a server alike.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import TextIO

from rich.console import Console

from panel_cli.view.output import output_console


@dataclass
class Environment:
    """A command's streams. `stdout_isatty` and `stderr_isatty` say whether each is a terminal;
    None leaves it to Rich, which asks the stream and honours FORCE_COLOR, TTY_COMPATIBLE and
    the like."""

    stdin: TextIO | None = field(default_factory=lambda: sys.stdin)
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    stdout_isatty: bool | None = None
    stderr_isatty: bool | None = None

    @cached_property
    def console(self) -> Console:
        """The console of stdout: a run's view when it is a terminal, and what a command prints."""
        return output_console(file=self.stdout, terminal=self.stdout_isatty)

    @cached_property
    def err_console(self) -> Console:
        return output_console(file=self.stderr, terminal=self.stderr_isatty)

    def say(self, message: str) -> None:
        """Each line of `message` on stderr, as `panel: line`."""
        for line in message.splitlines() or [""]:
            self.stderr.write(f"panel: {line}\n")

    def warn(self, message: str) -> None:
        """A line a person should read before the run starts (a key sent to an unexpected host), in yellow."""
        Console(
            file=self.stderr, force_terminal=self.stderr_isatty, markup=False, highlight=False, soft_wrap=True
        ).print(message, style="yellow")

    @contextlib.contextmanager
    def waiting(self, activity: str, *, shown: bool = True) -> Iterator[None]:
        """A spinner saying `activity` on stderr while the body runs, when stderr is a terminal
        and `shown`; nothing otherwise."""
        if not (shown and self.err_console.is_terminal):
            yield
            return
        with self.err_console.status(activity, spinner="dots"):
            yield
