from __future__ import annotations

from io import StringIO

from panel_cli.events import CallFailed, CallFinished, MemberSkipped, RankingParsed, RunStarted
from panel_cli.view.plain import PlainView
from tests.view.sample import (
    FINAL_ANSWER,
    MEMBERS,
    RUN_ID,
    confer_events,
    council_events,
    demo_events,
    judge_events,
    play,
)


async def test_one_plain_line_per_event() -> None:
    stream = StringIO()
    events = await play(PlainView(stream), confer_events())
    lines = stream.getvalue().splitlines()

    assert len(lines) == len(events) + 1  # the run's start gives the question on a line of its own
    assert lines[0] == f"run started  confer  auth  members: alice, bob, carol  run {RUN_ID}"
    assert lines[1] == "question: How should we store users?"
    assert "[round 0] answer started  alice, bob, carol" in lines
    assert "[round 0] call finished  bob  0.87s  145 tok" in lines
    assert "[round 0] call failed  carol  timeout: deadline 5s passed" in lines
    assert "[round 1] vote  alice -> A (90)" in lines
    assert "[round 1] vote  bob -> B (50, fallback: kept own answer)" in lines
    assert "round 1 tallied: A=170 B=50 -> A (alice)" in lines
    assert "warning: bob: no structured vote; kept its own answer at 50" in lines
    assert lines[-1].startswith(
        "run finished  winner alice  confidence score 57%  converged no  rounds 1  calls 6 (1 failed)"
    )
    assert "cost —" in lines[-1] and lines[-1].endswith(f"run {RUN_ID}")


async def test_no_colour_no_markup_no_answer() -> None:
    stream = StringIO()
    await play(PlainView(stream), confer_events())
    output = stream.getvalue()
    assert "\x1b" not in output
    assert "[bold" not in output
    assert FINAL_ANSWER.splitlines()[0] not in output  # the CLI prints the answer to stdout itself


async def test_rankings() -> None:
    """A reviewer's ranking is of labels; once the rankings are in, each label is named."""
    stream = StringIO()
    await play(PlainView(stream), council_events())
    lines = stream.getvalue().splitlines()
    assert "ranking  alice: Model B, Model A" in lines
    at = lines.index("labels: Model A = alice, Model B = bob")
    assert lines[at + 1] == "aggregate ranking: 1. bob (Model B, avg 1.00), 2. alice (Model A, avg 2.00)"
    assert at > lines.index("ranking  bob: Model B, Model A")


async def test_calls_about_someone_skips_truncation_and_an_ensemble_choice() -> None:
    stream = StringIO()
    events = judge_events()
    bob = next(e for e in events if isinstance(e, CallFinished) and e.member == "bob")
    events[events.index(bob)] = bob.model_copy(update={"truncated": True})
    events.insert(
        -2, MemberSkipped(member="carol", model="ollama/llama3.1", stage="judge", about="bob", reason="no key")
    )
    await play(PlainView(stream), events)
    lines = stream.getvalue().splitlines()

    assert "[judge] call started  alice → bob  openai/gpt-4o" in lines
    assert "[judge] call finished  alice → carol  0.50s" in lines
    assert "[answer] call finished  bob  1.00s  145 tok  truncated" in lines
    assert "[judge] skipped  carol → bob  no key" in lines
    assert "scores: bob=90 carol=70 alice=60 -> bob" in lines  # best first, and no round to tally
    assert not any("tallied" in line for line in lines)
    assert "skipped 1 call" in lines[-1] and "calls 6 " in lines[-1]


async def test_an_empty_aggregate_ranking_says_why() -> None:
    stream = StringIO()
    await play(PlainView(stream), [RankingParsed(aggregate=[])])
    assert stream.getvalue() == "aggregate ranking: none (no review gave a usable ranking)\n"


async def test_a_long_question_is_one_line() -> None:
    stream = StringIO()
    question = "How should we\n\nstore   users?\n" + "more detail " * 40
    await play(PlainView(stream), [RunStarted(protocol="confer", panel="p", question=question, members=MEMBERS)])
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[1].startswith("question: How should we store users? more detail")
    assert lines[1].endswith("…") and len(lines[1]) <= len("question: ") + 200


async def test_a_demo_run_costs_nothing_and_says_so() -> None:
    stream = StringIO()
    await play(PlainView(stream), demo_events())
    last = stream.getvalue().splitlines()[-1]
    assert "cost simulated, free" in last and "$" not in last


def test_a_cancelled_call_is_said_once() -> None:
    """A racer that lost, or a call Ctrl-C stopped, was cancelled, not failed: `cancelled: cancelled` said nothing."""
    view = PlainView(StringIO())
    common = {"call_id": "c1", "member": "sage", "model": "demo/sage", "stage": "answer", "latency": 0.1}
    cancelled = CallFailed(**common, kind="cancelled", message="cancelled")
    assert view.line(cancelled) == "[answer] call cancelled  sage"
    failed = CallFailed(**common, kind="server", message="the provider failed (500)")
    assert view.line(failed) == "[answer] call failed  sage  server: the provider failed (500)"
