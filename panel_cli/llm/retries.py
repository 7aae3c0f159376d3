"""How long a request may take and how it is tried again.

litellm's own retries stretch a short timeout into seconds, so the gateway sends with none
(`max_retries: 0`) and owns them: each attempt within the per-call timeout, every attempt and
wait within the call's budget (every attempt at that timeout, from its first request) and the
stage deadline, the endpoint's concurrency limit held for the attempt alone, backoff with full
jitter between attempts, and a provider's Retry-After honoured when it fits."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Awaitable, Callable

from panel_cli.llm.demo_route import Read
from panel_cli.llm.errors import RETRYABLE, Failure, describe, retry_after_seconds
from panel_cli.llm.exchange import Exchange, Reply
from panel_cli.llm.stream import TextGrowth

BACKOFF_BASE = 0.5
BACKOFF_CAP = 20.0
# The longest single wait a provider's Retry-After can impose; asked for more, the call fails.
MAX_RETRY_WAIT = 60.0


@dataclasses.dataclass(frozen=True)
class Attempts:
    """A member's request rules: how many times it is tried again, each attempt's timeout."""

    retries: int
    timeout: float | None


def backoff(attempt: int, rng: random.Random) -> float:
    """Full jitter: a random wait up to an exponentially growing cap."""
    return rng.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1)))


def call_end(now: float, call_timeout: float | None, retries: int, deadline: float | None) -> float | None:
    """When a call must be over: its own budget (every attempt at the per-call timeout,
    from its first request) or the stage deadline, whichever comes first; None when
    neither is set. Retries and waits never stretch a call past it."""
    ends = [
        end
        for end in (deadline, None if call_timeout is None else now + call_timeout * (retries + 1))
        if end is not None
    ]
    return min(ends) if ends else None


def _seconds(value: float) -> str:
    return f"{value:.0f}s" if value >= 10 or value == int(value) else f"{value:.1f}s"


async def with_retries(
    send: Callable[[], Awaitable[Read]],
    *,
    rules: Attempts,
    limit: asyncio.Semaphore,
    deadline: float | None,
    exchange: Exchange,
    rng: random.Random,
    grow: TextGrowth | None = None,
) -> Reply:
    """`send` one request until it is answered or fails for good; its reply, or the failure
    that ended it. `deadline` is a `loop.time()` instant (the stage's end); `grow`, when the
    reply streams, starts over with each attempt."""
    loop = asyncio.get_running_loop()
    end, per_try = deadline, None
    attempts = 0
    while True:
        attempts += 1
        exchange.attempts += 1
        try:
            async with limit:
                # Timed once through the concurrency limit: a call queued behind other calls to
                # the same endpoint has not started yet.
                now = loop.time()
                if attempts == 1:
                    end = call_end(now, rules.timeout, rules.retries, deadline)
                limits = [t for t in (rules.timeout, None if end is None else end - now) if t is not None]
                per_try = min(limits) if limits else None
                if per_try is not None and per_try <= 0:
                    raise TimeoutError
                if grow is not None:
                    grow.restart()
                text, calls, tokens_in, tokens_out = await asyncio.wait_for(send(), per_try)
            exchange.count(tokens_in, tokens_out)
            return Reply(text=text, calls=calls)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            failure = describe(exc)
            if isinstance(exc, TimeoutError) and per_try is not None:
                failure = dataclasses.replace(failure, message=f"no reply within {max(per_try, 0.0):.1f}s")
            if failure.kind in RETRYABLE and attempts <= rules.retries:
                asked = retry_after_seconds(exc) if failure.kind == "rate_limited" else None
                delay = backoff(attempts, rng) if asked is None else asked
                if delay <= MAX_RETRY_WAIT and (end is None or loop.time() + delay < end):
                    await asyncio.sleep(delay)
                    continue
                if asked is not None:
                    failure = _waits_too_long(failure, asked)
            return Reply(failure=failure)


def _waits_too_long(failure: Failure, asked: float) -> Failure:
    message = f"rate limited; the provider asked to wait {_seconds(asked)}, longer than this call may take"
    return dataclasses.replace(failure, message=message)
