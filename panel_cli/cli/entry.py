"""The `panel` script's entry point, which answers a signal before it imports the command line.

Importing the command line (Typer, Rich, pydantic) takes a few hundred milliseconds. A Ctrl-C
in that time or just after, before panel's own handling is in place, or a SIGTERM or SIGHUP
(`timeout`, a CI cancel, a closed terminal), ends panel as a later one does: one line, exit 130,
143 or 129, no traceback. So the first thing `main` does is install the handlers a run keeps
(`panel_cli.cli.signals`, which imports nothing heavy)."""

from __future__ import annotations

import signal
import sys

from panel_cli.errors import PanelError
from panel_cli.exit_status import ExitStatus


def main() -> None:
    """Import the command line and run it. A signal that reaches here (while importing, or in
    the instants before panel's own handling is in place) ends panel as a later one does."""
    try:
        from panel_cli.cli.signals import on_sigterm_exit

        on_sigterm_exit()
        from panel_cli.cli.app import main as run_panel

        run_panel()
    except KeyboardInterrupt:
        _stopped("interrupted by SIGINT.", ExitStatus.SIGINT)
    except PanelError as exc:  # `Interrupted`: SIGTERM or SIGHUP while the command line loads
        _stopped(exc.message, exc.exit_code)


def _stopped(message: str, code: int) -> None:
    """Say so and exit; a second signal must not cut the line short."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    sys.stderr.write(f"panel: {message}\n")
    sys.exit(code)
