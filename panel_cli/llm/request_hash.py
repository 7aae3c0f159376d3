"""The identity of a model request, so a resumed run recognises the calls its earlier run paid for.

Two requests with one hash ask the same thing of the same member: its name, model and endpoint,
the stage, round and subject of the call, the sampling settings, the structured-output schema,
the tools it is offered, the messages the gateway adds (the system prompt, a follow-up's
earlier turns, attached files), and what the engine asks: its brief (the task, the question,
the texts it quotes by label, the options...), or its messages when it gave no brief. Nothing
else goes in: not the key (a hash must reveal nothing about a secret, and a key rotated
between a run and its resume must still match), nor the transport settings (retries) that
never change a reply.

Every text goes in as its own digest, taken once per text however many prompts quote it: a
vote prompt quotes every answer of the round, so hashing the expanded prompts grew with the
square of the panel. What is serialised per request is bounded by the number of texts it
quotes, never by their length.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from enum import Enum
from functools import lru_cache
from typing import Any

from pydantic import BaseModel

from panel_cli.llm.brief import Quoted, RequestBrief

# The request fields that decide the reply besides the messages, as the gateway passes them to
# litellm (`tools`: the tools a member is offered; absent when it is offered none).
SETTINGS = ("model", "api_base", "temperature", "max_tokens", "response_format", "seed", "tools")


def request_hash(
    request: Mapping[str, Any],
    *,
    member: str,
    stage: str,
    round: int | None = None,
    about: str | None = None,
    context: Sequence[Mapping[str, Any]] = (),
    brief: RequestBrief | None = None,
) -> str:
    """A hex SHA-256 of `identity(...)`."""
    return hashlib.sha256(
        identity(request, member=member, stage=stage, round=round, about=about, context=context, brief=brief)
    ).hexdigest()


def identity(
    request: Mapping[str, Any],
    *,
    member: str,
    stage: str,
    round: int | None = None,
    about: str | None = None,
    context: Sequence[Mapping[str, Any]] = (),
    brief: RequestBrief | None = None,
) -> bytes:
    """What identifies a request, in a canonical JSON form (sorted keys, no spacing), so the
    same request hashes alike in every process and version of Python. `request`: the settings
    sent (its messages are not read); `context`: the messages the brief does not stand for
    (all of them without a brief). A field left out and a field set to None are the same."""
    fields: dict[str, Any] = {
        name: _settings(name, request[name]) for name in SETTINGS if request.get(name) is not None
    }
    fields["call"] = [member, stage, round, about]
    fields["context"] = [[str(message.get("role")), _text(message.get("content"))] for message in context]
    if brief is not None:
        fields["brief"] = _plain(brief)
    return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()


@lru_cache(maxsize=16384)
def text_digest(text: str) -> str:
    """A text's own digest. Cached: the prompts of one round quote the same string objects,
    whose hash Python keeps, so a text is read once however many requests quote it."""
    # surrogatepass: a lone surrogate in a reply quoted by a later prompt still hashes.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _text(content: Any) -> Any:
    """A message's content: a text as its digest; parts (text and images) as their digests."""
    if isinstance(content, str):
        return text_digest(content)
    return text_digest(json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":")))


def _plain(value: Any) -> Any:
    """A brief's value with every text as its digest (numbers as they are)."""
    if isinstance(value, str):
        return text_digest(value)
    if isinstance(value, Quoted):
        return [text_digest(value.label), text_digest(value.text), value.round]
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, BaseModel):
        return {name: _plain(field) for name, field in value.__dict__.items() if field not in (None, (), "")}
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    return value


def _settings(name: str, value: Any) -> Any:
    """A structured-output schema (a pydantic model class) as the digest of the JSON schema it
    stands for; the tools' specs as theirs; the other settings as they are."""
    if name == "response_format" and isinstance(value, type) and issubclass(value, BaseModel):
        return _schema_digest(value)
    if name == "tools":
        return text_digest(json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")))
    return value


@lru_cache(maxsize=256)
def _schema_digest(schema: type[BaseModel]) -> str:
    return text_digest(json.dumps(schema.model_json_schema(), sort_keys=True, separators=(",", ":")))
