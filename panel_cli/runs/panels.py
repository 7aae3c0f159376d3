"""The panel a protocol runs: found as its spec says (a file, a panel built in code, `--members`,
the user's default panel, the demo personas), then changed by the options given, in the order
the spec declares them, then checked as `panel validate` checks it; and the run's `--gate`,
armed against it.

Every protocol's command, `panel run`, the Python API, batch and eval build their panels here,
so `panel vote --members …` behaves exactly like `panel council --members …`, an option refuses
what the panel file would refuse (each field is validated by the panel model itself), and
`panel_cli.run(…, max_rounds=0)` what `--max-rounds 0` does.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from panel_cli.config import Panel, load_panel, panel_from_members, parse_names
from panel_cli.errors import OptionError, PanelFileError, UnknownOptionError, UserError
from panel_cli.located_yaml import describe_error
from panel_cli.protocols.checks import check_panel
from panel_cli.protocols.gates import Gate, GateRule
from panel_cli.protocols.registry import CommandOption, PanelSource, ProtocolSpec, resolve
from panel_cli.untrusted import writable

# The panel `--demo` seats when no file, no --members and no default panel name any member:
# the first five personas (an odd number, so a two-option vote cannot tie), each left on its
# own persona by `as_demo`.
DEMO_PERSONAS = ("sage", "skeptic", "pragmatist", "optimist", "engineer")
DEFAULT_PANEL_FILE = "defaults.yaml"
# The user's named panels (`panel_cli.run("review", …)`): NAME.yaml in this folder of the
# config directory, beside the default panel.
PANELS_FOLDER = "panels"
DEFAULT_PANEL_NAME = "default"
PANEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")

# A protocol's own way to find its panel: (the panel its file holds, or one built in code;
# None for neither, given options, --demo) -> (panel, the protocol its file declares).
PanelSourceFunction = Callable[[Panel | None, Mapping[str, Any], bool], tuple[Panel, str | None]]


@dataclass(frozen=True)
class RunPanel:
    """The panel a run will run, the warnings its checks found (raised inside the run, so
    they are shown and stored with it), and its gate (None: the run is not gated)."""

    panel: Panel
    warnings: list[str]
    gate: Gate | None = None


def panel_for_run(
    protocol: ProtocolSpec,
    source: Path | Panel | None,
    given: Mapping[str, Any],
    *,
    demo: bool = False,
    attach: Sequence[Path] | None = None,
) -> RunPanel:
    """The panel of a run of `protocol`: found (`source`: a panel file, a panel built in code,
    or None), changed by the `given` options (by option name; None or False: not given), the
    demo personas swapped in with `demo`, `attach`'s files added, and checked; the gate armed.
    Raises UserError for any problem, in one sentence (an OptionError for an option's)."""
    check_given(protocol, given)
    found = load_panel(source) if isinstance(source, Path) else source
    if isinstance(protocol.source, PanelSource):
        panel, declared = _found(protocol, found, given, demo)
    else:
        find: PanelSourceFunction = resolve(protocol.source)
        panel, declared = find(found, given, demo)
    panel = apply_options(protocol, panel.model_copy(update={"protocol": protocol.name}), given)
    for path in attach or ():
        if writable(str(path)) != str(path):
            # A name holding bytes that are not UTF-8 could be read but never stored or shown.
            raise UserError(
                f"--attach {writable(str(path))}: its name is not UTF-8 text; rename the file to attach it."
            )
    panel = (panel.as_demo() if demo else panel).with_attachments(list(attach) if attach else None)
    warnings = check_panel(panel, protocol.name, declared)
    return RunPanel(panel=panel, warnings=warnings, gate=armed_gate(protocol, panel, given))


def check_given(protocol: ProtocolSpec, given: Mapping[str, Any]) -> None:
    """That every option given is one of the protocol's, of its kind and within its bounds, as
    the command line's parser has it (a caller in Python has no parser)."""
    names = [option.name for option in protocol.options]
    unknown = [name for name in given if name not in names]
    if unknown:
        listed = ", ".join(repr(name) for name in unknown)
        raise UnknownOptionError(
            f"{protocol.name} takes no option {listed}; its options are {', '.join(names) or 'none'}."
        )
    for option in protocol.options:
        value = given.get(option.name)
        problem = None if value is None else _kind_problem(option, value)
        if problem is not None:
            raise OptionError(f"{option.flag}: {problem}.")


def _kind_problem(option: CommandOption, value: Any) -> str | None:
    """What is wrong with a value for an option of its kind, or None."""
    wanted = {"flag": "True or False", "int": "a whole number", "float": "a number", "text": "text"}
    match option.kind:
        case "flag":
            fits = isinstance(value, bool)
        case "int":
            fits = isinstance(value, int) and not isinstance(value, bool)
        case "float":
            fits = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        case "words":
            return None if _words(value) else "give a list of strings"
        case _:
            fits = isinstance(value, str)
    if not fits:
        return f"{value!r} is not {wanted[option.kind]}"
    low, high = option.minimum, option.maximum
    if (low is not None and value < low) or (high is not None and value > high):
        return f"{value} is not in the range {_bounds(low, high)}"
    return None


def _bounds(low: float | None, high: float | None) -> str:
    """A range as the command line's parser writes it: `1<=x<=50`, `x>=1`."""
    if low is not None and high is not None:
        return f"{low:g}<=x<={high:g}"
    return f"x>={low:g}" if low is not None else f"x<={high:g}"


def _words(value: Any) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(word, str) for word in value)


