"""One request on its member's route: a demo persona answers in-process from the call's brief
(`panel_cli.llm.demo_route`); any other model through litellm, read whole or streamed."""

from __future__ import annotations

from typing import Any

from panel_cli.llm.brief import with_voter
from panel_cli.llm.demo_route import Read, demo_call
from panel_cli.llm.errors import ClassifiedError
from panel_cli.llm.exchange import Exchange
from panel_cli.llm.litellm_setup import load_litellm, quiet_call
from panel_cli.llm.routes import is_demo
from panel_cli.llm.stream import StreamedReply, TextGrowth, read_stream, stalling_after, within_idle
from panel_cli.llm.tool_calls import requested_calls
from panel_cli.untrusted import clean_text


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
            return await read_stream(stalling_after(chunks, idle), grow, cap)
        finally:
            close = getattr(chunks, "aclose", None)
            if close is not None:
                await close()


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
