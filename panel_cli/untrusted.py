"""Data from outside panel (a model's reply, a tool call's arguments, a line of a file a person
gave) read so that reading it cannot fail in a way nobody planned for.

`json.loads` is not total on such text. A document nested a few thousand levels deep raises
RecursionError; an integer of 5,000 digits raises a ValueError that is no JSONDecodeError,
and one of 30 digits parses but overflows SQLite's INTEGER when it is stored; an escaped lone
surrogate (`"\\ud800"`, valid JSON) gives a string that no UTF-8 writer accepts, so the store,
the terminal and every export fail on it. `load_json` bounds all three and has one failure, a
`json.JSONDecodeError` (located, like any syntax error), so every caller keeps the one
`except` it already has. `clean_text` is the same cleaning for text that arrives as text,
and takes out what a terminal would obey rather than show (escape sequences, controls).
`utf8_text` refuses, as bad input, a question whose bytes were not UTF-8.
"""

from __future__ import annotations

import json
import re
from dataclasses import fields, is_dataclass, replace
from typing import Any, TypeVar

from panel_cli.errors import UserError

Record = TypeVar("Record")

# Nothing panel asks for or reads is deeper than a handful of levels; a tool's arguments may
# be somewhat deeper. Far below the interpreter's recursion limit, and below pydantic's own.
MAX_DEPTH = 64
# SQLite's INTEGER: any whole number a store or a result holds must fit in it.
MAX_INTEGER = 2**63 - 1
REPLACEMENT = "\ufffd"

_SURROGATE = re.compile("[\ud800-\udfff]")
# What a terminal would obey rather than show: escape sequences (CSI such as `ESC[2J`; OSC
# such as `ESC]52;c;…BEL`, a clipboard write, or `ESC]0;…`, a window title; DCS, APC, PM and
# SOS strings; two-character escapes), their 8-bit forms, and every other C0 or C1 control
# but the tab and the line break. A carriage return goes too (it lets a line overwrite itself),
# except as part of CRLF. So do the bidirectional embeddings, overrides and isolates (U+202A to
# U+202E, U+2066 to U+2069): a right-to-left override makes a terminal, a table or a page show
# `txt.exe` for `exe.txt`, and a reply could reorder what a person reads of it (Trojan Source).
_CONTROL = re.compile(
    "\x1b\\[[0-?]*[ -/]*[@-~]?"  # CSI
    "|\x9b[0-?]*[ -/]*[@-~]?"
    "|[\x1b][\\]P^_X][^\x07\x1b\x9c]*(?:\x07|\x1b\\\\|\x9c)?"  # OSC, DCS, PM, APC, SOS
    "|[\x90\x98\x9d-\x9f][^\x07\x1b\x9c]*(?:\x07|\x1b\\\\|\x9c)?"
    "|\x1b[ -/]*[0-~]?"  # any other escape
    "|\r(?!\n)"
    "|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]"
)
# What decides nesting: brackets, and the quotes and escapes that say which brackets are text.
# Where a sequence `_CONTROL` removes may begin: one character class, searched many times
# faster than `_CONTROL`, so a clean text (nearly every text) is known clean at once.
_CONTROL_START = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_STRUCTURE = re.compile(r'[\[\]{}"\\]')


class RefusedJSON(json.JSONDecodeError):
    """Valid JSON that panel will not hold: nested too deep, or a number out of range. Its
    `msg` reads after "the JSON" (`is nested deeper than 64 levels`)."""


class _NumberOutOfRange(Exception):
    def __init__(self, digits: str) -> None:
        self.digits = digits


