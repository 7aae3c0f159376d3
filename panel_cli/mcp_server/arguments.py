"""Each protocol tool's arguments: a JSON Schema built from the protocol's spec, and the one check
every request's arguments go through before anything else happens.

The arguments are `question`, `panel` (a name from the panel folder), the protocol's own options
as its spec declares them (named after their flags: vote's `--options` is `options`, confer's
`--max-rounds` is `max_rounds`), `max_cost`, and `attach` when the server was given a files
folder. The schema is the contract: it bounds every string, list and number, refuses arguments
it does not name, and the server enforces exactly the schema it publishes (`read_arguments`),
so an agent that reads the schema is never surprised, and a hostile request meets one failure
path: a `UserError` of one sentence.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from panel_cli.batch.questions import QUESTION_LIMIT
from panel_cli.config import field_choices
from panel_cli.errors import UserError
from panel_cli.mcp_server.folders import quoted
from panel_cli.protocols.registry import CommandOption, ProtocolSpec
from panel_cli.tools.attachments import MAX_ATTACHMENTS

# An option's text (`--chairman a,b`, `--timeout 3m`) and each word of a list (`--options`).
TEXT_LIMIT = 1_000
WORDS_LIMIT = 100
# A number option with no bound of its own (`--quorum` has no maximum) is still bounded.
INTEGER_LIMIT = 1_000_000
NAME_LIMIT = 200
PATH_LIMIT = 1_000
# No valid request comes near these (an object of lists of strings), so anything past them is
# refused before the schema is even consulted: a validator recurses into a value it is given,
# and quotes it whole in its messages.
MAX_DEPTH = 4
MAX_VALUES = 10_000
MAX_CHARACTERS = 1_000_000
# What a tool's arguments may be called besides the protocol's own options.
COMMON = ("question", "panel", "max_cost", "attach")
JSON_TYPES = {"text": "string", "int": "integer", "float": "number", "flag": "boolean"}


def argument_name(option: CommandOption) -> str:
    """The argument an option is given as: its flag, as a JSON name (`--max-rounds`: `max_rounds`)."""
    return option.flag.lstrip("-").replace("-", "_")


def option_schema(option: CommandOption, protocol: str) -> dict[str, Any]:
    """An option's JSON Schema, typed from its kind and bounded by its minimum and maximum."""
    if option.kind == "words":
        word = {"type": "string", "minLength": 1, "maxLength": TEXT_LIMIT}
        return {"type": "array", "items": word, "minItems": 1, "maxItems": WORDS_LIMIT, "description": option.help}
    schema: dict[str, Any] = {"type": JSON_TYPES[option.kind], "description": option.help}
    if option.name == "members":
        schema["description"] += " Here the panel is always a file: only names of its members."
    if option.kind == "text":
        schema["maxLength"] = TEXT_LIMIT
        if option.field is not None and option.change is None and (choices := field_choices(option.field, protocol)):
            schema["enum"] = choices
    if option.kind in ("int", "float"):
        schema["minimum"] = option.minimum if option.minimum is not None else -INTEGER_LIMIT
        schema["maximum"] = option.maximum if option.maximum is not None else INTEGER_LIMIT
    return schema


@dataclass(frozen=True)
class PanelChoice:
    """What the `panel` argument offers: the panels a tool can run, and whether one is run when
    the agent names none (a `default` panel in the folder, else the user's default panel)."""

    names: Sequence[str]
    has_default: bool
    description: str


def tool_schema(protocol: ProtocolSpec, panels: PanelChoice, *, cap: float, attachments: bool) -> dict[str, Any]:
    """The input schema of `protocol`'s tool."""
    options = {argument_name(option): option for option in protocol.options}
    taken = set(options) & set(COMMON)
    if taken:
        raise ValueError(f"protocol {protocol.name}: option names {sorted(taken)} are taken by every tool")
    panel: dict[str, Any] = {"type": "string", "maxLength": NAME_LIMIT, "description": panels.description}
    if panels.names:
        panel["enum"] = list(panels.names)
    properties: dict[str, Any] = {
        "question": {
            "type": "string",
            "minLength": 1,
            "maxLength": QUESTION_LIMIT,
            "description": "The question the panel deliberates on.",
        },
        "panel": panel,
        **{name: option_schema(option, protocol.name) for name, option in options.items()},
        "max_cost": {
            "type": "number",
            "minimum": 0,
            "maximum": cap,
            "description": f"Spend at most this many US dollars on the run (at most, and by default, ${cap:g}).",
        },
    }
    if attachments:
        properties["attach"] = {
            "type": "array",
            "items": {"type": "string", "minLength": 1, "maxLength": PATH_LIMIT},
            "maxItems": MAX_ATTACHMENTS,
            "description": "Text files every member gets with the question: paths inside the server's files folder.",
        }
    return {
        "type": "object",
        "properties": properties,
        "required": ["question"] if panels.has_default else ["question", "panel"],
        "additionalProperties": False,
    }


