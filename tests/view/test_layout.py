"""A stage's table on a narrow terminal: columns give way by priority, and the member and
its status always stay whole."""

from __future__ import annotations

from io import StringIO

import pytest
from rich.console import Console
from rich.text import Text

from panel_cli.events import (
    BaseEvent,
    CallFailed,
    CallFinished,
    MemberInfo,
    RankingParsed,
    RunFinished,
    RunStarted,
    StageStarted,
    WarningRaised,
)
from panel_cli.view.live import LiveView
from panel_cli.view.tables import Column, fit_columns
from tests.view.sample import play, screen

COUNCIL = [
    MemberInfo(name="security-architect", model="openai/gpt-4o", label="A"),
    MemberInfo(name="claude", model="anthropic/claude-sonnet-4-5", label="B"),
    MemberInfo(name="llama-local", model="ollama/llama3.1", label="C"),
]
NAMES = [member.name for member in COUNCIL]
STATUSES = {"security-architect": "answered", "claude": "timed out", "llama-local": "answered"}


def _answer(name: str, stage: str, text: str) -> BaseEvent:
    if STATUSES[name] == "timed out" and stage == "answer":
        return CallFailed(
            call_id=f"{stage}-{name}",
            member=name,
            model="m",
            stage=stage,
            kind="timeout",
            message="no reply within 300.0s",
            latency=300.0,
        )
    return CallFinished(
        call_id=f"{stage}-{name}",
        member=name,
        model="m",
        stage=stage,
        text=text,
        tokens_in=1200,
        tokens_out=640,
        latency=12.5,
    )


def council_run() -> list[BaseEvent]:
    events: list[BaseEvent] = [
        RunStarted(protocol="council", panel="auth", question="How should we architect auth?", members=COUNCIL),
        StageStarted(stage="answer", members=NAMES),
        *(_answer(name, "answer", "Use OAuth 2.1 with PKCE and short-lived tokens; " * 4) for name in NAMES),
        StageStarted(stage="review", members=NAMES),
    ]
    for name in NAMES:
        events.append(_answer(name, "review", "Model A is the most complete. FINAL RANKING: Model A, Model B"))
        events.append(RankingParsed(reviewer=name, ranking=["Model A", "Model C"]))
    events += [
        RankingParsed(
            aggregate=[
                {"name": "security-architect", "label": "Model A", "average_rank": 1.0, "count": 3},
                {"name": "llama-local", "label": "Model C", "average_rank": 2.0, "count": 3},
            ]
        ),
        WarningRaised(message="ranked Model Z, which is not an answer it was shown", member="claude"),
        StageStarted(stage="synthesis", members=["security-architect"]),
        _answer("security-architect", "synthesis", "Adopt OAuth 2.1."),
        RunFinished(final_answer="Adopt OAuth 2.1.", result={"top_ranked": "security-architect"}),
    ]
    return events