def armed_gate(protocol: ProtocolSpec, panel: Panel, given: Mapping[str, Any]) -> Gate | None:
    """The run's gate, when an option that judges the result (`--gate`) is given: its value
    checked against the panel now, before any call (a vote's option it does not name is exit 2)."""
    for option in protocol.options:
        value = given.get(option.name)
        # A gate's value is text (`GateRule.expect`), of a kind `check_given` has checked.
        if option.verdict is None or not isinstance(value, str):
            continue
        rule: GateRule = resolve(option.verdict)
        try:
            return Gate(rule=rule, outcome=rule.expect(panel, value))
        except ValueError as exc:
            raise OptionError(f"{option.flag}: {str(exc).rstrip('.')}.") from None
    return None


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
        if panel.setting(field) != wanted:
            flag = next((other.flag for other in protocol.options if other.field == field), field)
            raise OptionError(f"{option.flag} applies to {flag} {wanted}, not {panel.setting(field)}.")
    return panel


def _given(value: Any) -> bool:
    """Whether an option was given: a value, a flag set, or at least one word (`--options`)."""
    return value is not None and value is not False and value != [] and value != ()


def _applied(option: CommandOption, panel: Panel, value: Any) -> Panel:
    """The panel with the option's change, noting which fields the option set (the field it
    names, else those its change touched), so a later check blames the option, not the file."""
    try:
        if option.change is not None:
            changed: Panel = resolve(option.change)(panel, value)
            touched = [name for name in Panel.model_fields if getattr(changed, name) != getattr(panel, name)]
            return changed.set_by_option(touched, option.flag)
        assert option.field is not None
        changed = panel.with_value(option.field, option.flag_value if option.kind == "flag" else value)
        return changed.set_by_option([option.field], option.flag)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise OptionError(f"{option.flag}: {_option_problem(option, dict(error), value)}.") from None
    except ValueError as exc:
        raise OptionError(f"{option.flag}: {str(exc).rstrip('.')}.") from None


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
    protocol: ProtocolSpec, found: Panel | None, given: Mapping[str, Any], demo: bool
) -> tuple[Panel, str | None]:
    if protocol.source is PanelSource.FILE:
        if found is None:
            raise UserError(f"Give a panel file: panel {protocol.name} FILE.")
        return found, declared_protocol(found)
    return panel_for(found, given.get("members"), given.get("chairman"), protocol.name, demo=demo)


def panel_for(
    found: Panel | None, members: str | None, chairman: str | None, protocol: str, *, demo: bool = False
) -> tuple[Panel, str | None]:
    """The panel of a run, and the protocol its file declares (if any). The members come from
    `--members` (model names or aliases; with a file, only those of its members), else the
    file's panel (`found`, or one built in code), else the default panel the user keeps in the
    config directory (`defaults.yaml`, a panel file), else, with `--demo`, five demo personas.
    `--chairman` is a name, or several for backups, in order."""
    names = parse_names(members, "--members")
    chairs = parse_names(chairman, "--chairman")
    if found is None and names:
        return panel_from_members(names, chairs, protocol), None
    panel = found if found is not None else _default_panel(protocol, demo)
    declared = declared_protocol(panel)
    if names:
        kept = panel.chairmen() if panel.chairman is not None else []
        panel = panel.with_members(names, "--members").set_by_option(["members"], "--members", whole=False)
        if kept:
            entries = [chair.name if chair.name in names else chair for chair in kept]
            panel = panel.model_copy(update={"chairman": entries[0] if len(entries) == 1 else entries})
    if chairs:
        panel = panel.model_copy(update={"chairman": chairs[0] if len(chairs) == 1 else chairs})
        panel = panel.set_by_option(["chairman"], "--chairman")
        panel.chairmen()  # every name must be a member: fail now, in one sentence
    return panel, declared


def default_panel_file() -> Path:
    from panel_cli.models.aliases import config_dir

    return config_dir() / DEFAULT_PANEL_FILE


def panels_folder() -> Path:
    from panel_cli.models.aliases import config_dir

    return config_dir() / PANELS_FOLDER


def is_panel_name(given: str) -> bool:
    """Whether `given` names a panel rather than a file: one word (letters, digits, `.`, `_`,
    `-`) that does not end in .yaml or .yml and is not a file in the working folder. Anything
    else is a path."""
    return (
        PANEL_NAME.fullmatch(given) is not None
        and not given.lower().endswith((".yaml", ".yml"))
        and not Path(given).is_file()
    )


def named_panel_file(name: str) -> Path:
    """The file of the panel called `name`: `default` is the default panel (`defaults.yaml` in
    the config directory); any other name is NAME.yaml (or .yml) in the `panels` folder beside
    it, else the starter of that name shipped with panel (`confer.demo`, `vote`, …, as `panel
    init` writes them). PanelFileError, naming where it looked, for a name none of them has."""
    if name == DEFAULT_PANEL_NAME:
        path = default_panel_file()
        if not path.is_file():
            raise PanelFileError(f"There is no default panel yet: keep one in {path} (panel init writes a starter).")
        return path
    folder = panels_folder()
    for path in (folder / f"{name}.yaml", folder / f"{name}.yml"):
        if path.is_file():
            return path
    starter = _starter(name)
    if starter is not None:
        return starter
    raise PanelFileError(
        f"No panel is called '{name}': put it in {folder / f'{name}.yaml'}, or give the path of its file."
    )


def _starter(name: str) -> Path | None:
    """A starter panel shipped in the package (`panel_cli/starters/NAME.yaml`), but not the
    default panel's starter, which names no member of its own."""
    from importlib.resources import files

    if f"{name}.yaml" == DEFAULT_PANEL_FILE:
        return None
    found = files("panel_cli") / "starters" / f"{name}.yaml"
    return Path(str(found)) if found.is_file() else None


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
