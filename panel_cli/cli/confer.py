"""`panel confer`: parse, call the confer engine, render, exit."""

from __future__ import annotations

from pathlib import Path

import typer

from panel_cli.cli import completion, options


@options.with_run_controls
def confer(
    panel_file: Path = options.panel_file_argument(),
    question: str | None = options.QUESTION,
    agents: str | None = typer.Option(
        None,
        "--agents",
        help="Only these members, comma-separated (e.g. gpt,claude).",
        autocompletion=completion.member_names,
    ),
    max_rounds: int | None = typer.Option(None, "--max-rounds", min=1, max=50, help="At most this many vote rounds."),
    no_convergence: bool = typer.Option(
        False, "--no-convergence", help="Run every round even when the winner is stable."
    ),
    json_mode: bool = options.JSON,
    quiet: bool = options.QUIET,
    db: Path | None = options.DB,
    demo: bool = options.DEMO,
    attach: list[Path] | None = options.ATTACH,
    controls: options.RunControls = options.NO_CONTROLS,
) -> None:
    """Every member answers, then votes anonymously with confidence until the winner is stable."""
    from panel_cli.cli.running import apply_demo, begin_run, declared_protocol, execute, parse_names, question_for

    loader = begin_run()
    from panel_cli.config import load_panel
    from panel_cli.protocols.checks import check_panel
    from panel_cli.protocols.confer.engine import confer as confer_engine

    panel = load_panel(panel_file)
    declared = declared_protocol(panel)
    names = parse_names(agents, "--agents")
    if names:
        panel = panel.with_members(names, "--agents")
    updates: dict[str, object] = {"protocol": "confer"}
    if max_rounds is not None:
        updates["max_rounds"] = max_rounds
    if no_convergence:
        updates["until_convergence"] = False
    panel = apply_demo(panel.model_copy(update=updates), demo).with_attachments(attach)
    warnings = check_panel(panel, "confer", declared)
    text = question_for(panel, panel_file, question)
    execute(
        loader,
        confer_engine,
        panel,
        text,
        warnings=warnings,
        json_mode=json_mode,
        quiet=quiet,
        db=db,
        controls=controls,
    )
