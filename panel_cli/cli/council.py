"""`panel council`: a panel file or `--members`, the council engine, the output, the exit code.

Also the way every protocol command that accepts `--members` builds its panel, so
`panel ensemble --members …` behaves exactly like `panel council --members …`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from panel_cli.cli import completion, options

if TYPE_CHECKING:
    from panel_cli.config import Panel, Protocol

MEMBERS = typer.Option(
    None,
    "--members",
    help="Members, comma-separated: aliases or litellm model ids (no file needed), or names from the file.",
    autocompletion=completion.member_names,
)
TIMEOUT = typer.Option(None, "--timeout", help="Time limit per stage, like 90s, 3m or none.")


def panel_for(panel_file: Path | None, members: str | None, chairman: str | None, protocol: Protocol) -> tuple[Panel, str | None]:
    """The panel of a run, and the protocol its file declares (if any). With a file,
    `--members` keeps only those members (a chairman left out of them still chairs); without
    one, `--members` are model names or aliases and become the panel. `--chairman` is a
    name, or several for backups, in order."""
    from panel_cli.cli.running import declared_protocol, parse_names
    from panel_cli.config import load_panel, panel_from_members
    from panel_cli.errors import UserError

    names = parse_names(members, "--members")
    chairs = parse_names(chairman, "--chairman")
    if panel_file is None:
        if not names:
            raise UserError(f"Give a panel file or --members, e.g. panel {protocol} --members gpt-4o,claude -q \"Your question\".")
        return panel_from_members(names, chairs, protocol), None
    panel = load_panel(panel_file)
    declared = declared_protocol(panel)
    if names:
        kept = panel.chairmen() if panel.chairman is not None else []
        panel = panel.with_members(names, "--members")
        if kept:
            entries = [chair.name if chair.name in names else chair for chair in kept]
            panel = panel.model_copy(update={"chairman": entries[0] if len(entries) == 1 else entries})
    if chairs:
        panel = panel.model_copy(update={"chairman": chairs[0] if len(chairs) == 1 else chairs})
        panel.chairmen()  # every name must be a member: fail now, in one sentence
    return panel.model_copy(update={"protocol": protocol}), declared


def with_timeout(panel: Panel, timeout: str | None, stages: tuple[str, ...]) -> Panel:
    """`--timeout` applied to the given stages, keeping the file's other stage limits."""
    from panel_cli.config import Timeouts, parse_duration
    from panel_cli.errors import UserError

    if timeout is None:
        return panel
    try:
        seconds = parse_duration(timeout)
    except ValueError as exc:
        raise UserError(f"--timeout: {exc}.") from None
    limits = Timeouts.model_validate({**panel.timeouts.model_dump(exclude_unset=True), **dict.fromkeys(stages, seconds)})
    return panel.model_copy(update={"timeouts": limits})


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
    no_anonymize: bool = typer.Option(False, "--no-anonymize", help="Reviewers see the authors' names instead of Model A, B, …"),
    timeout: str | None = TIMEOUT,
    json_mode: bool = options.JSON,
    quiet: bool = options.QUIET,
    db: Path | None = options.DB,
    demo: bool = options.DEMO,
) -> None:
    """Every member answers, reviews and ranks the answers anonymously, then a chairman writes the final answer."""
    from panel_cli.cli.running import apply_demo, begin_run, execute, question_for

    loader = begin_run()
    from panel_cli.protocols.checks import check_panel
    from panel_cli.protocols.council import council as council_engine

    panel, declared = panel_for(panel_file, members, chairman, "council")
    if no_anonymize:
        panel = panel.model_copy(update={"anonymize": False})
    panel = apply_demo(with_timeout(panel, timeout, ("answer", "review")), demo)
    warnings = check_panel(panel, "council", declared)
    text = question_for(panel, panel_file, question)
    execute(loader, council_engine, panel, text, warnings=warnings, json_mode=json_mode, quiet=quiet, db=db)