def read_arguments(schema: Mapping[str, Any], arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """The arguments, checked against `schema` (the tool's own, as listed): every string free of
    lone surrogates and every number finite, which JSON Schema cannot say. Raises UserError
    with the first problem, in one sentence."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    given = dict(arguments or {})
    _within_bounds(given)
    error = best_match(Draft202012Validator(dict(schema)).iter_errors(given))
    if error is not None:
        raise UserError(_problem(schema, error))
    for name, value in given.items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, float) and not math.isfinite(item):
                raise UserError(f"{name}: {item} is not a number.")
            if isinstance(item, str) and any("\ud800" <= char <= "\udfff" for char in item):
                raise UserError(f"{name}: not UTF-8 text (it holds a lone surrogate).")
    return given


def _within_bounds(arguments: dict[str, Any]) -> None:
    """Refuse arguments nested deeper, holding more values or more text than any valid request,
    walking them without recursion."""
    stack: list[tuple[Any, int]] = [(arguments, 0)]
    values = characters = 0
    while stack:
        value, depth = stack.pop()
        values += 1
        if depth > MAX_DEPTH:
            raise UserError(f"The arguments are nested deeper than {MAX_DEPTH} levels; no argument is.")
        if values > MAX_VALUES:
            raise UserError(f"The arguments hold more than {MAX_VALUES:,} values; no request needs as many.")
        if isinstance(value, str):
            characters += len(value)
        elif isinstance(value, dict):
            characters += sum(len(key) for key in value if isinstance(key, str))
            stack.extend((item, depth + 1) for item in value.values())
        elif isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)
        if characters > MAX_CHARACTERS:
            raise UserError(f"The arguments hold more than {MAX_CHARACTERS:,} characters; no request needs as many.")


def given_options(protocol: ProtocolSpec, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The protocol's options as the run core reads them (`panel_cli.runs.panels`), by option name."""
    given: dict[str, Any] = {}
    for option in protocol.options:
        value = arguments.get(argument_name(option))
        if option.kind == "int" and value is not None:
            value = int(value)  # JSON Schema's integer takes 3.0
        elif option.kind == "float" and value is not None:
            value = float(value)
        given[option.name] = value
    return given


def _problem(schema: Mapping[str, Any], error: Any) -> str:
    """A schema error as one sentence that names the argument and never echoes a long value."""
    path = ".".join(str(part) for part in error.absolute_path)
    where = f"{path}: " if path else ""
    rule, bound = error.validator, error.validator_value
    known = ", ".join(schema.get("properties", {}))
    if rule == "additionalProperties":
        extra = sorted(set(error.instance) - set(schema.get("properties", {})))
        names = ", ".join(_shown(name) for name in extra[:5])
        return f"{names} {'is not an argument' if len(extra) == 1 else 'are not arguments'} of this tool; its arguments: {known}."
    if rule == "required":
        missing = [name for name in bound if name not in error.instance]
        return f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} required."
    if rule == "type":
        return f"{where}must be {_a(bound)}."
    if rule == "enum" and path == "panel":
        return f"panel: {_shown(error.instance)} is not a panel this tool runs; choose one of: {', '.join(bound)}."
    if rule == "enum":
        return f"{where}{_shown(error.instance)} is not one of: {', '.join(str(choice) for choice in bound)}."
    if rule in ("maxLength", "minLength"):
        return f"{where}must be {'at most' if rule == 'maxLength' else 'at least'} {bound:,} characters long."
    if rule in ("maxItems", "minItems"):
        return f"{where}must hold {'at most' if rule == 'maxItems' else 'at least'} {bound:,} items."
    if rule in ("maximum", "minimum"):
        return f"{where}must be {'at most' if rule == 'maximum' else 'at least'} {bound:g}."
    return f"{where}is not valid ({rule})."


def _a(kind: str) -> str:
    return {"integer": "an integer", "array": "a list", "object": "an object"}.get(kind, f"a {kind}")


def _shown(value: Any) -> str:
    return quoted(value) if isinstance(value, str) else "that value"
