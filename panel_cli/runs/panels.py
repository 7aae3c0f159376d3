"""The panel a protocol runs: found as its spec says (a file, `--members`, the user's default
panel, the demo personas), then changed by the options given, in the order the spec declares
them, then checked as `panel validate` checks it.

Every protocol's command, `panel run`, batch and eval build their panels here, so
`panel vote --members …` behaves exactly like `panel council --members …`, and an option
refuses what the panel file would refuse (each field is validated by the panel model itself).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from panel_cli.config import Panel, load_panel, panel_from_members, parse_names
from panel_cli.errors import UserError
from panel_cli.located_yaml import describe_error
from panel_cli.protocols.checks import check_panel
from panel_cli.protocols.registry import CommandOption, PanelSource, ProtocolSpec, resolve
from panel_cli.untrusted import writable

# The panel `--demo` seats when no file, no --members and no default panel name any member:
# the first five personas (an odd number, so a two-option vote cannot tie), each left on its
# own persona by `as_demo`.
DEMO_PERSONAS = ("sage", "skeptic", "pragmatist", "optimist", "engineer")
DEFAULT_PANEL_FILE = "defaults.yaml"

# A protocol's own way to find its panel: (panel file, given options, --demo) -> (panel, the
# protocol its file declares).
PanelSourceFunction = Callable[[Path | None, Mapping[str, Any], bool], tuple[Panel, str | None]]


@dataclass(frozen=True)
class RunPanel:
    """The panel a run will run, and the warnings its checks found (raised inside the run, so
    they are shown and stored with it)."""

    panel: Panel
    warnings: list[str]


def panel_for_run(
    protocol: ProtocolSpec,
    panel_file: Path | None,
    given: Mapping[str, Any],
    *,
    demo: bool = False,
    attach: Sequence[Path] | None = None,
) -> RunPanel:
    """The panel of a run of `protocol`: found, changed by the `given` options (by option name;
    None or False: not given), the demo personas swapped in with `demo`, `attach`'s files
    added, and checked. Raises UserError for any problem, in one sentence."""
    if isinstance(protocol.source, PanelSource):
        panel, declared = _found(protocol, panel_file, given, demo)
    else:
        source: PanelSourceFunction = resolve(protocol.source)
        panel, declared = source(panel_file, given, demo)
    panel = apply_options(protocol, panel.model_copy(update={"protocol": protocol.name}), given)
    for path in attach or ():
        if writable(str(path)) != str(path):
            # A name holding bytes that are not UTF-8 could be read but never stored or shown.
            raise UserError(
                f"--attach {writable(str(path))}: its name is not UTF-8 text; rename the file to attach it."
            )
    panel = (panel.as_demo() if demo else panel).with_attachments(list(attach) if attach else None)
    return RunPanel(panel=panel, warnings=check_panel(panel, protocol.name, declared))


def apply_options(protocol: ProtocolSpec, panel: Panel, given: Mapping[str, Any]) -> Panel:
    """Each given option's change to the panel, in the spec's order; then every option that
    only makes sense beside another field's value (`--threshold` with supermajority) is checked."""
    for option in protocol.options:
        value = given.get(option.name)
        if not _given(value) or (option.field is None and option.change is None):
            continue
        panel = _applied(option, panel, value)
    for option in protocol.options:
        if option.requires is None or not _given(given.get(option.name)):
            continue
        field, wanted = option.requires
        if getattr(panel, field) != wanted:
            flag = next((other.flag for other in protocol.options if other.field == field), field)
            raise UserError(f"{option.flag} applies to {flag} {wanted}, not {getattr(panel, field)}.")
    return panel


def _given(value: Any) -> bool:
    """Whether an option was given: a value, a flag set, or at least one word (`--options`)."""
    return value is not None and value is not False and value != [] and value != ()


def _applied(option: CommandOption, panel: Panel, value: Any) -> Panel:
    try:
        if option.change is not None:
            changed: Panel = resolve(option.change)(panel, value)
            return changed
        assert option.field is not None
        return panel.with_value(option.field, option.flag_value if option.kind == "flag" else value)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise UserError(f"{option.flag}: {_option_problem(option, dict(error), value)}.") from None
    except ValueError as exc:
        raise UserError(f"{option.flag}: {str(exc).rstrip('.')}.") from None


def _option_problem(option: CommandOption, error: dict[str, Any], value: Any) -> str:
    """A field's validation error as said of a command-line value: a choice names the choices."""
    if error["type"] == "literal_error":
        return f"'{value}' is not a {option.noun}; choose {error['ctx']['expected'].replace(chr(39), '')}"
    return describe_error(error)


def declared_protocol(panel: Panel) -> str | None:
    """The protocol a panel file names, or None when it names none (read before a command
    sets the protocol it runs)."""
    return panel.protocol if "protocol" in panel.model_fields_set else None


def _found(
    protocol: ProtocolSpec, panel_file: Path | None, given: Mapping[str, Any], demo: bool
) -> tuple[Panel, str | None]:
    if protocol.source is PanelSource.FILE:
        if panel_file is None:
            raise UserError(f"Give a panel file: panel {protocol.name} FILE.")
        panel = load_panel(panel_file)
        return panel, declared_protocol(panel)
    return panel_for(panel_file, given.get("members"), given.get("chairman"), protocol.name, demo=demo)


def panel_for(
    panel_file: Path | None, members: str | None, chairman: str | None, protocol: str, *, demo: bool = False
) -> tuple[Panel, str | None]:
    """The panel of a run, and the protocol its file declares (if any). The members come from
    `--members` (model names or aliases; with a file, only those of its members), else the
    file, else the default panel the user keeps in the config directory (`defaults.yaml`, a
    panel file), else, with `--demo`, five demo personas. `--chairman` is a name, or several
    for backups, in order."""
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
    return panel, declared


def default_panel_file() -> Path:
    from panel_cli.llm.aliases import config_dir

    return config_dir() / DEFAULT_PANEL_FILE


def _default_panel(protocol: str, demo: bool) -> Panel:
    """The user's default panel, else the demo panel with `--demo`, else one sentence naming
    every way to give members."""
    path = default_panel_file()
    if path.is_file():
        return load_panel(path)
    if demo:
        members = [{"name": persona, "model": f"demo/{persona}"} for persona in DEMO_PERSONAS]
        return Panel.model_validate({"name": "demo", "protocol": protocol, "members": members})
    raise UserError(
        f'Give a panel file or --members (e.g. panel {protocol} --members gpt-4o,claude -q "Your question"), '
        f"keep a default panel in {path} (members: as in a panel file), or add --demo to try five demo personas."
    )
