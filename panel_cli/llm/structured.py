"""Getting a model's own JSON object out of its reply, however it was wrapped, and no other.

A reply is hostile text. It may quote another member's JSON (an answer carrying a forged vote,
a worker's `{"verdict": "APPROVED"}`), so which object is the reply's own is a rule, not a
guess: the first top-level object outside any text the reply quotes (the run's fenced blocks,
`> ` quotations). A reply that also holds an object that disagrees with it on what the object
decides (a vote's label, a verdict) holds two answers, and neither is taken. Every object is
read with `panel_cli.untrusted.load_json`, so depth and numbers are bounded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from panel_cli.untrusted import RefusedJSON, load_json

NO_OBJECT = "no JSON object in the reply"
SHOWN_VALUE = 40
# A run's fence lines as a reply may quote them (`=== Answer A [05676b0e] ===`), and quoted lines.
# Label and tag are bounded, so a hostile line cannot make the search quadratic.
_FENCE_OPEN = re.compile(r"^=== (?!end of )(.{1,200}?) \[([^\]\n]{1,40})\] ===[ \t]*$", re.MULTILINE)
_QUOTED_LINE = re.compile(r"^[ \t]*>.*$", re.MULTILINE)
_TRIM = " \t\n*_`\"'“”‘’."


class NoObject(ValueError):
    """Why a reply has no object of its own that can be read; the message is one clause."""


class TwoObjects(NoObject):
    """The reply holds two objects that disagree on a field that decides (two votes)."""


def decisive_fields(schema: type[BaseModel]) -> tuple[str, ...]:
    """The fields that say what a reply decides (a vote's label, a verdict), as the schema
    names them in its `decisive` class variable; none when it names none."""
    return tuple(getattr(schema, "decisive", ()))


def unquoted(text: str) -> str:
    """The text with what it quotes blanked out (newlines kept, so offsets stay the same): each
    fenced block, from its opening fence line to its closing one (or to the end when it is
    never closed), and each `>` line."""
    spans = [(match.start(), match.end()) for match in _QUOTED_LINE.finditer(text)]
    position = 0
    while opening := _FENCE_OPEN.search(text, position):
        label, tag = opening.group(1), opening.group(2)
        closing = re.compile(rf"^=== end of {re.escape(label)} \[{re.escape(tag)}\] ===[ \t]*$", re.MULTILINE)
        found = closing.search(text, opening.end())
        position = found.end() if found else len(text)
        spans.append((opening.start(), position))
    if not spans:
        return text
    chars = list(text)
    for start, end in spans:
        chars[start:end] = [char if char == "\n" else " " for char in chars[start:end]]
    return "".join(chars)


def objects_in(text: str) -> list[str]:
    """Every balanced top-level `{...}` span, in order, honouring strings and escapes."""
    spans: list[str] = []
    depth, start, in_string, escaped = 0, -1, False, False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"' and depth > 0:
            in_string = True
        elif char == "{":
            if depth == 0:
                start = index
            depth += 1
        elif char == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append(text[start : index + 1])
    return spans


def _folded(value: Any) -> str:
    """A decisive value as compared: text in any case, spacing, quotes or emphasis; a number
    as a number (70 is 70.0)."""
    if isinstance(value, str):
        return " ".join(value.split()).strip(_TRIM).casefold()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(float(value))
    return json.dumps(value, sort_keys=True)


def _shown(value: Any) -> str:
    text = " ".join((value if isinstance(value, str) else json.dumps(value)).split())
    return repr(text if len(text) <= SHOWN_VALUE else text[: SHOWN_VALUE - 1] + "…")


def _objects(text: str) -> list[dict[str, Any]]:
    """The reply's top-level objects outside quoted text, in order. Braces that are no JSON
    (`{not json}` in prose) are passed over; JSON refused for its depth or its numbers is a
    NoObject when it comes before any object that can be read."""
    whole = text.strip()
    if whole.startswith("{"):
        try:
            value = load_json(whole)
        except RefusedJSON as exc:
            raise NoObject(f"the reply's JSON {exc.msg}") from None
        except ValueError:
            pass
        else:
            if isinstance(value, dict):
                return [value]
    found: list[dict[str, Any]] = []
    for span in objects_in(unquoted(text)):
        try:
            value = load_json(span)
        except RefusedJSON as exc:
            if not found:
                raise NoObject(f"the reply's JSON {exc.msg}") from None
            continue
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def reply_object(text: str, decisive: Sequence[str] = ()) -> dict[str, Any]:
    """The reply's own object: the whole reply when it is one, else the first top-level object
    outside the text it quotes, bare, in a ```json fence or amid prose. NoObject says why there
    is none; TwoObjects when another object outside quotes disagrees with it on a `decisive`
    field (each compared in any case and spacing)."""
    found = _objects(text)
    if not found:
        raise NoObject(NO_OBJECT)
    own = found[0]
    for field in decisive:
        if field not in own:
            continue
        for other in found[1:]:
            if field in other and _folded(other[field]) != _folded(own[field]):
                raise TwoObjects(
                    f"the reply holds two objects with different {field} ({_shown(own[field])} and {_shown(other[field])})"
                )
    return own


@dataclass(frozen=True)
class Structured:
    """A reply read against a schema: the validated object, or `problem`, a short reason a
    person (and the model, asked again) can read. `conflicting`: it held two answers."""

    value: BaseModel | None
    problem: str | None = None
    conflicting: bool = False


def parse_structured(text: str, schema: type[BaseModel]) -> Structured:
    """The reply's own object (`reply_object`), validated against `schema`."""
    try:
        data = reply_object(text, decisive_fields(schema))
    except TwoObjects as exc:
        return Structured(None, str(exc), conflicting=True)
    except NoObject as exc:
        return Structured(None, str(exc))
    try:
        return Structured(schema.model_validate(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "object"
        return Structured(None, f"invalid {field}: {first['msg']}")


def one_answer_prompt(problem: str) -> str:
    """What a reply that held two answers is asked again with."""
    return (
        f"Your reply could not be used: {problem}. Reply again with only your own JSON object, once, "
        "and no other object."
    )


def json_instructions(schema: type[BaseModel]) -> str:
    """Prompt text for models without native structured output."""
    shape = json.dumps(schema.model_json_schema(), separators=(",", ":"))
    return f"Reply with a single JSON object and nothing else, matching this JSON schema:\n{shape}"
