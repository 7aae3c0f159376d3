from __future__ import annotations

from io import StringIO

from rich.console import Console

from panel_cli.events import CallFailed, CallFinished, RunFailed, RunFinished, RunInterrupted, StageStarted
from panel_cli.view.final import render_final
from panel_cli.view.live import LiveView
from panel_cli.view.summary import RunTotals
from tests.view.sample import RUN_ID, confer_events, council_events, play, screen


async def test_confer_rounds_tally_and_final(console: Console) -> None:
    await play(LiveView(console), confer_events())
    text = screen(console)

    for expected in ("round 0 · answer", "round 1 · vote", "alice", "bob", "carol", "answered", "timed out"):
        assert expected in text
    assert "timeout: deadline 5s passed" in text
    assert "Use PostgreSQL with row-level security; keep sessions in" in text  # the preview, cut short
    assert "→ A 90" in text
    assert "→ B 50 (kept own)" in text
    assert "170" in text and "50" in text
    assert "winner: alice" in text
    assert "no structured vote; kept its own answer at 50" in text
    assert "mine is sound" in text  # a vote round shows the rationale, not the JSON vote


async def test_final_panel_and_summary(console: Console) -> None:
    await play(LiveView(console), confer_events())
    text = screen(console)
    final = text[text.rindex("╭─ answer") :]

    assert "Use PostgreSQL with row-level security." in final
    assert "• sessions in Redis" in final  # rendered as Markdown, not printed raw
    assert "winner alice" in final
    assert "confidence 57%" in final
    assert "converged no" in final
    assert "rounds 1" in final
    assert "calls 6 (1 failed)" in final
    assert "tokens 725" in final
    assert "cost —" in final
    assert f"run {RUN_ID}" in final


async def test_cost_is_the_sum_of_known_costs(console: Console) -> None:
    await play(LiveView(console), confer_events(costs=True))
    assert "cost $0.0105" in screen(console)


async def test_stages_print_in_order_and_the_answer_last(console: Console) -> None:
    await play(LiveView(console), confer_events())
    text = screen(console)
    assert text.rindex("round 0 · answer") < text.rindex("round 1 · vote") < text.rindex("╭─ answer")


async def test_without_a_terminal_each_stage_prints_once() -> None:
    """A replay into a file or a pipe gets the finished tables once each and no live frames."""
    out = StringIO()
    await play(LiveView(Console(file=out, force_terminal=False, width=120)), confer_events())
    text = out.getvalue()
    assert "\x1b" not in text
    assert text.count("round 0 · answer") == 1
    assert text.count("round 1 · vote") == 1
    assert text.count("winner: alice") == 1
    assert "done" not in text  # the spinner line is only for the live area


async def test_answer_text_is_not_markup(console: Console) -> None:
    events = confer_events()
    finished = next(e for e in events if isinstance(e, CallFinished) and e.member == "bob")
    events[events.index(finished)] = finished.model_copy(update={"text": "[bold red]not markup[/]"})
    await play(LiveView(console), events)
    assert "[bold red]not markup[/]" in screen(console)


async def test_council_rankings_and_aggregate(console: Console) -> None:
    await play(LiveView(console), council_events())
    text = screen(console)
    assert "reviews" in text
    assert "Model B, Model A" in text
    assert "aggregate ranking" in text
    assert "1.00" in text and "2.00" in text
    assert "Pick bob's answer." in text
    assert "winner" not in text[text.rindex("╭─ answer") :]  # council has no winner to report


async def test_calls_without_a_stage_open_their_own_table(console: Console) -> None:
    events = [
        CallFinished(call_id="1", member="gpt", model="openai/gpt-4o", stage="fanout", text="hi", latency=0.5),
        StageStarted(stage="synthesis"),
        CallFailed(
            call_id="2",
            member="gpt",
            model="openai/gpt-4o",
            stage="fanout",
            kind="server",
            message="straggler",
            latency=9,
        ),
    ]
    await play(LiveView(console), events)
    text = screen(console)
    assert "fanout" in text and "synthesis" in text
    assert "straggler" not in text  # a late call from a printed stage only counts in the totals


async def test_run_failed_and_interrupted(console: Console) -> None:
    await play(LiveView(console), [StageStarted(stage="answer", round=0), RunFailed(message="no key for openai")])
    assert "Run failed: no key for openai" in screen(console)

    other = Console(file=StringIO(), force_terminal=True, width=120)
    await play(LiveView(other), [StageStarted(stage="answer", round=0, members=["alice"]), RunInterrupted()])
    text = screen(other)
    assert f"Interrupted — the run is kept as interrupted (run id {RUN_ID})" in text
    assert "waiting" in text  # the stage in progress is kept on screen


def test_render_final_without_totals_or_answer(console: Console) -> None:
    render_final(console, RunFinished(run_id="r1", final_answer=None, reached_answer=False, result={"winner": None}))
    text = screen(console)
    assert "No answer was reached." in text
    assert "run r1" in text
    assert "calls" not in text


def test_run_totals_counts_known_tokens_and_costs() -> None:
    events = confer_events(costs=True)
    totals = RunTotals.from_events(events)
    assert (totals.calls, totals.failed, totals.tokens) == (6, 1, 725)
    assert totals.cost is not None and round(totals.cost, 6) == 0.0105
    assert RunTotals.from_events(confer_events()).cost is None
