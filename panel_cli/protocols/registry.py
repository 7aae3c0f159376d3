"""The protocols panel can run: each declared once, by the `PROTOCOL` spec in its own package.

A protocol is a package under `panel_cli/protocols/` whose `__init__` holds `PROTOCOL`, a `ProtocolSpec`:
its name, its command's help and options and how each maps onto the panel, and where its
engine, rules and estimate plan live. Everything else is derived from the spec: the names a
panel file may give as `protocol:`, `panel validate`'s checks, the Typer command, `panel run`,
`panel resume`, `panel estimate`, batch and eval.

A spec also says what the rest of panel would otherwise ask of a protocol by its name: the
settings it reads from a panel file (a model in its package), the kinds of request its
engine makes and how the demo personas and the simulated voters answer each, the lines the
plain view writes for its own events, and its traits (it votes on fixed options, is given a
question's options, deliberates, can be re-tallied, has a closed-form theory and where).
Eval, batch, history and the views read these; none of them names a protocol.

This module and every spec stay light (no pydantic, no config, no litellm): `panel --help`
lists every protocol's command from its spec alone. It imports nothing of panel's, so the
panel model (`panel_cli.config`) checks a file's `protocol:` against it from below; the
options several protocols share are `panel_cli.protocols.options`. The heavy parts are named by import path
(`"panel_cli.protocols.confer.engine:confer"`) and imported only when a run needs them; a spec
registered from Python (a test, a plugin) may give the objects themselves, and is checked
whole when it is registered (`problems_of`), so a part it lacks is an error then, not at run time.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any, Literal

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
class RequestKind:
    """A kind of request an engine makes: its `name` (the brief's `task`, the prompt's marker)
    and who answers it offline. `demo`: a function of the persona, the brief and the seed
    returning the demo persona's reply (`panel_cli.llm.demo_replies`). `oracle`: a function of
    the simulated voter (`panel_cli.models.personas.OracleSpec`), what it believes (None: it
    knows no answer) and the brief, returning its reply (`panel_cli.simulation.voters`); None:
    a simulated voter answers with its belief alone, on the first line."""

    name: str
    demo: Ref
    oracle: Ref | None = None


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
    returning the stage's state (its own module under `panel_cli/view/`).

    `settings`: the model of what it reads from a panel file beyond the fields every protocol
    shares (a `panel_cli.config.ProtocolSettings`, in its package's `settings.py`), which its
    engine reads typed (`Settings.of(panel)`); None: nothing more. `requests`: the kinds of
    request its engine makes beyond those every protocol may (`SHARED_REQUESTS`). `events`: its
    own event types (`panel_cli.events.BaseEvent`, each with its `type`), for a protocol outside
    panel (the built-in ones are `panel_cli.events`'); `plain_lines`: the plain view's line for
    each of its events, by type (a function of the event returning its line).

    Its traits, for eval, batch, history and the views: `votes_on_options`, members vote on
    fixed options (eval asks a question's options as the ballot, and only multiple-choice
    questions; a batch question may give its own); `given_options`, a run is told the
    question's options as the panel's `options`; `deliberates`, its rounds show members each
    other's answers (where simulated voters herd or are persuaded); `retallies`, its stored
    ballots can be counted again (`panel history retally`). `theory`: a function of the panel and
    its simulated voters returning the rule eval's closed-form theory counts them by
    (`panel_cli.eval.rules`), None for a panel it has none for, `no_theory` saying why;
    `unmeasurable`: why simulated voters cannot play it at all (its answer is not theirs), or
    None."""

    name: str
    summary: str
    engine: Ref | None = None
    rules: Ref | None = None
    plan: Ref | None = None
    description: str = ""
    source: PanelSource | Ref = PanelSource.FILE_OR_MEMBERS
    options: tuple[CommandOption, ...] = ()
    stage_views: Mapping[str, Ref] = field(default_factory=dict)
    settings: Ref | None = None
    requests: tuple[RequestKind, ...] = ()
    events: tuple[Ref, ...] = ()
    plain_lines: Ref | None = None
    votes_on_options: bool = False
    given_options: bool = False
    deliberates: bool = False
    retallies: bool = False
    theory: Ref | None = None
    no_theory: str | None = None
    unmeasurable: str | None = None

    def option(self, name: str) -> CommandOption:
        return next(option for option in self.options if option.name == name)


