"""Keep secrets out of anything panel writes down or draws.

Keys live in the environment, but a model can echo one back, a provider can quote one in
an error, and a user can paste one into a question. Every event is scrubbed on the bus
before the store or a view sees it, and the final output is scrubbed the same way, so no
key lands on disk or on the terminal.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

REDACTED = "[redacted]"

# `_KEY` also covers `_API_KEY`.
SECRET_NAME_SUFFIXES = ("_KEY", "_TOKEN", "_SECRET", "_PASSWORD")

# Shorter values are too likely to be ordinary words or numbers that also appear in
# the text we mean to keep.
MIN_SECRET_LENGTH = 8
# A value we know is a secret (a key a member uses, a `${VAR}` the panel file expanded) is
# hidden however short, down to this: a shorter one would scrub letters out of every text.
MIN_KNOWN_SECRET_LENGTH = 4


def secret_values(extra_names: Iterable[str] = (), known: Iterable[str] = ()) -> list[str]:
    """The values worth hiding: variables named like a secret (of a plausible length), plus,
    however short, the variables named in `extra_names` (a panel's `api_key_env`) and the
    `known` values (the keys members use, the `${VAR}` values a panel file expanded). A
    known value that is a plain number is left alone: it is a setting, not a secret. Longest
    first, so a key that contains another is replaced whole."""
    extra = set(extra_names)
    values = {
        value
        for name, value in os.environ.items()
        if name.upper().endswith(SECRET_NAME_SUFFIXES) and len(value) >= MIN_SECRET_LENGTH
    }
    values |= {os.environ[name] for name in extra if name in os.environ}
    values |= set(known)
    return sorted(
        (value for value in values if len(value) >= MIN_KNOWN_SECRET_LENGTH and not _is_number(value)),
        key=len,
        reverse=True,
    )


def _is_number(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


@lru_cache(maxsize=16)
def _pattern(secrets: tuple[str, ...]) -> re.Pattern[str] | None:
    """One alternation, longest first, so the text is scanned once and overlapping secrets
    cannot leave a fragment of the longer one behind."""
    if not secrets:
        return None
    return re.compile("|".join(re.escape(secret) for secret in sorted(secrets, key=len, reverse=True)))


def redact(text: str, secrets: Iterable[str]) -> str:
    pattern = _pattern(tuple(secrets))
    return text if pattern is None else pattern.sub(REDACTED, text)


def redact_obj(obj: Any, secrets: Iterable[str]) -> Any:
    """Scrub JSON-like data before it is serialised: scrubbing the JSON text instead would
    miss a secret whose characters JSON escapes."""
    return _redact_obj(obj, tuple(secrets))


def _redact_obj(obj: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(obj, str):
        return redact(obj, secrets)
    if isinstance(obj, dict):
        return {_redact_obj(key, secrets): _redact_obj(value, secrets) for key, value in obj.items()}
    if isinstance(obj, list | tuple):
        return [_redact_obj(item, secrets) for item in obj]
    return obj
