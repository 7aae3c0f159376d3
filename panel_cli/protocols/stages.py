"""The stages every protocol is built from: announce a stage, bound it by its time limit, and
run one piece of work per member (or per response, per subtask) concurrently; and the
chairman's synthesis with its backups.

A protocol module then says only what its stages ask and how it reads the replies."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from panel_cli.config import Member
from panel_cli.events import BaseEvent, StageStarted, WarningRaised
from panel_cli.llm.brief import RequestBrief
from panel_cli.llm.gateway import CallResult, Gateway

T = TypeVar("T")
Item = TypeVar("Item")
Emit = Callable[[BaseEvent], Awaitable[Any]]


def stage_deadline(seconds: float | None) -> float | None:
    """A stage's end as a `loop.time()` instant, which the gateway never lets a call pass."""
    return None if seconds is None else asyncio.get_running_loop().time() + seconds


@dataclass(frozen=True)
class Stage:
    """A stage under way: its name and round, as its calls report them, and its deadline."""

    name: str
    round: int | None
    deadline: float | None


async def open_stage(
    emit: Emit,
    name: str,
    *,
    members: Sequence[str],
    limit: float | None,
    round: int | None = None,
    block: dict[str, str] | None = None,
) -> Stage:
    """Announce a stage (who takes part, and the labelled block it shows them, if any) and
    start its clock."""
    await emit(StageStarted(stage=name, round=round, members=list(members), block=block or {}))
    return Stage(name, round, stage_deadline(limit))


async def gather_each(
    items: Iterable[Item], work: Callable[[Item], Awaitable[T]], *, at_once: int | None = None
) -> list[T]:
    """`work` on every item concurrently, results in the items' order; with `at_once`, no
    more than that many run at the same time (the rest wait their turn).

    A task group, not `asyncio.gather`: when the stage is cancelled (Ctrl-C), gather gives up
    as soon as one call has finished cancelling, while the others are still recording their
    own cancellation; a task group waits for every one, so no record is lost."""
    slots = asyncio.Semaphore(at_once) if at_once is not None else None

    async def in_turn(item: Item) -> T:
        if slots is None:
            return await work(item)
        async with slots:
            return await work(item)

    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(in_turn(item)) for item in items]
    except BaseExceptionGroup as failure:
        # The work never fails on a provider's account (the gateway reports those); what is
        # left is a bug, raised as itself rather than wrapped in a group.
        raise failure.exceptions[0] from None
    return [task.result() for task in tasks]


async def ask(
    gateway: Gateway,
    stage: Stage,
    member: Member,
    messages: list[dict[str, Any]],
    *,
    deadline: float | None,
    schema: type[BaseModel] | None = None,
    tools: bool = False,
    brief: RequestBrief | None = None,
) -> CallResult:
    """One member's call in a stage, reported under the stage's name and round."""
    return await gateway.call(
        member,
        messages,
        stage=stage.name,
        round=stage.round,
        deadline=deadline,
        schema=schema,
        tools=tools,
        brief=brief,
    )


async def broadcast(
    gateway: Gateway,
    emit: Emit,
    members: Sequence[Member],
    messages: list[dict[str, Any]],
    *,
    stage: str,
    limit: float | None,
    round: int | None = None,
    schema: type[BaseModel] | None = None,
    tools: bool = False,
    brief: RequestBrief | None = None,
) -> list[CallResult]:
    """The same messages to every member at once, in one announced, time-limited stage;
    `tools` for a free-text stage whose members may use their tools; `brief`, what the
    messages ask (`panel_cli.llm.brief`)."""
    current = await open_stage(emit, stage, members=[member.name for member in members], limit=limit, round=round)
    return await gather_each(
        members,
        lambda member: ask(
            gateway, current, member, messages, deadline=current.deadline, schema=schema, tools=tools, brief=brief
        ),
    )


# What a member is asked in its turn, from the replies before it: its messages and its brief.
TurnRequest = Callable[[Sequence[CallResult]], tuple[list[dict[str, Any]], RequestBrief]]


