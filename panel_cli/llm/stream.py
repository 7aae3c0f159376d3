"""Streamed replies: reading one as it arrives, and telling the live view how it grows.

Only a person at a terminal gains from watching an answer being written, so the gateway
streams only when the live view draws the run, and only the calls whose text is meant to be
read (answers, reviews, syntheses, contributions, outputs): a structured reply (a vote, a
ballot, a verdict, a plan) is JSON until its last brace, and a call that may use tools goes
back and forth with the model, so neither streams. A streamed call must end exactly as the
same call unstreamed would: the same text, the same cut at `max_response_chars`, the same
tokens, so the store, the result and a later resume cannot tell them apart.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from panel_cli.events import BaseEvent, CallRoute, CallTextGrew
from panel_cli.llm.errors import ClassifiedError
from panel_cli.untrusted import first_control, load_json, without_controls, writable

T = TypeVar("T")

# The live view redraws about 8 times a second; growth reported more often is never seen.
TEXT_INTERVAL = 1 / 8


@dataclass
class StreamedReply:
    """What a stream added up to. `text` holds at most `cap + 1` characters: enough for the
    gateway to cut it and say it was cut, as it does for a reply read whole. The counts are
    as the provider reported them."""

    text: str
    tokens_in: Any = None
    tokens_out: Any = None


class TextGrowth:
    """Reports one call's text as it grows: its first text at once (the wait for a first token
    is what a person watches), then at most once every `interval` seconds."""

    def __init__(
        self, emit: Callable[[BaseEvent], Awaitable[Any]], route: CallRoute, interval: float = TEXT_INTERVAL
    ) -> None:
        self._emit = emit
        self._route = route
        self._interval = interval
        self._last: float | None = None

    def restart(self) -> None:
        """A new attempt starts over: its first text is shown at once again."""
        self._last = None

    def due(self) -> bool:
        """Whether growth now would be reported (asked first, so the text is joined only then)."""
        return self._last is None or time.monotonic() - self._last >= self._interval

    async def report(self, text: str) -> None:
        self._last = time.monotonic()
        await self._emit(CallTextGrew(**self._route, text=text))


@dataclass(frozen=True)
class Piece:
    """What one step of a stream adds: its text, and the usage when it reports one
    (prompt tokens, completion tokens, as reported: the gateway judges them), which comes last."""

    text: str
    usage: tuple[Any, Any] | None = None


async def read_stream(chunks: AsyncIterator[Any], grow: TextGrowth, cap: int) -> StreamedReply:
    """Read a litellm stream to its end (`read_pieces`)."""
    return await read_pieces(_pieces(chunks), grow, cap)


async def read_pieces(pieces: AsyncIterator[Piece], grow: TextGrowth, cap: int) -> StreamedReply:
    """Read a stream to its end. The text is kept up to `cap + 1` characters and the rest is
    read and dropped: the usage comes last, and a reply's tokens are counted whole however
    long it runs (a runaway reply still ends at the call's deadline)."""
    kept_pieces: list[str] = []
    kept = 0
    plain = 0  # how much of the text so far holds nothing `without_controls` removes
    tokens_in = tokens_out = None
    async for piece in pieces:
        if piece.usage is not None:
            tokens_in, tokens_out = piece.usage
        if not piece.text or kept > cap:
            continue
        kept_pieces.append(piece.text)
        kept += len(piece.text)
        if grow.due():
            # Cleaned from where a control may begin, as the whole text would be: a reply's
            # text so far is not scanned again from its start each time it is shown.
            so_far = "".join(kept_pieces)[: cap + 1]
            plain = first_control(so_far, plain)
            await grow.report(so_far[:plain] + without_controls(so_far[plain:]))
    # Controls are removed from the whole text, not piece by piece: a sequence split across
    # two pieces goes whole, as it does from a reply read at once.
    text = without_controls("".join(kept_pieces)[: cap + 1])
    if not text.strip():
        raise ClassifiedError("malformed", "the reply was empty")
    return StreamedReply(text=text, tokens_in=tokens_in, tokens_out=tokens_out)


async def read_whole(body: bytes, grow: TextGrowth, cap: int) -> StreamedReply:
    """A reply that came whole where a stream was asked for (an endpoint that cannot stream):
    the chat completion its body holds, read as a stream of one piece, so it ends exactly as
    that reply streamed would, and its row shows it at once. The body is hostile input: read
    bounded (`load_json`), and anything but a completion with text is a malformed reply."""
    try:
        completion = load_json(body.decode("utf-8", errors="replace"))
    except ValueError:
        raise ClassifiedError("malformed", "its body was not JSON") from None
    text, usage = _completion_parts(completion)
    if text is None:
        raise ClassifiedError("malformed", "its body held no reply")
    return await read_pieces(_one_piece(Piece(writable(text), usage)), grow, cap)


def _completion_parts(completion: Any) -> tuple[str | None, tuple[Any, Any] | None]:
    """A chat completion's text (None when it has none) and its usage, as reported."""
    choices = completion.get("choices") if isinstance(completion, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    usage = completion.get("usage") if isinstance(completion, dict) else None
    counts = (usage.get("prompt_tokens"), usage.get("completion_tokens")) if isinstance(usage, dict) else None
    return (content if isinstance(content, str) else None), counts


async def _one_piece(piece: Piece) -> AsyncIterator[Piece]:
    yield piece


async def within_idle(step: Awaitable[T], idle: float | None) -> T:
    """One step of a stream (its opening, its next chunk), or a `timeout` when nothing comes
    for `idle` seconds: a provider that stalls, or drips a byte at a time, which the HTTP
    client counts as progress, ends the call long before its stage's deadline."""
    try:
        async with asyncio.timeout(idle):
            return await step
    except TimeoutError:
        raise ClassifiedError("timeout", f"the stream stalled: nothing arrived for {idle:g}s") from None


async def stalling_after(chunks: AsyncIterator[T], idle: float | None) -> AsyncIterator[T]:
    """`chunks`, each awaited `within_idle`, under one deadline in the task reading them, moved
    on at each chunk: a chunk costs no task and no timer of its own, as `asyncio.wait_for` made
    (a streamed answer is a few hundred chunks). No deadline runs while a chunk is handed on."""
    iterator = aiter(chunks)
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(None) as deadline:
            while True:
                deadline.reschedule(None if idle is None else loop.time() + idle)
                try:
                    chunk = await anext(iterator)
                except StopAsyncIteration:
                    return
                deadline.reschedule(None)
                yield chunk
    except TimeoutError:
        raise ClassifiedError("timeout", f"the stream stalled: nothing arrived for {idle:g}s") from None


async def _pieces(chunks: AsyncIterator[Any]) -> AsyncIterator[Piece]:
    """litellm's chunks as pieces: each one's text delta, and the usage a chunk carries."""
    async for chunk in chunks:
        usage = getattr(chunk, "usage", None)
        counted = (
            None
            if usage is None
            else (getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None))
        )
        yield Piece(_delta_text(chunk), counted)


def _delta_text(chunk: Any) -> str:
    """The text a chunk adds, lone surrogates replaced (its controls are removed once the
    pieces are joined); the usage chunk and the finish have none."""
    try:
        content = chunk.choices[0].delta.content
    except (AttributeError, IndexError, TypeError):
        return ""
    return writable(content) if isinstance(content, str) else ""
