"""Sorting provider failures into the kinds a person (and a retry loop) cares about.

litellm wraps every failure several times (our bad body becomes an OpenAIError, then an
InternalServerError whose text is `litellm.InternalServerError: InternalServerError:
OpenAIException - ...`), and the useful fact is often only in the chain beneath it: a
refused connection and a reply cut off mid-body both surface as `Connection error.`. So
the kind is read from the whole chain, and the sentence a person sees is written here,
one per kind; litellm's own text is kept apart as the detail for whoever debugs.
"""

from __future__ import annotations

import ast
import asyncio
import email.utils
import errno
import json
import math
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from panel_cli.events import ErrorKind
from panel_cli.untrusted import clean_text

RETRYABLE: frozenset[str] = frozenset({"rate_limited", "server", "connection"})
# Asking again cannot help within one run: the key, the model or the request is wrong.
PERMANENT: frozenset[str] = frozenset({"auth", "not_found", "bad_request"})

MAX_DETAIL_CHARS = 4000
MAX_WORDS_CHARS = 200

_BY_STATUS: dict[int, ErrorKind] = {
    400: "bad_request",
    401: "auth",
    403: "auth",
    404: "not_found",
    408: "timeout",
    413: "bad_request",
    422: "bad_request",
    429: "rate_limited",
}

_BY_CLASS: dict[str, ErrorKind] = {
    "Timeout": "timeout",
    "APITimeoutError": "timeout",
    "RateLimitError": "rate_limited",
    "AuthenticationError": "auth",
    "PermissionDeniedError": "auth",
    "NotFoundError": "not_found",
    "BadRequestError": "bad_request",
    "ContextWindowExceededError": "bad_request",
    "ContentPolicyViolationError": "bad_request",
    "UnprocessableEntityError": "bad_request",
    "UnsupportedParamsError": "bad_request",
    "InternalServerError": "server",
    "ServiceUnavailableError": "server",
    "BadGatewayError": "server",
    "APIConnectionError": "connection",
    "APIResponseValidationError": "malformed",
}

# litellm reports an unparsable body as a server or generic API error; these phrases in
# its message tell the difference.
_MALFORMED_HINTS = (
    "jsondecodeerror",
    "expecting value",
    "invalid json",
    "unable to parse",
    "validation error",
    "nonetype",
    "has no attribute 'choices'",
    "'choices'",
    "invalid response object",
)

# A body that stopped before its announced length (aiohttp, then httpx's wording).
_CUT_OFF_TYPES = frozenset({"ClientPayloadError", "ContentLengthError", "TransferEncodingError"})
_CUT_OFF_HINTS = ("payload is not completed", "without sending complete message body")
_BYTES_ARRIVED = re.compile(r"received (\d+) of (\d+) bytes")
_HOST_PORT = re.compile(r"Cannot connect to host ([\w.\-\[\]:]+?):(\d+)\b|\('([\w.\-:]+)', (\d+)[,)]")
_CONNECTION_TYPES = frozenset({"APIConnectionError", "ClientConnectionError", "ConnectError", "ReadError"})

# `litellm.InternalServerError: `, `InternalServerError: `, `OpenAIException - `,
# `DemoException - `, `LiteLLM: `, `Error code: 502 - `, repeated in any order.
_PREFIX = re.compile(
    r"^\s*(?:litellm\.\w+\s*:|LiteLLM\s*:|\w*(?:Error|Exception)\s*(?:-|:)|Error code:\s*\d+\s*(?:-|:|$))\s*"
)
_TRAILERS = (
    "\nReceived Model Group",
    " Received Model Group",
    " LiteLLM Retried:",
    "\nLiteLLM Retried:",
    " Error_str:",
)
# Text that is a Python repr, a memory address or markup, not the provider's words.
_UNCLEAN = re.compile(r"<[A-Za-z/!?]|\bobject at\b|\b0x[0-9a-fA-F]+|Traceback")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


class ClassifiedError(Exception):
    """A failure we raise ourselves (empty reply, malformed body) with its kind already known."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message


@dataclass(frozen=True)
class Failure:
    """One failure as the gateway reports it. `message` is one sentence for people;
    `detail` is litellm's raw text and the chain beneath it, for the store only;
    `permanent` means calling this member again in the run would fail the same way."""

    kind: ErrorKind
    message: str
    detail: str | None = None
    permanent: bool = False


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception and every cause and context beneath it, each once."""
    seen: set[int] = set()
    pending = [exc]
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending += [e for e in (current.__cause__, current.__context__) if e is not None]


