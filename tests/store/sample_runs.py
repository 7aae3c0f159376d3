"""Event sequences shaped like a real confer run, for the store and history tests."""

from __future__ import annotations

from pathlib import Path

from panel_cli.events import (
    BaseEvent,
    CallFailed,
    CallFinished,
    CallStarted,
    EventBus,
    MemberInfo,
    RoundTallied,
    RunFailed,
    RunFinished,
    RunInterrupted,
    RunStarted,
    StageStarted,
    VoteCast,
)
from panel_cli.store.subscriber import TranscriptStore

QUESTION = "Which database should we use for the audit log?"
ANSWER = "Use **PostgreSQL**: append-only tables and row-level security."


def run_started(question: str = QUESTION) -> RunStarted:
    return RunStarted(
        protocol="confer",
        panel="db-choice",
        question=question,
        members=[MemberInfo(name="gpt", model="openai/gpt-4o"), MemberInfo(name="claude", model="anthropic/claude")],
        config={"max_rounds": 3, "until_convergence": True},
    )


def answer_calls(
    run_id: str, cost_gpt: float | None = 0.002, cost_claude: float | None = None, truncated: bool = False
) -> list[BaseEvent]:
    """Round 0: both members answer; claude's provider reports no price. `truncated`: gpt's
    reply was longer than `max_response_chars`."""
    messages = [{"role": "user", "content": QUESTION}]
    return [
        StageStarted(stage="answer", round=0, members=["gpt", "claude"]),
        CallStarted(call_id=f"{run_id}-1", member="gpt", model="openai/gpt-4o", stage="answer", round=0),
        CallStarted(call_id=f"{run_id}-2", member="claude", model="anthropic/claude", stage="answer", round=0),
        CallFinished(
            call_id=f"{run_id}-1",
            member="gpt",
            model="openai/gpt-4o",
            stage="answer",
            round=0,
            messages=messages,
            text="PostgreSQL.",
            truncated=truncated,
            tokens_in=100,
            tokens_out=20,
            cost=cost_gpt,
            latency=1.5,
        ),
        CallFinished(
            call_id=f"{run_id}-2",
            member="claude",
            model="anthropic/claude",
            stage="answer",
            round=0,
            messages=messages,
            text="SQLite is enough.",
            tokens_in=90,
            tokens_out=30,
            cost=cost_claude,
            latency=2.0,
        ),
    ]


def vote_round(run_id: str, error: str = "timed out after 300s", detail: str | None = None) -> list[BaseEvent]:
    """Round 1: gpt votes, claude's call times out (`detail`: the provider's raw text) and
    falls back to its own answer."""
    messages = [{"role": "user", "content": "Answer A: PostgreSQL.\nAnswer B: SQLite is enough."}]
    return [
        StageStarted(stage="vote", round=1, members=["gpt", "claude"], block={"A": "PostgreSQL.", "B": "SQLite."}),
        CallStarted(call_id=f"{run_id}-3", member="gpt", model="openai/gpt-4o", stage="vote", round=1),
        CallStarted(call_id=f"{run_id}-4", member="claude", model="anthropic/claude", stage="vote", round=1),
        CallFinished(
            call_id=f"{run_id}-3",
            member="gpt",
            model="openai/gpt-4o",
            stage="vote",
            round=1,
            messages=messages,
            text='{"chosen_label": "A"}',
            tokens_in=200,
            tokens_out=40,
            cost=0.003,
            latency=1.0,
        ),
        CallFailed(
            call_id=f"{run_id}-4",
            member="claude",
            model="anthropic/claude",
            stage="vote",
            round=1,
            messages=messages,
            kind="timeout",
            message=error,
            detail=detail,
            latency=300.0,
            attempts=3,
        ),
        VoteCast(round=1, voter="gpt", choice="A", confidence=80, rationale="Mature."),
        VoteCast(round=1, voter="claude", choice="B", confidence=50, fallback=True),
        RoundTallied(round=1, scores={"A": 80, "B": 50}, winner_label="A", winner="gpt"),
    ]


def confer_run(run_id: str, ending: BaseEvent | None = None) -> list[BaseEvent]:
    """A whole run; `ending` replaces the usual successful finish."""
    finished = RunFinished(final_answer=ANSWER, result={"winner": "gpt", "converged": False})
    return [run_started(), *answer_calls(run_id), *vote_round(run_id), ending or finished]


ENDINGS: dict[str, BaseEvent] = {
    "finished": RunFinished(final_answer=ANSWER, result={"winner": "gpt"}),
    "no_answer": RunFinished(final_answer=None, reached_answer=False, result={"consensus_reached": False}),
    "failed": RunFailed(message="Every member failed."),
    "interrupted": RunInterrupted(),
}


async def record(path: Path, run_id: str, events: list[BaseEvent]) -> None:
    """Run the events through a bus with a store subscribed, as a protocol would."""
    async with await TranscriptStore.open(path) as store:
        bus = EventBus(run_id, [store])
        for event in events:
            await bus.emit(event)
