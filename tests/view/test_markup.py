"""User and model text is data: no view reads Rich markup (or emoji codes) in it."""

from __future__ import annotations

from io import StringIO

from rich.console import Console

from panel_cli.events import (
    BaseEvent,
    CallFailed,
    CallFinished,
    MemberInfo,
    MemberSkipped,
    RankingParsed,
    RoundTallied,
    RunFailed,
    RunFinished,
    RunStarted,
    StageStarted,
    VoteCast,
    WarningRaised,
)
from panel_cli.view.live import LiveView
from panel_cli.view.plain import PlainView
from tests.view.sample import play, screen

QUESTION = "Is [red]this[/red] safe? [/bold]"
LLAMA = "llama[/INST]"
GPT = "[bold]gpt"
ANSWER = "[/INST] Sure :smile: [/]"
RATIONALE = "[link=http://x]click[/link]"
WARNING = "ranked [red]Model Z[/red], not shown"
ERROR = "bad request: [/bold] unexpected"
SKIP = "its key was refused [/i]"
FINAL = "Use [bold]this[/bold] [/INST]"
FAILURE = "boom [/]"

TEXTS = [QUESTION, LLAMA, GPT, ANSWER, RATIONALE, WARNING, ERROR, SKIP]


def markup_run(ending: BaseEvent) -> list[BaseEvent]:
    members = [MemberInfo(name=GPT, model="openai/gpt-4o", label="A"), MemberInfo(name=LLAMA, model="ollama/llama3")]
    return [
        RunStarted(protocol="confer", panel="[b]panel", question=QUESTION, members=members),
        StageStarted(stage="answer", round=0, members=[GPT, LLAMA]),
        CallFinished(call_id="1", member=GPT, model="openai/gpt-4o", stage="answer", round=0, text=ANSWER, latency=1),
        CallFailed(
            call_id="2",
            member=LLAMA,
            model="ollama/llama3",
            stage="answer",
            round=0,
            kind="bad_request",
            message=ERROR,
            detail="[red]raw[/red]",
            latency=1,
        ),
        StageStarted(stage="vote", round=1, members=[GPT, LLAMA]),
        CallFinished(call_id="3", member=GPT, model="openai/gpt-4o", stage="vote", round=1, text="{}", latency=1),
        MemberSkipped(member=LLAMA, model="ollama/llama3", stage="vote", round=1, reason=SKIP),
        VoteCast(round=1, voter=GPT, choice="A", confidence=90, rationale=RATIONALE),
        WarningRaised(message=WARNING, member=LLAMA),
        RoundTallied(round=1, scores={"A": 90}, winner_label="A", winner=GPT, authors={"A": GPT}),
        StageStarted(stage="review", members=[GPT]),
        RankingParsed(reviewer=GPT, ranking=["[b]Model A[/b]"]),
        RankingParsed(aggregate=[{"name": LLAMA, "label": "[i]A", "average_rank": 1.0, "count": 1}]),
        ending,
    ]


async def test_the_live_view_prints_text_as_written() -> None:
    console = Console(file=StringIO(), force_terminal=True, width=200)
    await play(LiveView(console), markup_run(RunFinished(final_answer=FINAL, result={"winner": GPT})))
    text = screen(console)
    for written in [*TEXTS, "[b]panel", "[b]Model A[/b]", "[i]A", FINAL]:
        assert written in text, written
    assert "[red]raw[/red]" not in text  # a failure's raw detail is for the store, never drawn


async def test_a_failed_run_prints_its_message_as_written() -> None:
    console = Console(file=StringIO(), force_terminal=True, width=200)
    await play(LiveView(console), markup_run(RunFailed(message=FAILURE)))
    assert f"Run failed: {FAILURE}" in screen(console)


async def test_the_plain_view_prints_text_as_written() -> None:
    stream = StringIO()
    await play(PlainView(stream), markup_run(RunFailed(message=FAILURE)))
    output = stream.getvalue()
    for written in [*TEXTS, "[b]panel", "[b]Model A[/b]", f"run failed: {FAILURE}"]:
        if written not in (ANSWER, RATIONALE):  # progress lines carry neither an answer nor a rationale
            assert written in output, written
    assert "[red]raw[/red]" not in output
