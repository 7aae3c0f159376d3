from __future__ import annotations

from io import StringIO

from rich.console import Console

from panel_cli.events import (
    BaseEvent,
    CallFailed,
    CallFinished,
    CallStarted,
    MemberSkipped,
    RankingParsed,
    RoundTallied,
    RunFailed,
    RunFinished,
    RunInterrupted,
    RunStarted,
    StageStarted,
)
from panel_cli.view.final import render_final
from panel_cli.view.live import LiveView
from panel_cli.view.summary import ViewTotals
from tests.view.sample import RUN_ID, call, confer_events, council_events, demo_events, judge_events, play, screen


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
    assert "confidence score 57%" in final
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
    assert "alice" in text and "no reply" in text and "waiting" not in text  # kept on screen; alice never replied


def test_render_final_without_totals_or_answer(console: Console) -> None:
    render_final(console, RunFinished(run_id="r1", final_answer=None, reached_answer=False, result={"winner": None}))
    text = screen(console)
    assert "No answer was reached." in text
    assert "run r1" in text
    assert "calls" not in text


def totals_of(events: list[BaseEvent]) -> ViewTotals:
    totals = ViewTotals()
    for event in events:
        totals.update(event)
    return totals


def test_run_totals_counts_known_tokens_and_costs() -> None:
    totals = totals_of(confer_events(costs=True))
    assert (totals.calls, totals.failed, totals.tokens, totals.simulated) == (6, 1, 725, False)
    assert totals.cost is not None and round(totals.cost, 6) == 0.0105
    assert totals_of(confer_events()).cost is None


async def printed(events: list[BaseEvent], width: int = 120) -> str:
    """What a replay into a file shows: each finished stage once, without live frames."""
    console = Console(file=StringIO(), force_terminal=False, width=width)
    await play(LiveView(console), events)
    return screen(console)


def _rows(text: str, stage_title: str) -> list[str]:
    """The body lines of the table titled `stage_title`, up to the blank line after it."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == stage_title)
    body = lines[start + 3 :]  # title, header, rule
    return [line for line in body[: body.index("")] if not line.startswith("★")] if "" in body else body


async def test_each_judge_call_has_its_own_row_and_the_star_goes_to_the_winner() -> None:
    text = await printed(judge_events())
    judge_rows = [line.strip() for line in _rows(text, "judge")]
    assert len(judge_rows) == 3
    assert judge_rows[0].startswith("A alice → alice ") and "★" not in judge_rows[0]
    assert judge_rows[1].startswith("A alice → bob ★ ")
    assert judge_rows[2].startswith("A alice → carol ") and "★" not in judge_rows[2]
    assert [row.split()[-1] for row in judge_rows] == ["60}", "90}", "70}"]  # each row keeps its own call
    assert text.count("★ the chosen response") == 1
    answer_rows = _rows(text, "answer")
    assert not any("★" in row for row in answer_rows)  # the tally belongs to the judge's stage


async def test_a_call_without_about_stars_its_member() -> None:
    text = await printed(confer_events())
    vote_rows = [line.strip() for line in _rows(text, "round 1 · vote")]
    assert [row for row in vote_rows if "★" in row] == [next(row for row in vote_rows if row.startswith("A alice"))]
    assert "★ the round's winner" in text
    assert text.index("★ the round's winner") > text.index("round 1 · vote")
    assert "★" not in "\n".join(_rows(text, "round 0 · answer"))


async def test_a_second_call_of_a_member_with_no_about_gets_a_row_too() -> None:
    events = [
        StageStarted(stage="answer", members=["alice"]),
        *call("alice", "answer", None, "first", 1.0),
        CallStarted(call_id="again", member="alice", model="openai/gpt-4o", stage="answer"),
    ]
    rows = _rows(await printed(events), "answer")
    assert len(rows) == 2
    assert "answered" in rows[0] and "first" in rows[0]
    assert "waiting" in rows[1]


async def test_a_skipped_member_shows_skipped_with_its_reason_and_is_not_a_call() -> None:
    events = confer_events()
    vote_stage = next(i for i, e in enumerate(events) if isinstance(e, StageStarted) and e.stage == "vote")
    carol_vote = [e for e in events[vote_stage:] if isinstance(e, CallStarted | CallFinished) and e.member == "carol"]
    skipped = MemberSkipped(
        member="carol", model="ollama/llama3.1", stage="vote", round=1, reason="its model was not found earlier"
    )
    events = [e for e in events if e not in carol_vote]
    events.insert(vote_stage + 1, skipped)
    text = await printed(events)
    carol = next(line for line in _rows(text, "round 1 · vote") if "C carol" in line)
    assert "skipped" in carol and "its model was not found earlier" in carol
    assert "calls 5 (1 failed)" in text  # 6 calls before, minus carol's vote call, which was skipped
    assert "skipped 1 call" in text


async def test_a_truncated_reply_says_so_at_any_width() -> None:
    for width in (60, 80, 120):
        events = confer_events()
        bob = next(e for e in events if isinstance(e, CallFinished) and e.member == "bob")
        events[events.index(bob)] = bob.model_copy(update={"text": "MongoDB " * 40, "truncated": True})
        bob_row = next(line for line in _rows(await printed(events, width), "round 0 · answer") if "B bob" in line)
        assert bob_row.rstrip().endswith("(truncated)"), (width, bob_row)
        assert "Mong" in bob_row


async def test_an_empty_aggregate_ranking_says_why(console: Console) -> None:
    events = [e for e in council_events() if not (isinstance(e, RankingParsed) and e.reviewer is None)]
    events.insert(-1, RankingParsed(aggregate=[]))
    await play(LiveView(console), events)
    text = screen(console)
    assert "aggregate ranking: none (no review gave a usable ranking)" in text
    assert "avg rank" not in text


def _bar_order(text: str, names: list[str]) -> list[str]:
    lines = [line for line in text.splitlines() if "█" in line]
    return [next(name for name in names if name in line) for line in lines]


async def test_ensemble_tally_bars_read_best_first_and_confer_keeps_label_order(console: Console) -> None:
    await play(LiveView(console), judge_events())
    assert _bar_order(screen(console), ["alice", "bob", "carol"]) == ["bob", "carol", "alice"]

    other = Console(file=StringIO(), force_terminal=True, width=120)
    events = confer_events()
    tally = next(e for e in events if isinstance(e, RoundTallied))
    events[events.index(tally)] = tally.model_copy(
        update={"scores": {"A": 50, "B": 170}, "winner_label": "B", "winner": "bob"}
    )
    await play(LiveView(other), events)
    bars = [line.split()[0] for line in screen(other).splitlines() if "█" in line]
    assert bars == ["A", "B"]


async def test_a_demo_run_costs_nothing_and_says_so(console: Console) -> None:
    await play(LiveView(console), demo_events())
    text = screen(console)
    assert "cost simulated, free" in text
    assert "$" not in text


async def test_a_run_with_one_real_model_keeps_an_unknown_cost_unknown(console: Console) -> None:
    events = confer_events()
    started = events[0]
    assert isinstance(started, RunStarted)
    mixed = [started.members[0].model_copy(update={"model": "demo/sage"}), *started.members[1:]]
    events[0] = started.model_copy(update={"members": mixed})
    await play(LiveView(console), events)
    assert "cost —" in screen(console)
