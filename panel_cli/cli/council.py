"""`panel council`: a panel file or `--members`, the council engine, the output, the exit code."""

from __future__ import annotations

from pathlib import Path

import typer

from panel_cli.cli import completion, options
from panel_cli.cli.panels import MEMBERS, TIMEOUT, panel_for, with_timeout


@options.with_run_controls
def council(
    panel_file: Path | None = options.panel_file_argument(required=False),
    question: str | None = options.QUESTION,
    members: str | None = MEMBERS,
    chairman: str | None = typer.Option(
        None,
        "--chairman",
        help="Who writes the final answer; several, comma-separated, are tried in order.",
        autocompletion=completion.member_names,
    ),
    no_anonymize: bool = typer.Option(
        False, "--no-anonymize", help="Reviewers see the authors' names instead of Model A, B, …"
    ),
    timeout: str | None = TIMEOUT,
    json_mode: bool = options.JSON,
    quiet: bool = options.QUIET,
    db: Path | None = options.DB,
    demo: bool = options.DEMO,
    attach: list[Path] | None = options.ATTACH,
    controls: options.RunControls = options.NO_CONTROLS,
) -> None:
    """Every member answers, reviews and ranks the answers anonymously, then a chairman writes the final answer."""
    from panel_cli.cli.running import apply_demo, begin_run, execute, question_for

    loader = begin_run()
    from panel_cli.protocols.checks import check_panel
    from panel_cli.protocols.council.engine import council as council_engine

    panel, declared = panel_for(panel_file, members, chairman, "council", demo=demo)
    if no_anonymize:
        panel = panel.model_copy(update={"anonymize": False})
    panel = apply_demo(with_timeout(panel, timeout, ("answer", "review")), demo).with_attachments(attach)
    warnings = check_panel(panel, "council", declared)
    text = question_for(panel, panel_file, question)
    execute(
        loader,
        council_engine,
        panel,
        text,
        warnings=warnings,
        json_mode=json_mode,
        quiet=quiet,
        db=db,
        controls=controls,
    )
