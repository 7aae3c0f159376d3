"""`panel resume ID`: continue an interrupted or crashed run as a new run, paying only for what
the old one left unanswered (`panel_cli.runs.resume`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from panel_cli.cli import completion, options
from panel_cli.exit_status import ExitStatus

if TYPE_CHECKING:
    from panel_cli.runs.resume import Resumption


def resume(
    run_id: str = typer.Argument(
        ...,
        metavar="ID",
        help="The run to continue: its id, any unique beginning of one, or last (the run started last).",
        autocompletion=completion.resumable_run_ids,
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help="Resume the run again though another run took it over, when that one failed, crashed or is gone;"
        " or take over the claim of a resume on another host whose process is gone.",
    ),
    yes: bool = typer.Option(
        False,
        "--yes",
        "-y",
        help="Resume a run `history import` brought in without asking, though its panel starts commands or"
        " sends keys to other hosts.",
    ),
    json_mode: bool = options.JSON,
    quiet: bool = options.QUIET,
    db: Path | None = options.DB,
) -> None:
    """Continue an interrupted or crashed run: answered calls come from the store, the rest are made."""
    from panel_cli.cli.protocol_commands import execute, gateway_loader, warn_of_keys
    from panel_cli.cli.signals import on_sigterm_exit
    from panel_cli.runs.controls import RunControls
    from panel_cli.runs.resume import resumption
    from panel_cli.view.environment import Environment

    on_sigterm_exit()
    env = Environment()
    resumed = resumption(db, run_id, force=force)
    # Held until the resume is over, however it ends; a process killed outright leaves a claim
    # the next resume takes over, its process being gone.
    try:
        if resumed.reach and not yes:
            _confirm_imported(resumed)
        loader = gateway_loader(env, shown=not quiet)
        loader.start(resumed.panel)
        if not quiet:
            for notice in resumed.notices:
                env.say(notice)
        warn_of_keys(env, resumed.panel)
        execute(
            env,
            loader,
            resumed.panel,
            resumed.question,
            warnings=[],
            json_mode=json_mode,
            quiet=quiet,
            db=db,
            # A follow-up gets its earlier turns again, read from the store as they were, so its requests hash alike.
            controls=RunControls(follow_up=resumed.parent_id),
            continuing=resumed.continuing,
            gate=resumed.gate,
        )
    finally:
        resumed.release()


def _confirm_imported(resumed: Resumption) -> None:
    """A run `history import` brought in runs the other file's panel: say what it will start
    and where keys go, and go on only on a yes (none, or the end of input, exits 1)."""
    lines = "\n".join(f"  {line}" for line in resumed.reach)
    typer.echo(
        f"Run {resumed.short_id} came from {resumed.imported_from} (`panel history import`); resuming it runs"
        f" that file's panel, which besides calling the providers:\n{lines}",
        err=True,
    )
    try:
        agreed = typer.confirm("Resume it?", default=False, err=True)
    except typer.Abort:
        typer.echo(err=True)
        agreed = False
    if not agreed:
        typer.echo("Nothing resumed.", err=True)
        raise typer.Exit(ExitStatus.FAILURE)
