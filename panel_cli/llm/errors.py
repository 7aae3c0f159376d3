"""Sorting provider failures into the kinds a person (and a retry loop) cares about."""

from __future__ import annotations

import asyncio
import email.utils
import time
from typing import Any

from panel_cli.events import ErrorKind

RETRYABLE: frozenset[str] = frozenset({"rate_limited", "server", "connection"})

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

# litellm reports an unparsable body as a connection or generic API error; these phrases
# in its message tell the difference.
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


class ClassifiedError(Exception):
    """A failure we raise ourselves (empty reply, malformed body) with its kind already known."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message


def classify(exc: BaseException) -> ErrorKind:
    if isinstance(exc, ClassifiedError):
        return exc.kind
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return "timeout"
    message = str(exc).lower()
    if any(hint in message for hint in _MALFORMED_HINTS):
        return "malformed"
    for cls in type(exc).__mro__:
        if cls.__name__ in _BY_CLASS:
            return _BY_CLASS[cls.__name__]
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        if status >= 500:
            return "server"
        return _BY_STATUS.get(status, "bad_request")
    if isinstance(exc, ConnectionError | OSError):
        return "connection"
    return "server"


def provider_message(exc: BaseException) -> str:
    """The provider's own words, without litellm's prefixes and debug trailers."""
    if isinstance(exc, ClassifiedError):
        return exc.message
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return "no reply before the deadline"
    message = str(getattr(exc, "message", "") or exc) or type(exc).__name__
    for prefix in ("litellm.", "OpenAIException - ", "DemoException - ", "Exception - "):
        while message.startswith(prefix):
            message = message.split(" ", 1)[1] if prefix == "litellm." and " " in message else message[len(prefix) :]
    message = message.split("\nReceived Model Group", 1)[0].split(" LiteLLM Retried:", 1)[0]
    return " ".join(message.split())[:500]


def retry_after_seconds(exc: BaseException) -> float | None:
    """A Retry-After the provider sent, as seconds, if any."""
    headers: Any = getattr(exc, "headers", None) or getattr(exc, "litellm_response_headers", None)
    if not headers:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
    if not headers:
        return None
    value = None
    try:
        value = headers.get("retry-after") or headers.get("Retry-After")
    except AttributeError:
        return None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None
