"""Hand-built event streams, as the engines would emit them, and the harness that plays them."""

from __future__ import annotations

import re
from collections.abc import Iterable
from io import StringIO

from rich.console import Console

from panel_cli.events import (
    BaseEvent,
    CallFailed,
    CallFinished,
    CallStarted,
    EventBus,
    MemberInfo,
    RankingParsed,
    RoundTallied,
    RunFinished,
    RunStarted,
    StageStarted,
    VoteCast,
    WarningRaised,
)
from panel_cli.view.base import View

RUN_ID = "run-7f3a"
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\r")


def screen(console: Console) -> str:
    """What was written to a test console, without escape sequences."""
    assert isinstance(console.file, StringIO)
    return _ESCAPES.sub("", console.file.getvalue())


async def play(view: View, events: Iterable[BaseEvent], run_id: str = RUN_ID) -> list[BaseEvent]:
    """Emit `events` through a real EventBus, as an engine would, and close the view after."""
    bus = EventBus(run_id, [view])
    try:
        return [await bus.emit(event) for event in events]
    finally:
        view.close()


MEMBERS = [
    MemberInfo(name="alice", model="openai/gpt-4o", label="A"),
    MemberInfo(name="bob", model="anthropic/claude-sonnet-4-5", label="B"),
    MemberInfo(name="carol", model="ollama/llama3.1", label="C"),
]
FINAL_ANSWER = "Use **PostgreSQL** with row-level security.\n\n- sessions in Redis\n- keys rotated monthly"


def call(
    member: str, stage: str, round_: int | None, text: str, latency: float, cost: float | None = None
) -> list[BaseEvent]:
    model = next(m.model for m in MEMBERS if m.name == member)
    call_id = f"{member}-{round_}"
    return [
        CallStarted(call_id=call_id, member=member, model=model, stage=stage, round=round_),
        CallFinished(
            call_id=call_id,
            member=member,
            model=model,
            stage=stage,
            round=round_,
            text=text,
            tokens_in=100,
            tokens_out=45,
            cost=cost,
            latency=latency,
        ),
    ]


def confer_events(*, costs: bool = False) -> list[BaseEvent]:
    """Three members, one vote round: carol times out in round 0, bob's vote falls back."""
    cost = 0.0021 if costs else None
    names = [m.name for m in MEMBERS]
    return [
        RunStarted(protocol="confer", panel="auth", question="How should we store users?", members=MEMBERS),
        StageStarted(stage="answer", round=0, members=names),
        *call("alice", "answer", 0, "Use PostgreSQL with row-level security; keep sessions in Redis. " * 3, 1.23, cost),
        *call("bob", "answer", 0, "MongoDB, because the schema will change a lot.", 0.87, cost),
        CallStarted(call_id="carol-0", member="carol", model="ollama/llama3.1", stage="answer", round=0),
        CallFailed(
            call_id="carol-0",
            member="carol",
            model="ollama/llama3.1",
            stage="answer",
            round=0,
            kind="timeout",
            message="deadline 5s passed",
            latency=5.0,
        ),
        StageStarted(stage="vote", round=1, members=names, block={"A": "Use PostgreSQL…", "B": "MongoDB…"}),
        *call("alice", "vote", 1, '{"chosen_label": "A", "confidence": 90}', 1.5, cost),
        *call("bob", "vote", 1, "I think A is fine", 1.1, cost),
        *call("carol", "vote", 1, '{"chosen_label": "A", "confidence": 80}', 2.0, cost),
        VoteCast(round=1, voter="alice", choice="A", confidence=90, rationale="mine is sound"),
        WarningRaised(message="no structured vote; kept its own answer at 50", member="bob"),
        VoteCast(round=1, voter="bob", choice="B", confidence=50, fallback=True),
        VoteCast(round=1, voter="carol", choice="A", confidence=80),
        RoundTallied(round=1, scores={"A": 170, "B": 50}, winner_label="A", winner="alice"),
        RunFinished(
            final_answer=FINAL_ANSWER,
            result={
                "final_answer": FINAL_ANSWER,
                "winner": "alice",
                "confidence_score": 170 / 300,
                "converged": False,
                "rounds": [{"round": 1}],
            },
        ),
    ]


def council_events() -> list[BaseEvent]:
    """A council's review stage with two parsed rankings and the aggregate."""
    names = ["alice", "bob"]
    return [
        RunStarted(protocol="council", panel="arch", question="Which database?", members=MEMBERS[:2]),
        StageStarted(stage="reviews", members=names),
        RankingParsed(reviewer="alice", ranking=["Model B", "Model A"]),
        RankingParsed(reviewer="bob", ranking=["Model B", "Model A"]),
        RankingParsed(
            aggregate=[
                {"name": "bob", "label": "Model B", "average_rank": 1.0, "count": 2},
                {"name": "alice", "label": "Model A", "average_rank": 2.0, "count": 2},
            ]
        ),
        RunFinished(final_answer="Pick bob's answer.", result={"top_ranked": "bob"}),
    ]


JUDGED = ["alice", "bob", "carol"]


def judge_events() -> list[BaseEvent]:
    """ensemble's consensus with `--scorer judge:alice`: alice scores every response in a call
    of its own (about its author) in one stage, then bob's response is chosen."""
    events: list[BaseEvent] = [
        RunStarted(protocol="ensemble", panel="pick", question="Which database?", members=MEMBERS),
        StageStarted(stage="answer", members=JUDGED),
    ]
    for name in JUDGED:
        events += call(name, "answer", None, f"{name}'s answer", 1.0)
    events.append(StageStarted(stage="judge", members=["alice"]))
    events += [
        CallStarted(call_id=f"judge-{name}", member="alice", model="openai/gpt-4o", stage="judge", about=name)
        for name in JUDGED
    ]
    scores = {"alice": 60, "bob": 90, "carol": 70}
    for name in JUDGED:
        events.append(
            CallFinished(
                call_id=f"judge-{name}",
                member="alice",
                model="openai/gpt-4o",
                stage="judge",
                about=name,
                text=f'{{"score": {scores[name]}}}',
                latency=0.5,
            )
        )
    events += [
        RoundTallied(scores=scores, winner_label="bob", winner="bob"),
        RunFinished(final_answer="bob's answer", result={"mode": "consensus", "chosen": "bob"}),
    ]
    return events


def demo_events() -> list[BaseEvent]:
    """`confer_events` with every member a demo persona, its calls too (a demo call costs 0.0)."""
    demo: list[BaseEvent] = []
    for event in confer_events():
        if isinstance(event, RunStarted):
            members = [member.model_copy(update={"model": f"demo/{member.name}"}) for member in event.members]
            event = event.model_copy(update={"members": members})
        elif hasattr(event, "call_id") and hasattr(event, "model"):
            event = event.model_copy(update={"model": f"demo/{event.member}"})
        demo.append(event)
    return demo
