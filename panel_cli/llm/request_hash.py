"""The identity of a model request, so a resumed run recognises the calls its earlier run paid for.

Two requests with one hash ask the same thing of the same model: the model, its endpoint,
every message (the system prompt included), the sampling settings, the structured-output
schema and the seed. Nothing else goes in: not the key (a hash must reveal nothing about a
secret, and a key rotated between a run and its resume must still match), nor the transport
settings (retries) that never change a reply.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

# The request fields that decide the reply, as the gateway passes them to litellm (`tools`:
# the tools a member is offered; absent, as before tools, when it is offered none).
HASHED_FIELDS = ("model", "api_base", "messages", "temperature", "max_tokens", "response_format", "seed", "tools")


def request_hash(request: Mapping[str, Any]) -> str:
    """A hex SHA-256 over the fields that decide the reply, in a canonical JSON form (sorted
    keys, no spacing), so the same request hashes alike in every process and version of Python.
    A field left out and a field set to None are the same request."""
    fields = {name: _plain(request[name]) for name in HASHED_FIELDS if request.get(name) is not None}
    text = json.dumps(fields, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    # surrogatepass: a lone surrogate in a reply quoted by a later prompt still hashes.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _plain(value: Any) -> Any:
    """A structured-output schema (a pydantic model class) as the JSON schema it stands for."""
    if isinstance(value, type) and issubclass(value, BaseModel):
        return value.model_json_schema()
    return value
