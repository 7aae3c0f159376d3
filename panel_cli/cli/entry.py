"""The `panel` script's entry point, which imports nothing but panel's exit codes before it can
answer a Ctrl-C. Importing the command line (Typer, Rich, pydantic) takes a few hundred
milliseconds; a Ctrl-C in that time, or just after, before panel's own handling is in place,
ends panel as a later one does: one line, exit 130, no traceback."""

from __future__ import annotations

import signal
import sys

from panel_cli.exit_status import ExitStatus


def main() -> None:
    """Import the command line and run it. A Ctrl-C that reaches here (while importing, or in
    the instants before panel's own handling is in place) ends panel as a later one does."""
    try:
        from panel_cli.cli.app import main as run_panel

        run_panel()
    except KeyboardInterrupt:
        interrupted()


def interrupted() -> None:
    """One line, exit 130, and no second Ctrl-C can cut the line short."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.stderr.write("panel: interrupted by SIGINT.\n")
    sys.exit(ExitStatus.SIGINT)
