"""The live area draws the stage in progress row by row (view/frame.py): each row's line as
Rich's table draws it, only the rows that fit the terminal, and one line for the rest.

Frames are rendered in-process from the view's state, as Live's tick would render them; no
timing is involved."""

from __future__ import annotations

from io import StringIO
from types import SimpleNamespace

import pytest
from rich.console import Console
from rich.segment import Segment
from rich.style import Style

from panel_cli.events import (
    BaseEvent,
    CallFailed,
    CallFinished,
    CallStarted,
    CallTextGrew,
    MemberInfo,
    RunStarted,
    StageStarted,
)
from panel_cli.view.confer import vote_round
from panel_cli.view.frame import Frame, more_line, visible
from panel_cli.view.live import LiveView, redraws_per_second
from panel_cli.view.tables import CallRow, StageState
from tests.view.sample import screen
from tests.view.test_shape import EXAMPLES, example_events


def lines_of(segments: list[Segment]) -> list[list[Segment]]:
    """Lines of segments, each merged where neighbours share a style (a style of None is
    the plain style), so two drawings that look alike compare equal."""
    return [
        list(Segment.simplify(Segment(segment.text, segment.style or Style()) for segment in line))
        for line in Segment.split_lines(segments)
    ]


def drawn(stage: StageState, console: Console, height: int | None = None, frame: Frame | None = None) -> list:
    return lines_of((frame or Frame()).render(stage, console, console.options.update(height=height)))


def full(stage: StageState, console: Console) -> list:
    return lines_of([*console.render(stage.render(), console.options)])


def terminal(width: int, height: int = 200) -> Console:
    return Console(file=StringIO(), force_terminal=True, width=width, height=height, color_system="truecolor")


def varied_stage(votes: bool) -> StageState:
    """Rows of every kind a table shows: labels, wide characters being written (for 12 s so
    far), a cut reply, a failure, a fallback vote, the winner's star."""
    stage = vote_round("vote", 1, None) if votes else StageState("answer", 0)
    stage.clock = lambda: 1012.5
    for index in range(5):
        stage.announce(f"member-{index}", "B" if index == 2 else None)
    writing, answered, failed, voted, plain = stage.rows
    writing.started = 1000.0
    writing.grow("héllo wörld 日本語 " * 30)
    plain.grow("plain words being written " * 30)
    answered.status, answered.latency, answered.tokens, answered.truncated = "answered", 12.5, 123_456, True
    answered.preview = "a reply cut at its limit " * 10
    failed.status, failed.preview = "failed", "timeout: deadline 5s passed"
    voted.status = "answered"
    voted.vote = SimpleNamespace(choice="B", confidence=80, fallback=True, rationale="because " * 40)  # type: ignore[assignment]
    stage.tally = SimpleNamespace(  # type: ignore[assignment]
        winner="member-3", winner_label="B", scores={"B": 80.0}, authors={"B": "member-3"}, round=1
    )
    return stage


@pytest.mark.parametrize("votes", [False, True])
@pytest.mark.parametrize("width", [60, 100, 160])
def test_a_stage_that_fits_is_drawn_as_its_full_table(votes: bool, width: int) -> None:
    console = terminal(width)
    stage = varied_stage(votes)
    assert drawn(stage, console, height=200) == full(stage, console)


@pytest.mark.parametrize("example", EXAMPLES)
async def test_every_example_frame_is_the_stage_as_rich_draws_it(example: str) -> None:
    """Each shipped example, after each event: the live area's stage (all of it fits) is the
    stage's own rendering, segment for segment, through one frame kept across the events."""
    console = terminal(120)
    view = LiveView(console, animate=False)
    frame, compared = Frame(), 0
    for event in await example_events(example):
        await view(event)
        frame.changed()
        stage = view._stage  # the stage in progress, as Live draws it
        if stage is not None:
            assert drawn(stage, console, height=500, frame=frame) == full(stage, console), event.type
            compared += 1
    view.close()
    assert compared


def members(count: int) -> list[str]:
    return [f"m{index}" for index in range(count)]