# The kinds of request any protocol may make (and eval's judge), declared once here.
SHARED_REQUESTS = (
    RequestKind("answer", demo="panel_cli.llm.demo_replies:answer", oracle="panel_cli.simulation.voters:oracle_answer"),
    RequestKind("synthesis", demo="panel_cli.llm.demo_replies:synthesis"),
    RequestKind("judge", demo="panel_cli.llm.demo_replies:judge", oracle="panel_cli.simulation.voters:oracle_judge"),
)


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
    folder = str(Path(__file__).parent)
    return tuple(sorted(info.name for info in pkgutil.iter_modules([folder]) if info.ispkg))


def names() -> tuple[str, ...]:
    """Every protocol's name: the built-in ones, then those registered from Python."""
    return (*_builtin_names(), *(name for name in _REGISTERED if name not in _builtin_names()))


def is_protocol(name: str) -> bool:
    return name in _REGISTERED or name in _builtin_names()


def is_builtin(name: str) -> bool:
    """Whether `name` is a package under panel_cli/protocols (one registered from Python is not)."""
    return name in _builtin_names()


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
    """Add a protocol (a test's, a plugin's); a later one of the same name replaces it. It is
    checked whole first: ValueError, naming everything it lacks (`problems_of`)."""
    problems = problems_of(protocol)
    if problems:
        raise ValueError(f"protocol {protocol.name}: {'; '.join(problems)}")
    _REGISTERED[protocol.name] = protocol


def unregister(name: str) -> None:
    _REGISTERED.pop(name, None)


def unknown_protocol(name: str) -> str:
    """One sentence for a protocol name no protocol has, with the closest one when it looks like a slip."""
    known = names()
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f"did you mean '{close[0]}'? " if close else ""
    return f"'{name}' is not a protocol; {hint}choose one of {', '.join(known)}"


def part_of(protocol: ProtocolSpec, part: str, convention: str) -> Any:
    """A part of a protocol (`engine`, `rules`, `plan`), as its spec names it, else where a
    built-in package keeps it (`convention`, like `engine:RULES`). Typed where each part's type
    is defined: `panel_cli.protocols.base.engine_of` and `rules_of`, `panel_cli.protocols.plans.plan_of`."""
    given = getattr(protocol, part)
    if given is not None:
        return resolve(given)
    if protocol.name not in _builtin_names():
        raise ValueError(f"protocol {protocol.name} gives no {part}")
    return resolve(f"panel_cli.protocols.{protocol.name}.{convention}")


# What a spec's options give, by option name (None: not given), as the run core reads them.
GivenOptions = Mapping[str, Any]


def empty_options(protocol: ProtocolSpec) -> dict[str, Any]:
    """Every option of a protocol, not given: what `panel run` and a resumed run start from."""
    return {option.name: None for option in protocol.options}


# What a spec declares, looked up across every protocol -------------------------------------------


class UnknownRequestKind(LookupError):
    """An engine asked for a kind of request no protocol declares: a mistake in its code."""


@cache
def _builtin_kinds() -> dict[str, RequestKind]:
    kinds = {kind.name: kind for kind in SHARED_REQUESTS}
    for name in _builtin_names():
        kinds.update((kind.name, kind) for kind in spec(name).requests)
    return kinds


def request_kinds() -> dict[str, RequestKind]:
    """Every kind of request an engine may make, by name: the shared ones, the built-in
    protocols', then those of the protocols registered from Python."""
    kinds = dict(_builtin_kinds())
    for protocol in _REGISTERED.values():
        kinds.update((kind.name, kind) for kind in protocol.requests)
    return kinds


def request_kind(name: str) -> RequestKind:
    """The kind of request called `name`; UnknownRequestKind when no protocol declares it."""
    found = request_kinds().get(name)
    if found is None:
        raise UnknownRequestKind(
            f"no protocol declares the request kind '{name}'; a protocol's spec lists the kinds its engine makes"
        )
    return found


