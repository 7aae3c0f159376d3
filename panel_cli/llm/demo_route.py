"""The gateway's own route to the demo personas: in-process, never through litellm.

A demo call goes the way a real one goes through the gateway (its deadline, retries,
concurrency limit, budget, request hash and events); only the last step differs: instead of
litellm's request, the persona writes its reply here from the call's brief. It thinks for a
moment first (`PANEL_DEMO_DELAY` seconds, give or take half, 0 in tests), streams its reply a
few words at a time when the live view asks for it, calls one tool when it is offered some,
and reports tokens as a provider would (about four characters each). It has no price: its
calls cost nothing, and the views say they are simulated.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from panel_cli.llm.brief import RequestBrief
from panel_cli.llm.demo_replies import cite_tool_results, demo_delay, demo_pieces, demo_reply, demo_tool_call
from panel_cli.llm.errors import ClassifiedError
from panel_cli.llm.stream import Piece, TextGrowth, read_pieces
from panel_cli.llm.tool_calls import RequestedCall
from panel_cli.models.routes import DEMO_PREFIX

# What `demo_call` returns, as the gateway reads any reply: text, tool calls, tokens in and out.
Read = tuple[str, list[RequestedCall], int | None, int | None]


def _think() -> float:
    return demo_delay() * random.uniform(0.5, 1.5)


def _tokens(messages: Sequence[Mapping[str, Any]], text: str) -> tuple[int, int]:
    prompt_chars = sum(len(str(message.get("content") or "")) for message in messages)
    return prompt_chars // 4 + 1, len(text) // 4 + 1


def _write(request: Mapping[str, Any], brief: RequestBrief, found: Sequence[str]) -> tuple[str, RequestedCall | None]:
    """The persona's turn: a tool call when it is offered tools and has found nothing yet,
    else its reply, citing what its tools found."""
    persona = str(request["model"]).removeprefix(DEMO_PREFIX)
    call = demo_tool_call(brief, request.get("tools"), found)
    if call is not None:
        return "", call
    try:
        text = demo_reply(persona, brief, int(request.get("seed") or 0))
    except ValueError as exc:
        raise ClassifiedError("not_found", str(exc)) from None
    return cite_tool_results(text, found), None


async def demo_call(
    request: Mapping[str, Any], brief: RequestBrief, found: Sequence[str], grow: TextGrowth | None, cap: int
) -> Read:
    """Answer one request (the gateway's request dict: model, messages, tools, seed) from its
    `brief`, given what the call's tools have `found` so far. With `grow`, the reply streams:
    its first words after half the think time, the rest over the other half. A simulated voter
    in an eval (`brief.voter`) does not think: its time stands for nothing, and an eval of
    hundreds of runs would wait minutes for it."""
    think = 0.0 if brief.voter is not None else _think()
    if grow is None:
        await asyncio.sleep(think)
        text, call = _write(request, brief, found)
        tokens_in, tokens_out = _tokens(request["messages"], text)
        return text, [call] if call is not None else [], tokens_in, tokens_out
    await asyncio.sleep(think / 2)
    text, _ = _write(request, brief, found)
    streamed = await read_pieces(_stream(text, _tokens(request["messages"], text), think / 2), grow, cap)
    return streamed.text, [], streamed.tokens_in, streamed.tokens_out


async def _stream(text: str, usage: tuple[int, int], spread: float) -> AsyncIterator[Piece]:
    """The text a few words at a time over `spread` seconds, the usage with the last piece."""
    pieces = demo_pieces(text)
    for number, piece in enumerate(pieces, start=1):
        if number > 1:
            await asyncio.sleep(spread / len(pieces))
        yield Piece(piece, usage if number == len(pieces) else None)
