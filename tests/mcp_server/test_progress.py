"""A run's progress as MCP progress notifications: counted per stage from the run's events, its
value the calls ended so far (so it only grows), sent without ever holding the run up."""

from __future__ import annotations

import asyncio

from panel_cli.events import (
    CallFailed,
    CallFinished,
    CallStarted,
    MemberInfo,
    MemberSkipped,
    RunStarted,
    StageStarted,
    VoteCast,
)
from panel_cli.mcp_server.progress import RunProgress


def call(event: type, member: str, stage: str, round_: int | None = None, **fields: object) -> object:
    return event(
        call_id=f"{member}-{stage}-{round_}", member=member, model="demo/sage", stage=stage, round=round_, **fields
    )


async def test_each_ended_call_says_where_the_run_is() -> None:
    sent: list[tuple[float, str]] = []

    async def report(progress: float, message: str) -> None:
        sent.append((progress, message))

    progress = RunProgress(report)
    sender = asyncio.create_task(progress.deliver())
    members = [MemberInfo(name=name, model="demo/sage") for name in ("a", "b", "c")]
    await progress(RunStarted(protocol="vote", panel="p", question="Q", members=members))
    await progress(StageStarted(stage="vote", round=2, members=["a", "b", "c"]))
    for member in ("a", "b", "c"):
        await progress(call(CallStarted, member, "vote", 2))
    await progress(call(CallFinished, "a", "vote", 2, text="A", latency=0.1))
    await asyncio.sleep(0)
    await progress(VoteCast(voter="a", choice="A"))  # ignored
    await progress(call(CallFailed, "b", "vote", 2, kind="timeout", message="timed out", latency=1.0))
    await asyncio.sleep(0)
    await progress(MemberSkipped(member="c", model="demo/sage", stage="vote", round=2, reason="gone"))
    await progress.finish(sender, guard=5)

    assert sent == [
        (1.0, "vote vote round 2: 1 of 3 calls"),
        (2.0, "vote vote round 2: 2 of 3 calls"),
        (3.0, "vote vote round 2: 3 of 3 calls"),
    ]


async def test_a_stage_without_rounds_names_none_and_counts_extra_calls() -> None:
    progress = RunProgress(lambda progress, message: asyncio.sleep(0))
    await progress(RunStarted(protocol="ensemble", panel="p", question="Q", members=[]))
    await progress(StageStarted(stage="answer", members=["a"]))
    await progress(call(CallStarted, "a", "answer"))
    await progress(call(CallStarted, "a", "answer", about="b"))
    await progress(call(CallFinished, "a", "answer", text="x", latency=0.1))
    assert progress.message() == "ensemble answer: 1 of 2 calls"


async def test_calls_ending_together_make_one_notification_and_the_value_only_grows() -> None:
    sent: list[float] = []
    release = asyncio.Event()

    async def slow_report(progress: float, message: str) -> None:
        await release.wait()  # a client slow to read
        sent.append(progress)

    progress = RunProgress(slow_report)
    sender = asyncio.create_task(progress.deliver())
    await progress(StageStarted(stage="answer", members=["a", "b", "c"]))
    for member in ("a", "b", "c"):  # never waits on the client
        await progress(call(CallFinished, member, "answer", text="x", latency=0.1))
        await asyncio.sleep(0)
    release.set()
    await progress.finish(sender, guard=5)
    assert sent == [1.0, 3.0]


async def test_a_client_that_cannot_be_reached_ends_the_notifications_not_the_run() -> None:
    async def broken(progress: float, message: str) -> None:
        raise ConnectionError("gone")

    progress = RunProgress(broken)
    sender = asyncio.create_task(progress.deliver())
    await progress(StageStarted(stage="answer", members=["a", "b"]))
    await progress(call(CallFinished, "a", "answer", text="x", latency=0.1))
    await asyncio.sleep(0)
    await progress(call(CallFinished, "b", "answer", text="x", latency=0.1))
    await progress.finish(sender, guard=5)
    assert sender.done() and sender.exception() is None