class _KeyTwice(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def clean_text(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD and every terminal control sequence
    removed (`without_controls`), so it can be written anywhere: the store, a terminal, a file."""
    return without_controls(writable(text))


def writable(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD, so a UTF-8 writer takes it."""
    return _SURROGATE.sub(REPLACEMENT, text) if _SURROGATE.search(text) else text


def without_controls(text: str) -> str:
    """`text` without what a terminal would obey: a model's or a tool's text printed as it
    came could set the clipboard (`ESC]52`), retitle the window, clear the screen or move the
    cursor over what panel drew. Tabs and line breaks (CRLF too) stay."""
    return _CONTROL.sub("", text) if _CONTROL_START.search(text) else text


def first_control(text: str, start: int = 0) -> int:
    """Where in `text`, from `start`, the first sequence `without_controls` removes may begin
    (its length when none may): the text before it is left as it is, so a growing text need
    only be cleaned from there."""
    found = _CONTROL_START.search(text, start)
    return len(text) if found is None else found.start()


def clean_strings(value: Any) -> Any:
    """Every string of a value read back (a stored payload), keys included, `clean_text`ed:
    text stored before panel cleaned it on the way in is shown as clean."""
    return _cleaned_value(value)


def clean_record(record: Record) -> Record:
    """`record` (a dataclass the store's reader fills, or a pydantic model) with every string
    in it `clean_text`ed, nested records, lists and mappings included: a file imported from
    elsewhere holds whatever was written into it, in a run's own row and its calls as much as
    in its events. The same instance when nothing needed cleaning, which is nearly always."""
    target: Any = record  # a dataclass or a pydantic model: read by field name either way
    kind = "dataclass" if is_dataclass(target) else "model"
    names = [each.name for each in fields(target)] if kind == "dataclass" else list(type(target).model_fields)
    changes = {}
    for name in names:
        value = getattr(target, name)
        cleaned = _cleaned_value(value)
        if cleaned is not value:
            changes[name] = cleaned
    if not changes:
        return record
    cleaned_record: Record = replace(target, **changes) if kind == "dataclass" else target.model_copy(update=changes)
    return cleaned_record


def _cleaned_value(value: Any) -> Any:
    """`value` with its strings cleaned, keys included; the same object when none needed it
    (the depth of a parsed value is already bounded, so the recursion is)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        items = [_cleaned_value(item) for item in value]
        return value if all(new is old for new, old in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        pairs = [(_cleaned_value(key), _cleaned_value(item)) for key, item in value.items()]
        same = all(
            new_key is key and new is old for (new_key, new), (key, old) in zip(pairs, value.items(), strict=True)
        )
        return value if same else dict(pairs)
    if (is_dataclass(value) and not isinstance(value, type)) or hasattr(type(value), "model_fields"):
        return clean_record(value)
    return value


def nesting_depth(text: str, limit: int = MAX_DEPTH) -> tuple[int, int]:
    """How deep the brackets of a JSON text nest, outside its strings, and where the first
    bracket past `limit` opens (-1 when none is). Counting stops there."""
    depth = deepest = 0
    in_string = False
    skip = -1
    for match in _STRUCTURE.finditer(text):
        at = match.start()
        if at == skip:
            continue
        char = match.group()
        if in_string:
            if char == "\\":
                skip = at + 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return depth, at
            deepest = max(deepest, depth)
        elif char in "]}":
            depth = max(depth - 1, 0)
    return deepest, -1


def _bounded_int(digits: str) -> int:
    # Compared as text first: int() itself refuses 4,300 digits and more, with a ValueError.
    if len(digits.lstrip("-")) > len(str(MAX_INTEGER)):
        raise _NumberOutOfRange(digits)
    value = int(digits)
    if abs(value) > MAX_INTEGER:
        raise _NumberOutOfRange(digits)
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose every key is given once. JSON allows a key twice and `json.loads`
    keeps the last value: `{"verdict": "REJECTED", …, "verdict": "APPROVED"}` would read as an
    approval that a person reading the reply sees as a rejection. Two values for one key are
    no answer at all."""
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _KeyTwice(key)
        found[key] = value
    return found


def load_json(text: str, max_depth: int = MAX_DEPTH) -> Any:
    """`json.loads(text)`, bounded: at most `max_depth` levels of arrays and objects, whole
    numbers within SQLite's INTEGER, no key given twice in one object, and no lone surrogate in any
    string. Anything else raises
    json.JSONDecodeError (RefusedJSON for valid JSON refused), never another exception."""
    _, past = nesting_depth(text, max_depth)
    if past >= 0:
        raise RefusedJSON(f"is nested deeper than {max_depth} levels", text, past)
    try:
        value = json.loads(text, parse_int=_bounded_int, object_pairs_hook=_unique_keys)
    except _NumberOutOfRange as exc:
        shown = exc.digits if len(exc.digits) <= 24 else f"{exc.digits[:20]}… ({len(exc.digits)} digits)"
        raise RefusedJSON(f"holds a number out of range ({shown})", text, max(text.find(exc.digits), 0)) from None
    except _KeyTwice as exc:
        quoted = json.dumps(exc.key)
        shown = clean_text(exc.key if len(exc.key) <= 24 else f"{exc.key[:20]}…")
        second = text.find(quoted, text.find(quoted) + 1)
        raise RefusedJSON(f"gives the key {shown!r} twice", text, max(second, 0)) from None
    return _cleaned_value(value)


def utf8_text(text: str, source: str) -> str:
    """`text` if it is text. Bytes that are not UTF-8 reach Python as lone surrogates (argv and
    stdin are decoded with `surrogateescape`); sent on, they fail every call and the store.
    Refused here with where the first one is, as bad input, before the run starts."""
    for index, char in enumerate(text):
        if "\ud800" <= char <= "\udfff":
            what = bad_byte(ord(char) - 0xDC00) if "\udc80" <= char <= "\udcff" else "a lone surrogate"
            raise UserError(f"{source} is not UTF-8 text ({what} at character {index + 1}).")
    return text


def bad_byte(value: int) -> str:
    return f"byte 0x{value:02x}"
