"""`panel supervise`: a panel file (each worker's task lives there), the supervise engine, the
output, the exit code."""

from __future__ import annotations

from pathlib import Path

import typer

from panel_cli.cli import options
from panel_cli.cli.panels import with_timeout


@options.with_run_controls
def supervise(
    panel_file: Path = options.panel_file_argument(),
    question: str | None = options.QUESTION,
    max_rounds: int | None = typer.Option(
        None, "--max-rounds", min=1, max=50, help="At most this many correction rounds (default 2)."
    ),
    timeout: str | None = typer.Option(
        None, "--timeout", help="Time limit for each delivery, correction and review, like 90s, 3m or none."
    ),
    json_mode: bool = options.JSON,
    quiet: bool = options.QUIET,
    db: Path | None = options.DB,
    demo: bool = options.DEMO,
    attach: list[Path] | None = options.ATTACH,
    controls: options.RunControls = options.NO_CONTROLS,
) -> None:
    """Workers deliver their own tasks; a critic approves or sends them back with feedback; a chairman consolidates.

    Needs a panel file: each worker's task and the critic are declared there (no --members)."""
    from panel_cli.cli.running import apply_demo, begin_run, declared_protocol, execute, question_for

    loader = begin_run()
    from panel_cli.config import load_panel
    from panel_cli.protocols.checks import check_panel
    from panel_cli.protocols.supervise.engine import supervise as supervise_engine

    panel = load_panel(panel_file)
    declared = declared_protocol(panel)
    updates: dict[str, object] = {"protocol": "supervise"}
    if max_rounds is not None:
        updates["max_rounds"] = max_rounds
    panel = apply_demo(
        with_timeout(panel.model_copy(update=updates), timeout, ("task", "review")), demo
    ).with_attachments(attach)
    warnings = check_panel(panel, "supervise", declared)
    text = question_for(panel, panel_file, question)
    execute(
        loader,
        supervise_engine,
        panel,
        text,
        warnings=warnings,
        json_mode=json_mode,
        quiet=quiet,
        db=db,
        controls=controls,
    )