def _names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _is_refused(exc: BaseException) -> bool:
    """Our own connection was refused. The words alone count only on a client-side error:
    a proxy's 503 that reads `upstream ... connection refused` is a passing server fault."""
    if isinstance(exc, ConnectionRefusedError):
        return True
    if isinstance(exc, OSError) and exc.errno == errno.ECONNREFUSED:
        return True
    client_side = status_of(exc) is None or bool(_names(exc) & _CONNECTION_TYPES)
    return client_side and "connection refused" in str(exc).lower()


def _is_cut_off(exc: BaseException) -> bool:
    if _names(exc) & _CUT_OFF_TYPES:
        return True
    return any(hint in str(exc).lower() for hint in _CUT_OFF_HINTS)


def status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def classify(exc: BaseException) -> ErrorKind:
    """The kind, read from the chain's root causes first: litellm files a refused connection,
    a body cut off half-way and a body that is not UTF-8 alike under InternalServerError."""
    if isinstance(exc, ClassifiedError):
        return exc.kind
    if isinstance(exc, asyncio.TimeoutError | TimeoutError) or _names(exc) & {"Timeout", "APITimeoutError"}:
        return "timeout"
    links = list(_chain(exc))
    if any(_is_cut_off(link) or isinstance(link, UnicodeDecodeError | json.JSONDecodeError) for link in links):
        return "malformed"
    if any(_is_refused(link) for link in links):
        return "connection"
    status = status_of(exc)
    if (status is None or status >= 500) and any(hint in str(exc).lower() for hint in _MALFORMED_HINTS):
        return "malformed"
    if any(_names(link) & {"ConnectTimeout"} for link in links[1:]):
        return "timeout"
    if any(_names(link) & _CONNECTION_TYPES for link in links[1:]):
        return "connection"
    for cls in type(exc).__mro__:
        if cls.__name__ in _BY_CLASS:
            return _BY_CLASS[cls.__name__]
    if status is not None:
        return "server" if status >= 500 else _BY_STATUS.get(status, "bad_request")
    if isinstance(exc, ConnectionError | OSError):
        return "connection"
    return "server"


def _dig(obj: Any) -> str | None:
    """The message inside a provider's JSON error body (`{"error": {"message": ...}}`)."""
    if isinstance(obj, str):
        return obj
    if isinstance(obj, dict):
        for key in ("error", "message", "detail", "msg"):
            if key in obj:
                found = _dig(obj[key])
                if found:
                    return found
    return None


def clean_words(text: str) -> str | None:
    """The provider's own words from an exception's text: litellm's prefixes and trailers
    removed, a JSON error body opened, the first sentence kept. None when nothing readable
    is left (a repr, an address, markup, or only a status code)."""
    words = text
    for trailer in _TRAILERS:
        words = words.split(trailer, 1)[0]
    while match := _PREFIX.match(words):
        words = words[match.end() :]
    words = words.strip()
    if words and words[0] in "{[":
        for load in (json.loads, ast.literal_eval):
            try:
                found = _dig(load(words))
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if found is not None:
                return clean_words(found)
            break
    words = " ".join(words.split())
    words = _SENTENCE_END.split(words, 1)[0].rstrip(" .")
    if not words or _UNCLEAN.search(words):
        return None
    if len(words) > MAX_WORDS_CHARS:
        words = words[:MAX_WORDS_CHARS].rsplit(" ", 1)[0] + "…"
    return words


def _with_words(lead: str, words: str | None) -> str:
    return f"{lead}: {words}" if words else lead


def _endpoint(exc: BaseException) -> str | None:
    """`host:port` of a failed connection, from aiohttp's error or the socket's message."""
    for link in _chain(exc):
        host, port = getattr(link, "host", None), getattr(link, "port", None)
        if isinstance(host, str) and isinstance(port, int):
            return f"{host}:{port}"
        match = _HOST_PORT.search(str(link))
        if match:
            groups = [g for g in match.groups() if g]
            return f"{groups[0]}:{groups[1]}"
    return None


def _connection_message(exc: BaseException) -> str:
    where = _endpoint(exc)
    target = f"connect to {where}" if where else "connect to the provider"
    links = list(_chain(exc))
    if any(_is_refused(link) for link in links):
        return f"could not {target} (connection refused)"
    if any(_names(link) & {"gaierror", "ClientConnectorDNSError"} for link in links):
        return f"could not {target} (host not found)"
    if any(isinstance(link, ConnectionResetError) for link in links):
        return f"the connection to {where} was reset" if where else "the connection to the provider was reset"
    if any(_names(link) & {"ServerDisconnectedError", "RemoteProtocolError"} for link in links):
        return "the provider closed the connection before replying"
    return f"could not {target}"


_INVALID_FIELD = re.compile(r"validation errors? for (Message|Usage)\n(\w+)")


