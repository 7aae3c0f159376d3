"""A run's progress as MCP progress notifications: one as each call ends ("vote round 2: 7 of 9
calls"), its `progress` the calls ended so far in the run, so it only ever grows, as the
protocol requires.

The subscriber never waits on the client: it keeps the latest state, and a sender task
(`deliver`) sends it when it can, so a client slow to read its notifications slows nothing but
its own notifications (several calls ending at once make one notification, the last).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from panel_cli.events import (
    AskingStopped,
    BaseEvent,
    CallFailed,
    CallFinished,
    CallStarted,
    CallTextGrew,
    ContributionMade,
    DecisionRecorded,
    DelphiRoundEnded,
    LeaderChose,
    MemberSkipped,
    PlanAccepted,
    PlanProposed,
    PlanRejected,
    QuorumReached,
    RankingParsed,
    RoundTallied,
    RunFailed,
    RunFinished,
    RunInterrupted,
    RunStarted,
    StageStarted,
    TaskFailed,
    TaskFinished,
    TaskSkipped,
    TaskStarted,
    ToolCallFinished,
    ToolCallStarted,
    ToolServerStarted,
    VerdictGiven,
    VoteCast,
    VoteOpened,
    VoteReceived,
    VoteTallied,
    WarningRaised,
)

# Sends one notification: (progress, message). The request's own `report_progress`.
Report = Callable[[float, str], Awaitable[None]]


class RunProgress:
    """A run's view for an MCP request: it draws nothing, it reports. Calls are counted per
    stage: those the stage asked for (its members, or more when a member makes several calls)
    and those ended (answered, failed, refused by the budget, or skipped)."""

    def __init__(self, report: Report) -> None:
        self._report = report
        self.protocol = ""
        self.stage = ""
        self.round: int | None = None
        self.expected = 0
        self.started = 0
        self.ended = 0
        self.total_ended = 0
        self._latest: tuple[int, str] | None = None
        self._wake = asyncio.Event()
        self._closed = False

    async def __call__(self, event: BaseEvent) -> None:
        handle = HANDLERS.get(type(event))
        if handle is not None:
            handle(self, event)

    def _run_started(self, event: RunStarted) -> None:
        self.protocol = event.protocol

    def _stage_started(self, event: StageStarted) -> None:
        self.stage, self.round = event.stage, event.round
        self.expected, self.started, self.ended = len(event.members), 0, 0

    def _asking_stopped(self, event: AskingStopped) -> None:
        """Members a stopping rule never asked are no calls the stage waits for."""
        if event.stage == self.stage:
            self.expected = max(self.expected - len(event.not_asked), self.ended)

    def _call_started(self, event: CallStarted) -> None:
        self.started += 1

    def _call_ended(self, event: Any) -> None:
        self.ended += 1
        self.total_ended += 1
        self._latest = (self.total_ended, self.message())
        self._wake.set()

    def message(self) -> str:
        """`confer vote round 2: 2 of 3 calls`; a stage without rounds names none."""
        stage = f"{self.protocol} {self.stage}" + (f" round {self.round}" if self.round else "")
        return f"{stage}: {self.ended} of {max(self.expected, self.started, self.ended)} calls"

    def close(self) -> None:
        """The run is over: `deliver` sends what is left and returns."""
        self._closed = True
        self._wake.set()

    async def deliver(self) -> None:
        """Send the latest state whenever it moved, until the run is over. A client that can no
        longer be reached ends the notifications, never the run."""
        sent = 0
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._latest is not None and self._latest[0] > sent:
                sent, message = self._latest
                try:
                    await self._report(float(sent), message)
                except Exception:
                    return
            if self._closed:
                return

    async def finish(self, sender: asyncio.Task[None], guard: float) -> None:
        """Close, and give the sender `guard` seconds to send the last notification."""
        self.close()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(sender, guard)


# What each event type does to the progress, by class. Every type is either here or in IGNORED,
# never in both: tests/test_event_consumers.py checks it.
HANDLERS: dict[type[BaseEvent], Callable[[RunProgress, Any], None]] = {
    RunStarted: RunProgress._run_started,
    StageStarted: RunProgress._stage_started,
    CallStarted: RunProgress._call_started,
    CallFinished: RunProgress._call_ended,
    CallFailed: RunProgress._call_ended,
    MemberSkipped: RunProgress._call_ended,
    AskingStopped: RunProgress._asking_stopped,
}
IGNORED: frozenset[type[BaseEvent]] = frozenset(
    {
        CallTextGrew,
        VoteCast,
        RoundTallied,
        RankingParsed,
        WarningRaised,
        RunFinished,
        RunFailed,
        RunInterrupted,
        PlanProposed,
        PlanRejected,
        PlanAccepted,
        TaskStarted,
        TaskFinished,
        TaskFailed,
        TaskSkipped,
        ContributionMade,
        DelphiRoundEnded,
        VerdictGiven,
        VoteOpened,
        VoteReceived,
        QuorumReached,
        VoteTallied,
        LeaderChose,
        DecisionRecorded,
        ToolServerStarted,
        ToolCallStarted,
        ToolCallFinished,
    }
)
