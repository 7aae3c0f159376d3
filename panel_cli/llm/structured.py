"""Getting a JSON object out of a model's reply, however it was wrapped."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ValidationError


def _objects_in(text: str) -> list[str]:
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


def extract_json_object(text: str) -> dict[str, Any] | None:
    """The JSON object a reply ends with: the whole text, else the last object in it, bare, in a
    ```json fence or amid prose. The last, because a reply may quote another member's JSON
    before giving its own, and a quoted vote must never be cast as the reply's."""
    candidates = [text.strip(), *reversed(_objects_in(text))]
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def parse_structured(text: str, schema: type[BaseModel]) -> tuple[BaseModel | None, str | None]:
    """The validated object, or None and a short reason a person can read."""
    data = extract_json_object(text)
    if data is None:
        return None, "no JSON object in the reply"
    try:
        return schema.model_validate(data), None
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "object"
        return None, f"invalid {field}: {first['msg']}"


def json_instructions(schema: type[BaseModel]) -> str:
    """Prompt text for models without native structured output."""
    shape = json.dumps(schema.model_json_schema(), separators=(",", ":"))
    return f"Reply with a single JSON object and nothing else, matching this JSON schema:\n{shape}"