def _malformed_message(exc: BaseException) -> str:
    links = list(_chain(exc))
    if any(_is_cut_off(link) for link in links):
        arrived = next((m for link in links if (m := _BYTES_ARRIVED.search(str(link)))), None)
        counted = f" ({arrived.group(1)} of {arrived.group(2)} bytes arrived)" if arrived else ""
        return f"the connection broke in the middle of the reply{counted}"
    if any(isinstance(link, UnicodeDecodeError) for link in links):
        return "the reply was not valid UTF-8"
    if any(isinstance(link, json.JSONDecodeError) for link in links) or "expecting value" in str(exc).lower():
        return "the reply was not valid JSON"
    text = str(exc)
    # litellm validates the reply with its own models; their errors name the field that failed.
    if found := _INVALID_FIELD.search(text):
        model, field = found.group(1), found.group(2)
        if model == "Usage":
            return "the reply's token counts were not whole numbers"
        return "the reply's content was not text" if field == "content" else "the reply's message was malformed"
    if "'choices'" in text:
        return "the reply had no choices"
    return _with_words("the reply could not be read", clean_words(text))


def clean_message(exc: BaseException, kind: ErrorKind) -> str:
    """One sentence a person understands, for each kind: no Python repr, no litellm prefix."""
    if isinstance(exc, ClassifiedError):
        return exc.message
    status = status_of(exc)
    words = clean_words(str(getattr(exc, "message", "") or exc))
    code = f" ({status})" if status else ""
    match kind:
        case "timeout":
            sent_by_provider = status == 408 and not _names(exc) & {"Timeout", "APITimeoutError"}
            return "the provider timed out (408)" if sent_by_provider else "no reply in time"
        case "rate_limited":
            return _with_words(f"rate limited{code}", words)
        case "auth":
            lead = "the provider denied access (403)" if status == 403 else f"the provider rejected the key{code}"
            return _with_words(lead, words)
        case "not_found":
            return _with_words(f"model not found{code}", words)
        case "bad_request":
            return _with_words(f"the provider rejected the request{code}", words)
        case "connection":
            return _connection_message(exc)
        case "malformed":
            return _malformed_message(exc)
        case "cancelled":
            return "cancelled"
        case _:
            return _with_words(f"the provider failed{code}", words)


def detail_of(exc: BaseException) -> str | None:
    """litellm's raw text and the chain beneath it, trimmed: for debugging, never drawn."""
    if isinstance(exc, ClassifiedError | asyncio.TimeoutError | TimeoutError):
        return None
    lines: list[str] = []
    for link in _chain(exc):
        text = str(link).strip()
        line = f"{type(link).__module__}.{type(link).__qualname__}: {text}"
        if text and line not in lines:
            lines.append(line)
    detail = "\n".join(lines)
    return detail[:MAX_DETAIL_CHARS] or None


def describe(exc: BaseException) -> Failure:
    """Kind, sentence, raw detail and whether the member is worth calling again. The sentence
    and the detail quote the provider, so both are cleaned as its replies are (`clean_text`):
    an error body's `\\ud800` is valid JSON that no UTF-8 writer takes, and its escape
    sequences would reach the terminal."""
    kind = classify(exc)
    permanent = kind in PERMANENT or (kind == "connection" and any(_is_refused(link) for link in _chain(exc)))
    detail = detail_of(exc)
    return Failure(
        kind=kind,
        message=clean_text(clean_message(exc, kind)),
        detail=None if detail is None else clean_text(detail),
        permanent=permanent,
    )


_DELAY_SECONDS = re.compile(r"\d+(?:\.\d+)?")


def parse_retry_after(value: str, now: float | None = None) -> float | None:
    """Seconds from a Retry-After value: a non-negative number of seconds or an HTTP date.
    Anything else (`soon`, `inf`, `-5`, `1,5`, a broken date) is None: the caller backs off
    on its own rather than trusting a value it cannot read."""
    text = value.strip()
    if _DELAY_SECONDS.fullmatch(text):
        seconds = float(text)
        return seconds if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _header(headers: Any, name: str) -> str | None:
    try:
        value = headers.get(name) or headers.get(name.title())
    except AttributeError:
        return None
    return value if isinstance(value, str) else None


def retry_after_seconds(exc: BaseException, now: float | None = None) -> float | None:
    """A wait the provider asked for, as seconds, if it sent one we can read."""
    response = getattr(exc, "response", None)
    for headers in (
        getattr(exc, "headers", None),
        getattr(exc, "litellm_response_headers", None),
        getattr(response, "headers", None),
    ):
        if not headers:
            continue
        millis = _header(headers, "retry-after-ms")
        if millis is not None and _DELAY_SECONDS.fullmatch(millis.strip()):
            return float(millis) / 1000
        value = _header(headers, "retry-after")
        if value is not None:
            return parse_retry_after(value, now)
    return None
