"""A structured reply that holds two answers (two votes, two verdicts) is asked for once more,
in the same conversation, saying why. It is still one call; the answer to that is the call's
reply, and if that request fails, the first reply stands, unusable as it is."""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import BaseModel

from panel_cli.events import WarningRaised
from panel_cli.llm.exchange import Complete, Emit, Exchange, Extend, Reply
from panel_cli.llm.structured import one_answer_prompt, parse_structured
from panel_cli.tasks import find_task, mark


async def ask_for_one_answer(
    reply: Reply,
    request: dict[str, Any],
    schema: type[BaseModel],
    exchange: Exchange,
    *,
    member: str,
    cap: int,
    emit: Emit,
    complete: Complete,
    extend: Extend,
) -> Reply:
    """The call's reply: `reply` itself unless it holds conflicting answers, else the answer to
    asking once more (`complete`, after `extend` reserved it), with what to add to the problem
    if that still cannot be used (`Reply.again`)."""
    text = reply.text[:cap]
    found = parse_structured(text, schema)
    if not found.conflicting or found.problem is None:
        return reply
    await emit(WarningRaised(member=member, message=f"its reply could not be used ({found.problem}); asked once more"))
    task = find_task(str(request["messages"][-1].get("content") or ""))
    again = one_answer_prompt(found.problem)
    messages = [
        *request["messages"],
        {"role": "assistant", "content": text},
        {"role": "user", "content": mark(again, task) if task is not None else again},
    ]
    if extend({**request, "messages": messages}) is not None:
        return dataclasses.replace(reply, again="; the budget left no room to ask once more")
    exchange.messages = messages
    second = await complete({**request, "messages": messages}, False)
    if second.failure is not None:
        return dataclasses.replace(reply, again=f"; asked once more, that request failed ({second.failure.message})")
    return dataclasses.replace(second, again=", again when asked once more")
