"""`panel orchestrate`: a panel file, or models for the default workers; the orchestrate engine,
the output, the exit code.

With a file, the members not named as planner or chairman are the workers, and `--members`
keeps only some of them. Without a file, `--members` are models (aliases or litellm ids):
the default workers research, analysis and writing run on them in turn, and the first one
plans and synthesises unless `--planner` / `--chairman` say otherwise. `--demo` alone runs
the default team offline.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from panel_cli.cli import completion, options

if TYPE_CHECKING:
    from panel_cli.config import Member, Panel

MEMBERS = typer.Option(
    None,
    "--members",
    help="With a file: only these workers, comma-separated. Without one: models (aliases or litellm ids) "
    "for the default workers research, analysis and writing, in turn.",
    autocompletion=completion.member_names,
)
NO_PANEL = (
    'Give a panel file or --members, e.g. panel orchestrate --members gpt-4o,claude -q "Your question" '
    '(or try it offline: panel orchestrate --demo -q "Your question").'
)


def _kept_role(entry: str | Member, kept: list[str], panel: Panel) -> str | Member:
    """A role that names a member left out by `--members` still plans or chairs, as an inline member."""
    return entry if not isinstance(entry, str) or entry in kept else panel.member(entry)


def _file_panel(
    panel_file: Path, names: list[str] | None, planner: str | None, chairs: list[str] | None
) -> tuple[Panel, str | None]:
    from panel_cli.cli.running import declared_protocol
    from panel_cli.config import load_panel

    panel = load_panel(panel_file)
    declared = declared_protocol(panel)
    if names:
        roles: dict[str, object] = {}
        if panel.planner is not None:
            roles["planner"] = _kept_role(panel.planner, names, panel)
        if isinstance(panel.chairman, list):
            roles["chairman"] = [_kept_role(entry, names, panel) for entry in panel.chairman]
        elif panel.chairman is not None:
            roles["chairman"] = _kept_role(panel.chairman, names, panel)
        panel = panel.with_members(names, "--members").model_copy(update=roles)
    if chairs:
        for name in chairs:
            panel.member(name, role="chairman")
        panel = panel.model_copy(update={"chairman": chairs[0] if len(chairs) == 1 else chairs})
    if planner:
        panel.member(planner, role="planner")
        panel = panel.model_copy(update={"planner": planner})
    return panel, declared


def _models_panel(models: list[str], planner: str | None, chairs: list[str] | None) -> Panel:
    """The default workers on the given models in turn; the chairman (and, unless `--planner`
    names another model, the planner) on the first model or `--chairman`'s."""
    from panel_cli.config import Panel, panel_from_members
    from panel_cli.protocols.orchestrate.engine import default_workers

    base = panel_from_members(models, chairs, "orchestrate")
    chairmen = [
        chair.model_copy(update={"name": "chairman" if index == 0 else f"chairman-{index + 1}"})
        for index, chair in enumerate(base.chairmen())
    ]
    data: dict[str, object] = {
        "name": "orchestrate",
        "protocol": "orchestrate",
        "members": default_workers(base.members),
        "chairman": chairmen[0] if len(chairmen) == 1 else chairmen,
    }
    if planner:
        data["planner"] = (
            panel_from_members([planner], None, "orchestrate").members[0].model_copy(update={"name": "planner"})
        )
    return Panel.model_validate(data)


@options.with_run_controls
def orchestrate(
    panel_file: Path | None = options.panel_file_argument(required=False),
    question: str | None = options.QUESTION,
    members: str | None = MEMBERS,
    planner: str | None = typer.Option(
        None,
        "--planner",
        help="Who plans: a member (with a file) or a model (without). Default: the chairman.",
        autocompletion=completion.member_names,
    ),
    chairman: str | None = typer.Option(
        None,
        "--chairman",
        help="Who writes the final answer; several, comma-separated, are tried in order.",
        autocompletion=completion.member_names,
    ),
    max_plan_attempts: int | None = typer.Option(
        None,
        "--max-plan-attempts",
        min=1,
        max=10,
        help="Ask the planner at most this many times for a valid plan (default 3).",
    ),
    timeout: str | None = typer.Option(
        None, "--timeout", help="Time limit for each plan attempt and each subtask, like 90s, 3m or none."
    ),
    json_mode: bool = options.JSON,
    quiet: bool = options.QUIET,
    db: Path | None = options.DB,
    demo: bool = options.DEMO,
    attach: list[Path] | None = options.ATTACH,
    controls: options.RunControls = options.NO_CONTROLS,
) -> None:
    """A planner splits the question into subtasks for specialised workers; each runs as soon as its dependencies are done; a chairman writes the answer."""
    from panel_cli.cli.panels import with_timeout
    from panel_cli.cli.running import apply_demo, begin_run, execute, parse_names, question_for

    loader = begin_run()
    from panel_cli.errors import UserError
    from panel_cli.protocols.checks import check_panel
    from panel_cli.protocols.orchestrate.engine import orchestrate as orchestrate_engine

    names = parse_names(members, "--members")
    chairs = parse_names(chairman, "--chairman")
    if planner is not None and not planner.strip():
        raise UserError("--planner needs a name.")
    if panel_file is not None:
        panel, declared = _file_panel(panel_file, names, planner and planner.strip(), chairs)
    elif names or demo:
        # --demo replaces every model, so the default team needs none to be named.
        panel, declared = _models_panel(names or ["demo/sage"], planner and planner.strip(), chairs), None
    else:
        raise UserError(NO_PANEL)
    updates: dict[str, object] = {"protocol": "orchestrate"}
    if max_plan_attempts is not None:
        updates["max_plan_attempts"] = max_plan_attempts
    panel = apply_demo(
        with_timeout(panel.model_copy(update=updates), timeout, ("plan", "task")), demo
    ).with_attachments(attach)
    warnings = check_panel(panel, "orchestrate", declared)
    text = question_for(panel, panel_file, question)
    execute(
        loader,
        orchestrate_engine,
        panel,
        text,
        warnings=warnings,
        json_mode=json_mode,
        quiet=quiet,
        db=db,
        controls=controls,
    )
