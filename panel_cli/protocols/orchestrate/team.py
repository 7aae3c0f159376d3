"""orchestrate's panel from the command line: a panel file, or models for the default workers.

With a file, the members not named as planner or chairman are the workers, and `--members`
keeps only some of them. Without a file, `--members` are models (aliases or litellm ids):
the default workers research, analysis and writing run on them in turn, and the first one
plans and synthesises unless `--planner` / `--chairman` say otherwise. `--demo` alone runs
the default team offline.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from panel_cli.config import Member, Panel, panel_from_members, parse_names
from panel_cli.errors import UserError
from panel_cli.protocols.orchestrate.engine import default_workers

NO_PANEL = (
    'Give a panel file or --members, e.g. panel orchestrate --members gpt-4o,claude -q "Your question" '
    '(or try it offline: panel orchestrate --demo -q "Your question").'
)


def panel_for_command(found: Panel | None, given: Mapping[str, Any], demo: bool) -> tuple[Panel, str | None]:
    """The panel of an orchestrate run, and the protocol its file declares (if any). `found`:
    the panel its file holds, or one built in code (None: neither)."""
    names = parse_names(given.get("members"), "--members")
    chairs = parse_names(given.get("chairman"), "--chairman")
    planner = given.get("planner")
    if planner is not None and not planner.strip():
        raise UserError("--planner needs a name.")
    planner = planner and planner.strip()
    if found is not None:
        return _file_panel(found, names, planner, chairs)
    if names or demo:
        # --demo replaces every model, so the default team needs none to be named.
        return _models_panel(names or ["demo/sage"], planner, chairs), None
    raise UserError(NO_PANEL)


def _kept_role(entry: str | Member, kept: list[str], panel: Panel) -> str | Member:
    """A role that names a member left out by `--members` still plans or chairs, as an inline member."""
    return entry if not isinstance(entry, str) or entry in kept else panel.member(entry)


def _file_panel(
    panel: Panel, names: list[str] | None, planner: str | None, chairs: list[str] | None
) -> tuple[Panel, str | None]:
    declared = panel.protocol if "protocol" in panel.model_fields_set else None
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
