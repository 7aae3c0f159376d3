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
SECRET_NAME_SUFFIXES = (
    "_KEY",
    "_APIKEY",
    "_TOKEN",
    "_SECRET",
    "_PASSWORD",
    "_PASSWD",
    "_PWD",
    "_PASSPHRASE",
    "_CREDENTIAL",
    "_CREDENTIALS",
)
# Names that are a secret alone (not `PWD`, the working folder, nor `KEY`, a setting's name).
_SECRET_NAMES_ALONE = frozenset(
    {"PASSWORD", "PASSWD", "PASSPHRASE", "SECRET", "TOKEN", "API_KEY", "APIKEY", "CREDENTIALS"}
)
# The variables litellm reads a provider's credentials from whose names the suffixes miss
# (every `get_secret_str("…")` of its provider code, as of litellm 1.110). A list shipped
# here rather than read from litellm's source at run time: commands that never load litellm
# scrub their output too, and scanning its thousands of files would cost more than that import.
# `tests/faults/test_secrets.py` reads the installed litellm and fails when it reads a new one.
LITELLM_SECRET_NAMES = frozenset(
    {
        "AWS_BEARER_TOKEN_BEDROCK",
        "GIGACHAT_CREDENTIALS",
        "SNOWFLAKE_JWT",
        "VERTEXAI_CREDENTIALS",
        "VERTEX_CREDENTIALS",
        "WATSONX_APIKEY",
        "WATSONX_ZENAPIKEY",
    }
)

# Shorter values are too likely to be ordinary words or numbers that also appear in
# the text we mean to keep.
MIN_SECRET_LENGTH = 8
# A value we know is a secret (a key a member uses, a `${VAR}` the panel file expanded) is
# hidden however short, down to this: a shorter one would scrub letters out of every text.
MIN_KNOWN_SECRET_LENGTH = 4


def named_like_a_secret(name: str) -> bool:
    """Whether an environment variable's name says it holds a secret."""
    upper = name.upper()
    return upper.endswith(SECRET_NAME_SUFFIXES) or upper in _SECRET_NAMES_ALONE or upper in LITELLM_SECRET_NAMES


def secret_values(extra_names: Iterable[str] = (), known: Iterable[str] = ()) -> list[str]:
    """The values worth hiding, longest first (so a key that contains another is replaced whole).

    - A variable named like a secret, or named in `extra_names` (a panel's `api_key_env`),
      holds a secret whatever it looks like, a number included (`DB_PASSWORD=31415926535897`),
      once it is `MIN_SECRET_LENGTH` long.
    - The variables in `extra_names` and the `known` values (the keys members use, the
      `${VAR}` values a panel file expanded) are hidden down to `MIN_KNOWN_SECRET_LENGTH`,
      unless they are a plain number. A number is left alone there because its name does
      not call it a secret: a `${VAR}` that expands to a number is a setting (`max_tokens`,
      a seed, a port), and scrubbing `1024` would take that number out of every answer; a
      short number named in `extra_names` cannot be told from the numbers in the text."""
    extra = {os.environ[name] for name in extra_names if name in os.environ}
    named = {value for name, value in os.environ.items() if named_like_a_secret(name)} | extra
    short_allowed = extra | set(known)
    hidden = {value for value in named if len(value) >= MIN_SECRET_LENGTH} | {
        value for value in short_allowed if len(value) >= MIN_KNOWN_SECRET_LENGTH and not _is_number(value)
    }
    return sorted(hidden, key=len, reverse=True)


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