async def in_turn(
    gateway: Gateway,
    emit: Emit,
    members: Sequence[Member],
    request: TurnRequest,
    *,
    stage: str,
    limit: float | None,
    round: int | None = None,
    tools: bool = False,
) -> list[CallResult]:
    """`broadcast`'s stage with its members called one after another, in order, each asked
    what `request` makes of the replies before it (a failed one among them). One stage, one
    announcement; each call has the whole `limit` from its own start, as each call of a
    broadcast has it from the stage's start, so a member late in the order is not starved."""
    current = await open_stage(emit, stage, members=[member.name for member in members], limit=limit, round=round)
    replies: list[CallResult] = []
    for member in members:
        messages, brief = request(replies)
        deadline = stage_deadline(limit)
        replies.append(await ask(gateway, current, member, messages, deadline=deadline, tools=tools, brief=brief))
    return replies


async def out_of_budget(gateway: Gateway, emit: Emit, ending: str) -> bool:
    """Whether the run's spending cap has refused a call, so the protocol must end with what
    it has; when it has, `ending` (what the protocol does instead) is said as a warning.
    Protocols ask at their decision points and stop at the first yes, so it is said once."""
    if not gateway.budget_exhausted:
        return False
    await emit(WarningRaised(message=f"the budget ran out; {ending}"))
    return True


def failure_reason(kind: str | None, error: str | None) -> str:
    """`timeout`, or the kind and the provider's words, in one level of parentheses: what a
    person needs to know (`auth: the provider rejected the key (401): bad key`)."""
    if kind == "timeout":
        return "timeout"
    return f"{kind or 'failed'}: {one_level(error)}" if error else kind or "failed"


def one_level(text: str) -> str:
    """Parentheses inside parentheses read as a comma, so words quoted from a provider, with a
    note of ours around them, read in one level: `a (b (c))` is `a (b, c)`."""
    out: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
            if depth > 1:
                while out and out[-1] == " ":
                    out.pop()
                out.append(", ")
                continue
        elif char == ")" and depth:
            depth -= 1
            if depth:
                continue
        out.append(char)
    return "".join(out)


SYNTHESIS_FAILED = "Synthesis failed"


class ChairFailure(BaseModel):
    """A chairman that could not write the answer, and why, so a backup's win is explained."""

    chairman: str
    reason: str


class Synthesis(BaseModel):
    """Who wrote the final answer; `failures` lists each chairman that failed before it
    (or all of them, when none succeeded, and then `text` says `Synthesis failed: …`)."""

    chairman: str | None
    model: str | None
    text: str
    success: bool
    failures: list[ChairFailure] = Field(default_factory=list)
    stand_in: bool = Field(
        default=False, description="the writer is no chairman but a member that answered, every chairman having failed"
    )


async def synthesis_stage(
    gateway: Gateway,
    emit: Emit,
    chairmen: Sequence[Member],
    prompt_text: str,
    *,
    limit: float | None,
    brief: RequestBrief | None = None,
    stand_ins: Sequence[Member] = (),
) -> Synthesis:
    """The first chairman that answers writes the final answer; each failure hands over to
    the next (with the whole time limit: a backup after a timeout needs it), so one failing
    chairman does not lose the whole run. `stand_ins`, members that answered, are tried after
    every chairman, in order (a panel that named no chairman: its first member's failure
    should not lose the answers the others gave); one that writes is `stand_in`."""
    stage = await open_stage(emit, "synthesis", members=[chairmen[0].name], limit=limit)
    prompt = [{"role": "user", "content": prompt_text}]
    failures: list[ChairFailure] = []
    writers = [*chairmen, *(member for member in stand_ins if member not in chairmen)]
    for index, chairman in enumerate(writers):
        deadline = stage.deadline if index == 0 else stage_deadline(limit)
        reply = await gateway.call(chairman, prompt, stage="synthesis", deadline=deadline, tools=True, brief=brief)
        if reply.ok:
            return Synthesis(
                chairman=chairman.name,
                model=chairman.model,
                text=reply.text.strip(),
                success=True,
                failures=failures,
                stand_in=index >= len(chairmen),
            )
        failures.append(ChairFailure(chairman=chairman.name, reason=failure_reason(reply.error_kind, reply.error)))
        if index + 1 < len(writers):
            after = writers[index + 1].name
            takes_over = (
                f"backup chairman {after} takes over"
                if index + 1 < len(chairmen)
                else f"{after}, a member that answered, writes the final answer instead"
            )
            await emit(
                WarningRaised(message=f"chairman failed: {failures[-1].reason}; {takes_over}", member=chairman.name)
            )
    reasons = failures[0].reason if len(failures) == 1 else "; ".join(f"{f.chairman}: {f.reason}" for f in failures)
    return Synthesis(chairman=None, model=None, text=f"{SYNTHESIS_FAILED}: {reasons}", success=False, failures=failures)