def started(name: str) -> CallStarted:
    return CallStarted(call_id=f"{name}-0", member=name, model="openai/m", stage="answer", round=0)


def stage_events(count: int) -> list[BaseEvent]:
    """A 64-member answer stage part way: 30 answered, 5 failed, 20 writing, 9 still waiting."""
    names = members(count)
    events: list[BaseEvent] = [
        RunStarted(
            protocol="confer", panel="p", question="Q?", members=[MemberInfo(name=n, model="openai/m") for n in names]
        ),
        StageStarted(stage="answer", round=0, members=names),
    ]
    events += [started(name) for name in names]
    where = {"model": "openai/m", "stage": "answer", "round": 0}
    for name in names[:30]:
        events.append(CallFinished(call_id=f"{name}-0", member=name, text=f"{name} answered", latency=1.0, **where))
    for name in names[30:35]:
        events.append(CallFailed(call_id=f"{name}-0", member=name, kind="server", message="boom", latency=1.0, **where))
    for name in names[35:55]:
        events.append(CallTextGrew(call_id=f"{name}-0", member=name, text=f"{name} is writing", **where))
    return events


async def test_a_big_stage_on_a_short_terminal_shows_what_fits_and_sums_up_the_rest() -> None:
    console = terminal(100, height=30)
    view = LiveView(console)
    for event in stage_events(64):
        await view(event)
    stage = view._stage  # the stage in progress, as Live draws it
    assert stage is not None
    lines = ["".join(segment.text for segment in line).rstrip() for line in drawn(stage, console, height=29)]

    assert len(lines) == 29  # the terminal's 30 lines less the spinner's
    rows = lines[3:-1]
    assert len(rows) == 25
    assert all("writing" in row for row in rows[:20])  # those being written first,
    assert all("waiting" in row for row in rows[20:])  # then those waiting
    assert lines[-1] == " + 39 more: 4 waiting, 30 answered, 5 failed"
    shown = [row.split()[0] for row in rows]
    assert shown == sorted(shown, key=lambda name: int(name[1:]))  # in the table's order

    view.close()  # the stage ends: its full table is printed, every row in it, as Rich draws it
    alone = terminal(100)
    alone.print(stage.render())
    assert screen(alone).count("\n") == 64 + 3
    assert screen(alone) in screen(console)


def test_all_rows_are_drawn_when_they_fit() -> None:
    rows = [CallRow(name) for name in members(10)]
    assert visible(rows, {}, 10) == ({id(row) for row in rows}, [])
    assert visible(rows, {}, None) == ({id(row) for row in rows}, [])


def test_rows_left_out_are_the_ones_finished_longest_ago() -> None:
    rows = [CallRow(name, status="answered") for name in members(6)]
    rows[4].status = "writing"
    changed = {id(row): tick for tick, row in enumerate(rows)}  # the later rows changed last
    shown, hidden = visible(rows, changed, 4)

    assert shown == {id(rows[4]), id(rows[5]), id(rows[3])}
    assert hidden == [rows[0], rows[1], rows[2]]
    assert more_line(hidden) == "+ 3 more: 3 answered"


def test_a_rows_line_is_drawn_again_when_its_text_grows() -> None:
    console = terminal(80)
    stage = StageState("answer", 0)
    stage.announce("alice", None)
    frame = Frame()
    stage.rows[0].grow("the first words")
    before = drawn(stage, console, height=40, frame=frame)
    frame.changed()
    stage.rows[0].grow("the first words and then some more")
    after = drawn(stage, console, height=40, frame=frame)

    assert before != after
    assert "and then some more" in "".join(segment.text for segment in after[-1])
    assert after == full(stage, console)


def test_a_panel_of_more_than_32_members_redraws_half_as_often() -> None:
    assert redraws_per_second(8, 32) == 8
    assert redraws_per_second(8, 33) == 4


async def test_the_live_area_of_a_64_member_run_redraws_4_times_a_second() -> None:
    view = LiveView(terminal(100, height=30))
    for event in stage_events(64)[:2]:
        await view(event)
    assert view._live is not None and view._live.refresh_per_second == 4  # the area Live draws
    view.close()
