"""A resumed run's replies from the run it resumes: each request that run got answered is
answered again from the store, by request hash, instead of being paid for again."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from pydantic import BaseModel

from panel_cli.config import Member
from panel_cli.events import CallFinished, CallRoute
from panel_cli.llm.exchange import Emit
from panel_cli.llm.result import CallResult, cut_warning, parse_reply


class AnsweredCall(Protocol):
    """A reply the run being resumed got, as the store reads it back (`CallRecord`)."""

    @property
    def response(self) -> str | None: ...

    @property
    def truncated(self) -> bool: ...

    @property
    def tokens_in(self) -> int | None: ...

    @property
    def tokens_out(self) -> int | None: ...

    @property
    def cost(self) -> float | None: ...


class AnsweredCalls:
    """The replies the run being resumed got, by request hash, oldest first. Each answers one
    request: a run that asked the same thing twice (two members on one model, a round whose
    prompt did not change) got two samples, and so does its resume."""

    def __init__(self, answered: Mapping[str, Sequence[AnsweredCall]] | None) -> None:
        self._answered: dict[str, deque[AnsweredCall]] = {
            digest: deque(calls) for digest, calls in (answered or {}).items()
        }

    def take(self, digest: str) -> AnsweredCall | None:
        """The next stored reply to this request not used yet, if any (each is used once)."""
        replies = self._answered.get(digest)
        while replies:
            earlier = replies.popleft()
            if earlier.response is not None:
                return earlier
        return None


async def reuse(
    emit: Emit,
    member: Member,
    route: CallRoute,
    messages: list[dict[str, Any]],
    digest: str,
    earlier: AnsweredCall,
    schema: type[BaseModel] | None,
    cap: int,
) -> CallResult:
    """Answer a request from the run being resumed: reported like a call, marked `reused`,
    with the tokens and cost the earlier run paid for it (a run's total counts every call it
    stands on; `spent_anew` leaves these out); no request is made."""
    text, truncated = earlier.response or "", earlier.truncated
    tokens_in, tokens_out, cost = earlier.tokens_in, earlier.tokens_out, earlier.cost
    await emit(
        CallFinished(
            **route,
            messages=messages,
            text=text,
            truncated=truncated,
            request_hash=digest,
            reused=True,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost=cost,
            latency=0.0,
            attempts=0,
        )
    )
    if truncated:
        await emit(cut_warning(member.name, cap))
    parsed, parse_error = parse_reply(text, schema)
    return CallResult(
        call_id=route["call_id"],
        member=member.name,
        model=member.model,
        ok=True,
        text=text,
        parsed=parsed,
        parse_error=parse_error,
        truncated=truncated,
        reused=True,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        cost=cost,
    )
