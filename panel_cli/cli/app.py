"""The `panel` command: the Typer app, its command groups, and the one top-level error handler.

Command modules import the engine, the gateway (and so litellm) inside the command
function, so `panel --help` and `panel history …` start fast.
"""

from __future__ import annotations

import os
import sys

import typer

from panel_cli.cli import confer as confer_command
from panel_cli.cli import council as council_command
from panel_cli.cli import ensemble as ensemble_command
from panel_cli.cli import inspect as inspect_commands
from panel_cli.cli.history import history_app
from panel_cli.errors import PanelError

app = typer.Typer(
    name="panel",
    help="Let several language models deliberate together, live in the terminal, every run kept.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def main_options(
    traceback: bool = typer.Option(False, "--traceback", help="Show the full traceback of an unexpected error."),
) -> None:
    if traceback:
        os.environ["PANEL_TRACEBACK"] = "1"


app.command("confer")(confer_command.confer)
app.command("council")(council_command.council)
app.command("ensemble")(ensemble_command.ensemble)
app.command("validate")(inspect_commands.validate)
app.command("models")(inspect_commands.models)
app.add_typer(history_app, name="history")


def _say(message: str) -> None:
    sys.stderr.write(f"panel: {message}\n")


def _is_usage_error(exc: Exception) -> bool:
    """Click's usage errors (Typer vendors its own click in recent versions, so match by shape)."""
    return any(cls.__name__ == "ClickException" for cls in type(exc).__mro__)


def main() -> None:
    """Entry point: every known error becomes one sentence and its exit code (SPEC §4)."""
    try:
        code = app(standalone_mode=False)
    except (KeyboardInterrupt, typer.Abort):
        _say("interrupted.")
        code = 130
    except PanelError as exc:
        _say(exc.message)
        code = exc.exit_code
    except Exception as exc:
        if _is_usage_error(exc):
            exc.show()  # type: ignore[attr-defined]
            code = exc.exit_code  # type: ignore[attr-defined]
        elif os.environ.get("PANEL_TRACEBACK"):
            raise
        else:
            _say(f"unexpected error: {type(exc).__name__}: {exc} (run with --traceback or PANEL_TRACEBACK=1 for details).")
            code = 1
    sys.exit(code if isinstance(code, int) else 0)
