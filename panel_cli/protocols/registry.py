"""The protocols panel can run: each declared once, by the `PROTOCOL` spec in its own package.

A protocol is a package under `panel_cli/protocols/` whose `__init__` holds `PROTOCOL`, a `ProtocolSpec`:
its name, its command's help and options and how each maps onto the panel, and where its
engine, rules and estimate plan live. Everything else is derived from the spec: the names a
panel file may give as `protocol:`, `panel validate`'s checks, the Typer command, `panel run`,
`panel resume`, `panel estimate`, batch and eval.

This module and every spec stay light (no pydantic, no config, no litellm): `panel --help`
lists every protocol's command from its spec alone. The heavy parts are named by import path
(`"panel_cli.protocols.confer.engine:confer"`) and imported only when a run needs them; a spec
registered from Python (a test, a plugin) may give the objects themselves.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from panel_cli.config import Panel
    from panel_cli.estimate.plans import Bound, RunPlan
    from panel_cli.protocols.base import Engine, ProtocolRules

    PanelChange = Callable[[Panel, Any], Panel]
    PlanFunction = Callable[[Panel, str, Bound], RunPlan]

# A reference to something heavy: "package.module:attribute", or the object itself.
Ref = Any

OptionKind = Literal["text", "int", "float", "flag", "words"]


class PanelSource(StrEnum):
    """Where a protocol's command finds its panel. `file`: a panel file, always. `file_or_members`:
    a file, else `--members` (model names), else the user's default panel, else `--demo`'s
    personas. A protocol with another rule gives its own function (orchestrate)."""

    FILE = "file"
    FILE_OR_MEMBERS = "file_or_members"


@dataclass(frozen=True)
class CommandOption:
    """One option of a protocol's command, declared once: how the command line spells it, and
    how its value changes the panel.

    `field`: the panel field it sets, validated by the panel model itself, so the command line
    and the file accept the same values (a flag sets `flag_value`). `change`: for an option that
    does more than set a field, a function of the panel and the value, returning the new panel.
    Neither: the value is read by the panel's source (`--members`, `--chairman`). `requires`:
    the option only makes sense when another field has this value (`--threshold` needs
    `method: supermajority`), checked once every option is applied. `noun`: what one of the
    field's choices is called in an error (`'x' is not a method; choose …`). `completion`: a
    function of `panel_cli.cli.completion` that offers values. `verdict`: for an option that
    judges the run's result rather than changing the panel (`--gate`), its
    `panel_cli.protocols.gates.GateRule`."""

    name: str
    flag: str
    help: str
    kind: OptionKind = "text"
    field: str | None = None
    flag_value: Any = True
    change: Ref | None = None
    requires: tuple[str, str] | None = None
    noun: str = "choice"
    minimum: float | None = None
    maximum: float | None = None
    metavar: str | None = None
    completion: str | None = None
    short: str | None = None
    verdict: Ref | None = None


@dataclass(frozen=True)
class ProtocolSpec:
    """Everything panel needs to know about a protocol.

    `summary` is the command's one-line help (`description`, more, shown below it); `engine`,
    `rules` (`panel_cli.protocols.base.ProtocolRules`) and `plan` (the calls a run makes, for
    `panel estimate`) are references, imported when used. A built-in protocol may leave them
    out: its package's `engine:<name>`, `engine:RULES` and `estimate:plan_calls` are taken. One
    registered from Python gives its engine and rules (a protocol without a plan has no
    estimate). `source` is how its command finds the
    panel (`PanelSource`, or a reference to a function of the panel its file holds (None
    without one), the given options and `--demo`, returning the panel and the protocol its file
    declares); `options` are its own command
    options, in the order they apply; `stage_views` the live view's table for each of its
    stages that is not a plain table of calls, by stage name: a reference to a function of
    the stage, its round and what the view has seen of the run (`panel_cli.view.tables.RunSoFar`),
    returning the stage's state (its own module under `panel_cli/view/`)."""

    name: str
    summary: str
    engine: Ref | None = None
    rules: Ref | None = None
    plan: Ref | None = None
    description: str = ""
    source: PanelSource | Ref = PanelSource.FILE_OR_MEMBERS
    options: tuple[CommandOption, ...] = ()
    stage_views: Mapping[str, Ref] = field(default_factory=dict)

    def option(self, name: str) -> CommandOption:
        return next(option for option in self.options if option.name == name)


