"""What one call holds while it runs: the reply each of its requests got, and what its requests
add up to. The steps of a call (the first request, the tool loop, asking a structured reply
once more) each add to one `Exchange` and hand on a `Reply`."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from panel_cli.events import BaseEvent
from panel_cli.llm.brief import RequestBrief
from panel_cli.llm.budget import Hold
from panel_cli.llm.errors import Failure
from panel_cli.llm.tool_calls import RequestedCall
from panel_cli.llm.usage import reported_usage

Emit = Callable[[BaseEvent], Awaitable[Any]]


@dataclasses.dataclass
class Reply:
    """One model request's outcome inside a call: its text and the tool calls it asks for, or
    the failure that ended it."""

    text: str = ""
    calls: list[RequestedCall] = dataclasses.field(default_factory=list)
    failure: Failure | None = None
    # When a structured reply was asked for once more (`panel_cli.llm.one_answer`): what to add
    # to its problem if it still cannot be used.
    again: str | None = None


@dataclasses.dataclass
class Exchange:
    """What a call's requests add up to: the messages of the last one sent (what the store
    keeps), attempts, tokens (None until a reply reports them), its reservation against the
    run's budget, if it has one, its brief, and what its tool calls have found so far (both
    for a demo persona, which reads no prompt)."""

    messages: list[dict[str, Any]]
    brief: RequestBrief
    attempts: int = 0
    tokens_in: int | None = None
    tokens_out: int | None = None
    hold: Hold | None = None
    found: list[str] = dataclasses.field(default_factory=list)
    # Whether any request got a reply, and why its usage is unknown when a provider reported
    # counts that cannot be counts (`panel_cli.llm.usage`): the call's tokens are then unknown.
    replied: bool = False
    bad_usage: str | None = None
    # Set once the call's final event (finished, failed, refused, reused) is on its way, so a
    # cancellation arriving after it adds no second one.
    ended: bool = False

    def count(self, tokens_in: Any, tokens_out: Any) -> None:
        """Add one reply's counts, as its provider reported them."""
        self.replied = True
        usage = reported_usage(tokens_in, tokens_out)
        if usage.problem is not None:
            self.bad_usage = usage.problem
        if usage.tokens_in is not None:
            self.tokens_in = (self.tokens_in or 0) + usage.tokens_in
        if usage.tokens_out is not None:
            self.tokens_out = (self.tokens_out or 0) + usage.tokens_out

    @property
    def tokens(self) -> tuple[int | None, int | None]:
        """The call's counts: unknown both when any of its replies reported impossible ones."""
        return (None, None) if self.bad_usage is not None else (self.tokens_in, self.tokens_out)


# One more request of a call, with the retries and limits every request gets: the request, and
# whether its reply may ask for tools.
Complete = Callable[[dict[str, Any], bool], Awaitable[Reply]]
# Before a further request of a call: reserve its worst case too, or the reply that ends the
# call as refused by the budget.
Extend = Callable[[dict[str, Any]], Reply | None]
