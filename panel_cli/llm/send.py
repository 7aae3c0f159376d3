"""One request on its member's route: a demo persona answers in-process from the call's brief
(`panel_cli.llm.demo_route`); any other model through litellm, read whole or streamed.

An endpoint that cannot stream (several local servers and proxies) answers a streamed request
with its whole reply as plain JSON. litellm then reads that body as a stream of events, finds
none, and the reply would be empty. So a streamed request whose answer is not an event stream
is read whole instead, and reported to the live view once, as a stream of one piece; when even
that cannot be done, the failure says the endpoint did not stream, and how to stop asking it to.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from panel_cli.llm.brief import with_voter
from panel_cli.llm.demo_route import Read, demo_call
from panel_cli.llm.errors import ClassifiedError
from panel_cli.llm.exchange import Exchange
from panel_cli.llm.litellm_setup import load_litellm, quiet_call
from panel_cli.llm.stream import StreamedReply, TextGrowth, read_stream, read_whole, stalling_after, within_idle
from panel_cli.llm.tool_calls import requested_calls
from panel_cli.models.routes import is_demo
from panel_cli.untrusted import clean_text

EVENT_STREAM = "text/event-stream"
NOT_STREAMED_ADVICE = "set `stream: false` on this member, or run with --no-stream"


async def send(
    member: str,
    request: dict[str, Any],
    exchange: Exchange,
    *,
    tool_calls: bool,
    grow: TextGrowth | None,
    cap: int,
    idle: float | None,
) -> Read:
    """One request of `member`'s call: its text, the tool calls it asks for (`tool_calls`: it
    may), and its counts as reported. `grow`: stream the reply, reporting its text as it grows
    (`cap`: how much of it to keep; `idle`: how long it may go without a new piece)."""
    if is_demo(request["model"]):
        return await demo_call(request, with_voter(exchange.brief, member), exchange.found, grow, cap)
    if grow is None:
        with quiet_call():
            response = await load_litellm().acompletion(**request)
        return read_response(response, tool_calls=tool_calls)
    streamed = await _stream(request, grow, cap, idle)
    return streamed.text, [], streamed.tokens_in, streamed.tokens_out


async def _stream(request: dict[str, Any], grow: TextGrowth, cap: int, idle: float | None) -> StreamedReply:
    """The request streamed (`panel_cli.llm.stream`), read to its end unless it stalls for
    `idle` seconds; closed however it ends, so a deadline mid-stream hangs up on the provider."""
    with quiet_call():
        opened = load_litellm().acompletion(**request, stream=True, stream_options={"include_usage": True})
        chunks = await within_idle(opened, idle)
        try:
            kind = _content_type(chunks)
            if kind is None or EVENT_STREAM in kind:
                return await read_stream(stalling_after(chunks, idle), grow, cap)
            return await _read_unstreamed(chunks, kind, grow, cap, idle)
        finally:
            close = getattr(chunks, "aclose", None)
            if close is not None:
                await close()


async def _read_unstreamed(chunks: Any, kind: str, grow: TextGrowth, cap: int, idle: float | None) -> StreamedReply:
    """A streamed request answered with one whole body (`kind`, its content type): the body
    read as the reply it is. litellm's stream holds the HTTP response it has not read yet (the
    openai SDK's `AsyncStream.response`); a route whose stream holds none cannot be read so."""
    response = getattr(getattr(chunks, "completion_stream", None), "response", None)
    if response is None or not callable(getattr(response, "aread", None)):
        raise ClassifiedError("malformed", _not_streamed(kind, "its reply could not be read"))
    body = await within_idle(response.aread(), idle)
    try:
        return await read_whole(body, grow, cap)
    except ClassifiedError as exc:
        raise ClassifiedError(exc.kind, _not_streamed(kind, exc.message)) from None


def _content_type(chunks: Any) -> str | None:
    """The content type the provider answered a streamed request with, as litellm keeps its
    headers (`_hidden_params["additional_headers"]`, `llm_provider-content-type`); None when
    it kept none."""
    hidden = getattr(chunks, "_hidden_params", None)
    headers = hidden.get("additional_headers") if isinstance(hidden, Mapping) else None
    if not isinstance(headers, Mapping):
        return None
    for name, value in headers.items():
        if isinstance(name, str) and name.lower().endswith("content-type") and isinstance(value, str):
            return value.lower()
    return None


def _not_streamed(kind: str, problem: str) -> str:
    shown = clean_text(kind.split(";", 1)[0].strip())[:60]
    return f"the endpoint did not stream (it answered with {shown}) and {problem}; {NOT_STREAMED_ADVICE}"


def read_response(response: Any, *, tool_calls: bool = False) -> Read:
    """A reply read whole: its text, lone surrogates replaced, and, when tools were offered,
    the tool calls it asks for (a reply that asks for tools may have no text). The counts are
    as the provider reported them, whatever they are: `Exchange.count` judges them."""
    try:
        message = response.choices[0].message
        content = message.content
    except (AttributeError, IndexError, TypeError):
        raise ClassifiedError("malformed", "the reply had no message") from None
    calls = requested_calls(message) if tool_calls else []
    if not calls and (not isinstance(content, str) or not content.strip()):
        raise ClassifiedError("malformed", "the reply was empty")
    usage = getattr(response, "usage", None)
    tokens_in = getattr(usage, "prompt_tokens", None) if usage else None
    tokens_out = getattr(usage, "completion_tokens", None) if usage else None
    return (clean_text(content) if isinstance(content, str) else ""), calls, tokens_in, tokens_out