def event_class(kind: str) -> Any | None:
    """The event class a protocol declares for the event type `kind` (its spec's `events`), or
    None. The built-in event types are `panel_cli.events`' and are not looked up here."""
    for protocol in specs():
        for ref in protocol.events:
            found = resolve(ref)
            if _event_type(found) == kind:
                return found
    return None


def plain_lines() -> dict[str, Any]:
    """The plain view's line for each protocol's own events, by event type."""
    lines: dict[str, Any] = {}
    for protocol in specs():
        if protocol.plain_lines is not None:
            lines.update(resolve(protocol.plain_lines))
    return lines


def _event_type(event: Any) -> Any:
    fields = getattr(event, "model_fields", {})
    return fields["type"].default if "type" in fields else None


def problems_of(protocol: ProtocolSpec) -> list[str]:
    """What is wrong with a spec, each in a few words: a reference that does not resolve, a
    protocol from outside panel without an engine or rules, a request kind another protocol
    declares otherwise or without a callable reply, a setting that shadows a field every
    protocol shares, an option that sets a field neither the panel nor its settings has, an
    event type that is already taken, a plain line for an event type nobody declares. Every
    reference is imported to check it: a test runs this on each built-in spec."""
    problems: list[str] = []
    parts: dict[str, Any] = {}
    references = {
        "engine": protocol.engine,
        "rules": protocol.rules,
        "plan": protocol.plan,
        "settings": protocol.settings,
        "plain_lines": protocol.plain_lines,
        "theory": protocol.theory,
    }
    for part, ref in references.items():
        if ref is None:
            if part in ("engine", "rules") and not is_builtin(protocol.name):
                problems.append(f"it gives no {part}")
            continue
        try:
            parts[part] = resolve(ref)
        except (ImportError, AttributeError) as exc:
            problems.append(f"its {part} {ref!r} cannot be imported ({exc})")
    problems += _request_problems(protocol)
    common = resolve("panel_cli.config:Panel").model_fields
    own = getattr(parts.get("settings"), "model_fields", {})
    problems += [f"its setting '{name}' is a field every protocol shares" for name in own if name in common]
    problems += [
        f"{option.flag} sets '{option.field}', neither a panel field nor one of its settings"
        for option in protocol.options
        if option.field is not None and option.field not in common and option.field not in own
    ]
    problems += _event_problems(protocol, parts.get("plain_lines"))
    return problems


def _request_problems(protocol: ProtocolSpec) -> list[str]:
    problems: list[str] = []
    others = dict(_builtin_kinds())
    for other in _REGISTERED.values():
        if other.name != protocol.name:
            others.update((kind.name, kind) for kind in other.requests)
    for kind in protocol.requests:
        if kind.name in others and others[kind.name] != kind:
            problems.append(f"the request kind '{kind.name}' is declared otherwise elsewhere")
        for role, ref in (("demo", kind.demo), ("oracle", kind.oracle)):
            if ref is None and role == "oracle":
                continue
            try:
                reply = resolve(ref)
            except (ImportError, AttributeError) as exc:
                problems.append(f"the {role} reply of '{kind.name}' cannot be imported ({exc})")
                continue
            if not callable(reply):
                problems.append(f"the {role} reply of '{kind.name}' is not a function")
    return problems


def _event_problems(protocol: ProtocolSpec, lines: Any) -> list[str]:
    builtin = resolve("panel_cli.events:EVENT_TYPES")
    taken = {_event_type(resolve(ref)) for other in specs() if other.name != protocol.name for ref in other.events}
    problems: list[str] = []
    own: set[str] = set()
    for ref in protocol.events:
        try:
            kind = _event_type(resolve(ref))
        except (ImportError, AttributeError) as exc:
            problems.append(f"its event {ref!r} cannot be imported ({exc})")
            continue
        if not isinstance(kind, str):
            problems.append(f"its event {ref!r} has no `type`")
        elif kind in builtin or kind in taken:
            problems.append(f"the event type '{kind}' is taken")
        else:
            own.add(kind)
    problems += [
        f"it has a plain line for '{kind}', an event type it does not declare"
        for kind in lines or {}
        if kind not in own and kind not in builtin
    ]
    return problems
