"""`panel delphi`: a panel file or `--members`, the delphi engine, the output, the exit code."""

from __future__ import annotations

from pathlib import Path

import typer

from panel_cli.cli import completion, options
from panel_cli.cli.panels import MEMBERS, panel_for, with_timeout


@options.with_run_controls
def delphi(
    panel_file: Path | None = options.panel_file_argument(required=False),
    question: str | None = options.QUESTION,
    members: str | None = MEMBERS,
    chairman: str | None = typer.Option(
        None,
        "--chairman",
        help="Who writes the synthesis; several, comma-separated, are tried in order.",
        autocompletion=completion.member_names,
    ),
    max_rounds: int | None = typer.Option(
        None, "--max-rounds", min=1, max=50, help="At most this many rounds (default 3)."
    ),
    no_convergence: bool = typer.Option(
        False, "--no-convergence", help="Run every round even when no expert changes any more."
    ),
    timeout: str | None = typer.Option(None, "--timeout", help="Time limit per round, like 90s, 3m or none."),
    json_mode: bool = options.JSON,
    quiet: bool = options.QUIET,
    db: Path | None = options.DB,
    demo: bool = options.DEMO,
    attach: list[Path] | None = options.ATTACH,
    controls: options.RunControls = options.NO_CONTROLS,
) -> None:
    """Experts answer on their own, then revise round after round seeing each other's analyses anonymously; a chairman synthesises consensus and divergence."""
    from panel_cli.cli.running import apply_demo, begin_run, execute, question_for

    loader = begin_run()
    from panel_cli.protocols.checks import check_panel
    from panel_cli.protocols.delphi.engine import delphi as delphi_engine

    panel, declared = panel_for(panel_file, members, chairman, "delphi", demo=demo)
    updates: dict[str, object] = {}
    if max_rounds is not None:
        updates["max_rounds"] = max_rounds
    if no_convergence:
        updates["until_convergence"] = False
    panel = apply_demo(with_timeout(panel.model_copy(update=updates), timeout, ("answer",)), demo).with_attachments(
        attach
    )
    warnings = check_panel(panel, "delphi", declared)
    text = question_for(panel, panel_file, question)
    execute(
        loader,
        delphi_engine,
        panel,
        text,
        warnings=warnings,
        json_mode=json_mode,
        quiet=quiet,
        db=db,
        controls=controls,
    )
