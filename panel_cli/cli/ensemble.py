"""`panel ensemble`: one prompt to every member, then the mode's rule; output and exit code."""

from __future__ import annotations

from pathlib import Path

import typer

from panel_cli.cli import completion, options
from panel_cli.cli.panels import MEMBERS, TIMEOUT, panel_for, with_timeout


@options.with_run_controls
def ensemble(
    panel_file: Path | None = options.panel_file_argument(required=False),
    question: str | None = options.QUESTION,
    members: str | None = MEMBERS,
    mode: str | None = typer.Option(
        None,
        "--mode",
        help="fanout: every result; race: the first success; consensus: the best score; "
        "majority: the most typical answer; synthesize: an aggregator merges them.",
    ),
    scorer: str | None = typer.Option(None, "--scorer", help="For consensus: length, or judge:<member>."),
    aggregator: str | None = typer.Option(
        None,
        "--aggregator",
        help="For synthesize: the member that writes the answer.",
        autocompletion=completion.member_names,
    ),
    timeout: str | None = TIMEOUT,
    json_mode: bool = options.JSON,
    quiet: bool = options.QUIET,
    db: Path | None = options.DB,
    demo: bool = options.DEMO,
    attach: list[Path] | None = options.ATTACH,
    controls: options.RunControls = options.NO_CONTROLS,
) -> None:
    """One prompt to every member at once, no peer review; the mode decides what comes back."""
    from typing import get_args

    from panel_cli.cli.running import apply_demo, begin_run, execute, question_for

    loader = begin_run()
    from panel_cli.config import EnsembleMode
    from panel_cli.errors import UserError
    from panel_cli.protocols.checks import check_panel
    from panel_cli.protocols.ensemble.engine import ensemble as ensemble_engine

    modes = get_args(EnsembleMode)
    if mode is not None and mode not in modes:
        raise UserError(f"--mode: '{mode}' is not a mode; choose {', '.join(modes[:-1])} or {modes[-1]}.")
    panel, declared = panel_for(panel_file, members, None, "ensemble", demo=demo)
    updates: dict[str, object] = {}
    if mode is not None:
        updates["mode"] = mode
    if scorer is not None:
        updates["scorer"] = scorer
    if aggregator is not None:
        updates["aggregator"] = aggregator
    panel = panel.model_copy(update=updates)
    if scorer is not None and panel.mode != "consensus":
        raise UserError(f"--scorer applies to --mode consensus, not {panel.mode}.")
    if aggregator is not None and panel.mode != "synthesize":
        raise UserError(f"--aggregator applies to --mode synthesize, not {panel.mode}.")
    panel = apply_demo(with_timeout(panel, timeout, ("answer",)), demo).with_attachments(attach)
    warnings = check_panel(panel, "ensemble", declared)
    text = question_for(panel, panel_file, question)
    execute(
        loader,
        ensemble_engine,
        panel,
        text,
        warnings=warnings,
        json_mode=json_mode,
        quiet=quiet,
        db=db,
        controls=controls,
    )
