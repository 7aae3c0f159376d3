"""The answer to a line on stdin that is not a JSON-RPC message the MCP SDK can read.

The SDK's parser is stricter than JSON (a lone surrogate escape such as `"\\ud800"`, an integer
of 5,000 digits, nesting past its recursion limit) and, over stdio, drops a line it cannot
read without a word, so the client waits for its reply forever. Over HTTP the same line gets
a 400 and a parse error. Here it gets the same error, addressed to the request's `id` when the
line's top level names one, else to `null` as JSON-RPC says.
"""

from __future__ import annotations

import json
import re
from types import TracebackType
from typing import Any

import anyio
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

# A JSON string, matched without backtracking however long it is.
_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_SPACE = re.compile(r"\s*")


def request_id(line: str) -> int | str | None:
    """The value of the top-level `"id"` of a line that may not parse (too deep, or holding what
    the SDK refuses elsewhere), found by one pass over it that reads no other value."""
    depth = position = 0
    while position < len(line):
        char = line[position]
        if char == '"':
            string = _STRING.match(line, position)
            if string is None:
                return None
            position = string.end()
            if depth == 1 and string.group() == '"id"':
                colon = _SPACE.match(line, position).end()  # type: ignore[union-attr]
                if line[colon : colon + 1] == ":":
                    return _id_value(line, _SPACE.match(line, colon + 1).end())  # type: ignore[union-attr]
            continue
        if char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        position += 1
    return None


def _id_value(line: str, start: int) -> int | str | None:
    try:
        value, _ = json.JSONDecoder().raw_decode(line, start)
    except ValueError:  # an integer past Python's digits limit, a broken string
        return None
    return value if isinstance(value, (int, str)) and not isinstance(value, bool) else None


def unreadable_reply(error: Exception) -> JSONRPCError:
    """The JSON-RPC error for a line the SDK could not read: a parse error (-32700) for what is
    not JSON to it, an invalid request (-32600) for JSON that is no JSON-RPC message."""
    problem = error.errors()[0] if isinstance(error, ValidationError) and error.errors() else None
    given = problem["input"] if problem is not None else None
    if problem is not None and problem["type"] == "json_invalid":
        reason = problem.get("ctx", {}).get("error", problem["msg"])
        found = request_id(given) if isinstance(given, str) else None
        return JSONRPCError(
            jsonrpc="2.0", id=found, error=ErrorData(code=PARSE_ERROR, message=f"Parse error: {reason}")
        )
    found = given.get("id") if isinstance(given, dict) else None
    if not isinstance(found, (int, str)) or isinstance(found, bool):
        found = None
    message = "Invalid request: not a JSON-RPC request, notification or response."
    return JSONRPCError(jsonrpc="2.0", id=found, error=ErrorData(code=INVALID_REQUEST, message=message))


class AnswersUnreadable:
    """The stdio transport's read stream as the server reads it, less the lines it could not
    read: each of those is answered on `write` and skipped."""

    def __init__(self, inner: Any, write: Any) -> None:
        self.inner = inner
        self.write = write

    @property
    def last_context(self) -> Any:
        """The sender's context, which the SDK's dispatcher reads from its stream."""
        return getattr(self.inner, "last_context", None)

    async def receive(self) -> SessionMessage:
        while True:
            item = await self.inner.receive()
            if not isinstance(item, Exception):
                return item
            await self.write.send(SessionMessage(unreadable_reply(item)))

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __aiter__(self) -> AnswersUnreadable:
        return self

    async def __anext__(self) -> SessionMessage:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> AnswersUnreadable:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.aclose()