def resolve(ref: Ref) -> Any:
    """The object a reference names (`"module:attribute"`), or the reference itself."""
    if not isinstance(ref, str):
        return ref
    module, _, attribute = ref.partition(":")
    return getattr(importlib.import_module(module), attribute)


# Specs registered from Python (`register`), by name, after the built-in ones.
_REGISTERED: dict[str, ProtocolSpec] = {}


@cache
def _builtin_names() -> tuple[str, ...]:
    """Every package under panel_cli/protocols is a protocol (a listing of the folder: nothing is imported)."""
    import panel_cli.protocols as package

    return tuple(sorted(info.name for info in pkgutil.iter_modules(package.__path__) if info.ispkg))


def names() -> tuple[str, ...]:
    """Every protocol's name: the built-in ones, then those registered from Python."""
    return (*_builtin_names(), *(name for name in _REGISTERED if name not in _builtin_names()))


def is_protocol(name: str) -> bool:
    return name in _REGISTERED or name in _builtin_names()


def spec(name: str) -> ProtocolSpec:
    """The spec of the protocol called `name`; KeyError for a name no protocol has."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name not in _builtin_names():
        raise KeyError(name)
    found: ProtocolSpec = importlib.import_module(f"panel_cli.protocols.{name}").PROTOCOL
    return found


def specs() -> list[ProtocolSpec]:
    return [spec(name) for name in names()]


def register(protocol: ProtocolSpec) -> None:
    """Add a protocol (a test's, a plugin's); a later one of the same name replaces it."""
    _REGISTERED[protocol.name] = protocol


def unregister(name: str) -> None:
    _REGISTERED.pop(name, None)


def unknown_protocol(name: str) -> str:
    """One sentence for a protocol name no protocol has, with the closest one when it looks like a slip."""
    known = names()
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f"did you mean '{close[0]}'? " if close else ""
    return f"'{name}' is not a protocol; {hint}choose one of {', '.join(known)}"


def engine_of(name: str) -> Engine:
    engine: Engine = _part(spec(name), "engine", f"engine:{name}")
    return engine


def rules_of(name: str) -> ProtocolRules:
    rules: ProtocolRules = _part(spec(name), "rules", "engine:RULES")
    return rules


def plan_of(name: str) -> PlanFunction | None:
    found = spec(name).plan
    if found is None and name not in _builtin_names():
        return None
    plan: PlanFunction = _part(spec(name), "plan", "estimate:plan_calls")
    return plan


def _part(protocol: ProtocolSpec, part: str, convention: str) -> Any:
    """A part of a protocol, as its spec names it, else where a built-in package keeps it."""
    given = getattr(protocol, part)
    if given is not None:
        return resolve(given)
    if protocol.name not in _builtin_names():
        raise ValueError(f"protocol {protocol.name} gives no {part}")
    return resolve(f"panel_cli.protocols.{protocol.name}.{convention}")


# Options several protocols share, declared here once.
MEMBERS = CommandOption(
    name="members",
    flag="--members",
    help="Members, comma-separated: aliases or litellm model ids (no file needed), or names from the file.",
    completion="member_names",
)


def chairman(help: str = "Who writes the final answer; several, comma-separated, are tried in order.") -> CommandOption:
    return CommandOption(name="chairman", flag="--chairman", help=help, completion="member_names")


def timeout(stages: tuple[str, ...], help: str = "Time limit per stage, like 90s, 3m or none.") -> CommandOption:
    """`--timeout`: the same limit for each of `stages`, keeping the file's other stage limits."""
    from functools import partial

    return CommandOption(name="timeout", flag="--timeout", help=help, change=partial(_with_timeout, stages))


def _with_timeout(stages: tuple[str, ...], panel: Panel, value: str) -> Panel:
    from panel_cli.config import parse_duration

    return panel.with_stage_limits(stages, parse_duration(value))


def max_rounds(help: str) -> CommandOption:
    return CommandOption(
        name="max_rounds", flag="--max-rounds", help=help, kind="int", field="max_rounds", minimum=1, maximum=50
    )


def no_convergence(help: str) -> CommandOption:
    return CommandOption(
        name="no_convergence",
        flag="--no-convergence",
        help=help,
        kind="flag",
        field="until_convergence",
        flag_value=False,
    )


# What a spec's options give, by option name (None: not given), as the run core reads them.
GivenOptions = Mapping[str, Any]


def empty_options(protocol: ProtocolSpec) -> dict[str, Any]:
    """Every option of a protocol, not given: what `panel run` and a resumed run start from."""
    return {option.name: None for option in protocol.options}
