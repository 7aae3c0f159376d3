"""How a protocol command gets its panel: a file, `--members`, the user's default panel, or
the demo panel; and the `--members` and `--timeout` options that go with it.

Every command that accepts `--members` builds its panel here, so `panel vote --members …`
behaves exactly like `panel council --members …`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from panel_cli.cli import completion

if TYPE_CHECKING:
    from panel_cli.config import Panel, Protocol

MEMBERS = typer.Option(
    None,
    "--members",
    help="Members, comma-separated: aliases or litellm model ids (no file needed), or names from the file.",
    autocompletion=completion.member_names,
)
TIMEOUT = typer.Option(None, "--timeout", help="Time limit per stage, like 90s, 3m or none.")


# The panel `--demo` seats when no file, no --members and no default panel name any member:
# the first four personas, so `as_demo` leaves each on its own persona.
DEMO_PERSONAS = ("sage", "skeptic", "pragmatist", "optimist")
DEFAULT_PANEL_FILE = "defaults.yaml"


def panel_for(
    panel_file: Path | None, members: str | None, chairman: str | None, protocol: Protocol, *, demo: bool = False
) -> tuple[Panel, str | None]:
    """The panel of a run, and the protocol its file declares (if any). The members come from
    `--members` (model names or aliases; with a file, only those of its members), else the
    file, else the default panel the user keeps in the config directory (`defaults.yaml`, a
    panel file), else, with `--demo`, four demo personas. `--chairman` is a name, or several
    for backups, in order."""
    from panel_cli.cli.running import declared_protocol, parse_names
    from panel_cli.config import load_panel, panel_from_members

    names = parse_names(members, "--members")
    chairs = parse_names(chairman, "--chairman")
    if panel_file is None and names:
        return panel_from_members(names, chairs, protocol), None
    panel = load_panel(panel_file) if panel_file is not None else _default_panel(protocol, demo)
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


def default_panel_file() -> Path:
    from panel_cli.llm.aliases import config_dir

    return config_dir() / DEFAULT_PANEL_FILE


def _default_panel(protocol: Protocol, demo: bool) -> Panel:
    """The user's default panel, else the demo panel with `--demo`, else one sentence naming
    every way to give members."""
    from panel_cli.config import Panel, load_panel
    from panel_cli.errors import UserError

    path = default_panel_file()
    if path.is_file():
        return load_panel(path)
    if demo:
        members = [{"name": persona, "model": f"demo/{persona}"} for persona in DEMO_PERSONAS]
        return Panel.model_validate({"name": "demo", "protocol": protocol, "members": members})
    raise UserError(
        f'Give a panel file or --members (e.g. panel {protocol} --members gpt-4o,claude -q "Your question"), '
        f"keep a default panel in {path} (members: as in a panel file), or add --demo to try four demo personas."
    )


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
    limits = Timeouts.model_validate(
        {**panel.timeouts.model_dump(exclude_unset=True), **dict.fromkeys(stages, seconds)}
    )
    return panel.model_copy(update={"timeouts": limits})