def _table_rows(text: str, title: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index(next(line for line in lines if line.strip() == title))
    body = lines[start + 3 :]
    return body[: body.index("")]


@pytest.mark.parametrize("width", [60, 80])
async def test_a_council_table_stays_readable(width: int) -> None:
    console = Console(file=StringIO(), force_terminal=False, width=width)
    await play(LiveView(console), council_run())
    text = screen(console)

    assert all(len(line) <= width for line in text.splitlines())
    for stage in ("answer", "review"):
        rows = [row for row in _table_rows(text, stage) if row.strip()]
        members = [row for row in rows if row.split()[0] in {"A", "B", "C"}]
        assert len(members) == 3, rows
        for member, row in zip(COUNCIL, members, strict=True):
            assert f"{member.label} {member.name} " in row
            status = STATUSES[member.name] if stage == "answer" else "answered"
            assert f" {status} " in row
    review = "\n".join(_table_rows(text, "review"))
    assert "Model A," in review and "Model C" in review  # the ranking wraps rather than disappears


async def test_wide_enough_shows_every_column() -> None:
    console = Console(file=StringIO(), force_terminal=False, width=140)
    await play(LiveView(console), council_run())
    header = next(line for line in screen(console).splitlines() if line.split()[:2] == ["member", "status"])
    assert header.split() == ["member", "status", "latency", "tokens", "answer"]


async def test_at_60_columns_the_least_needed_columns_go_first() -> None:
    console = Console(file=StringIO(), force_terminal=False, width=60)
    await play(LiveView(console), council_run())
    headers = [line.split() for line in screen(console).splitlines() if line.split()[:2] == ["member", "status"]]
    assert headers[0] == ["member", "status", "answer"]  # tokens, then latency, give way to the answer
    assert headers[1] == ["member", "status", "ranking"]  # and the review's text to the ranking


def column(header: str, keep: int, width: int, shrink_to: int | None = None, fill: bool = False) -> Column:
    """A column whose one cell is `width` wide, as wide as it asked for before it came."""
    return Column(header, [Text("x" * width)], keep=keep, floor=0 if fill else width, shrink_to=shrink_to, fill=fill)


def test_fit_columns_drops_a_column_before_a_more_needed_one_is_cut() -> None:
    name, status = column("member", 0, 10), column("status", 0, 9)
    ranking, preview, tokens = (
        column("ranking", 3, 30, shrink_to=10),
        column("answer", 4, 60, shrink_to=12, fill=True),
        column("tokens", 6, 5),
    )
    columns = [name, status, tokens, ranking, preview]

    # wide: every column at its natural width, and the rest of the line to the text
    wide = fit_columns(columns, 200)
    assert [(c.header, w) for c, w in wide] == [
        ("member", 10),
        ("status", 9),
        ("tokens", 6),
        ("ranking", 30),
        ("answer", 131),
    ]
    assert sum(w for _, w in wide) + 2 * 5 + 4 == 200, "the table spans the width"
    # at 60: tokens go, then the text, before the ranking is cut
    assert [(c.header, w) for c, w in fit_columns(columns, 60)] == [("member", 10), ("status", 9), ("ranking", 30)]
    # at 50: nothing else may go, so the ranking is cut down to fit
    assert [(c.header, w) for c, w in fit_columns(columns, 50)] == [("member", 10), ("status", 9), ("ranking", 23)]
    # at 30: not even the ranking at its least fits; the member and status stay whole
    assert [(c.header, w) for c, w in fit_columns(columns, 30)] == [("member", 10), ("status", 9)]


def test_a_text_column_takes_the_width_it_is_given_whatever_its_cells() -> None:
    """An empty text column (every call still waiting) spans what the others leave, as a full one does."""
    name, status = column("member", 0, 10), column("status", 0, 9)
    for text in (0, 5, 500):
        answer = column("answer", 4, text, shrink_to=12, fill=True)
        assert fit_columns([name, status, answer], 100)[2][1] == 100 - 10 - 9 - 2 * 3 - 2


def test_which_columns_show_is_decided_before_the_cells_arrive() -> None:
    """A ranking longer than the ranking column asked for takes width from the text, never a
    column's place: the columns are the same with the cells empty or full."""
    name, status, latency = column("member", 0, 10), column("status", 0, 9), column("latency", 5, 7)
    empty = Column("ranking", [Text("")], keep=3, floor=10, shrink_to=10)
    full = Column("ranking", [Text("x" * 16)], keep=3, floor=10, shrink_to=10)
    answer = column("answer", 4, 0, shrink_to=20, fill=True)
    before = fit_columns([name, status, latency, empty, answer], 80)
    after = fit_columns([name, status, latency, full, answer], 80)
    assert (
        [c.header for c, _ in before]
        == [c.header for c, _ in after]
        == [
            "member",
            "status",
            "latency",
            "ranking",
            "answer",
        ]
    )
    assert [w for _, w in before] == [10, 9, 7, 10, 30] and [w for _, w in after] == [10, 9, 7, 16, 24]
