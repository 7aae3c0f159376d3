"""How a council is drawn once its rankings are in: each member named beside its label (in the
live view's tables and the plain view's lines), and the bias figures said in words.

The events are a real council's (the shipped demo panel, offline, through the run core)."""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path

from rich.console import Console

from panel_cli.config import load_panel
from panel_cli.events import BaseEvent, RankingParsed, RunFinished
from panel_cli.protocols.council.engine import council
from panel_cli.view.live import LiveView
from panel_cli.view.plain import PlainView
from panel_cli.view.summary import bias_note
from tests.protocols.conftest import run_recorded

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\r")


async def council_events() -> list[BaseEvent]:
    panel = load_panel(CONFIGS / "council.yaml")
    _, recorder = await run_recorded(council, panel, "Which database for a billing service?")
    return recorder.events


def aggregate_of(events: list[BaseEvent]) -> list[dict]:
    return next(event.aggregate for event in events if isinstance(event, RankingParsed) and event.reviewer is None)


async def drawn(events: list[BaseEvent], width: int = 140) -> str:
    console = Console(file=StringIO(), force_terminal=True, width=width, color_system=None)
    view = LiveView(console, animate=False)
    for event in events:
        await view(event)
    view.close()
    return ESCAPES.sub("", console.file.getvalue())  # type: ignore[attr-defined]


def stage_rows(text: str, title: str) -> list[str]:
    block = next(block for block in text.split("\n\n") if block.splitlines()[0].strip() == title)
    return [line for line in block.splitlines()[3:] if line.strip()]


async def test_the_review_table_names_each_member_beside_its_label() -> None:
    """Once the aggregate is in, a reviewer's row reads `B skeptic`, and its ranking `D, B, …`
    of those same letters, so who ranked whom reads off the table."""
    events = await council_events()
    text = await drawn(events)
    letters = {entry["name"]: entry["label"].removeprefix("Model ") for entry in aggregate_of(events)}
    assert sorted(letters.values()) == ["A", "B", "C", "D"]

    reviews = stage_rows(text, "review")
    rankings = {
        event.reviewer: event.ranking for event in events if isinstance(event, RankingParsed) and event.reviewer
    }
    for name, letter in letters.items():
        row = next(row for row in reviews if f" {letter} {name} " in row)
        assert ", ".join(entry.removeprefix("Model ") for entry in rankings[name]) in row
    (chair,) = stage_rows(text, "synthesis")
    assert chair.split()[:2] == [letters["sage"], "sage"], "the label stays named in the stages after"


async def test_the_plain_view_names_the_labels_once_the_rankings_are_in() -> None:
    events = await council_events()
    stream = StringIO()
    view = PlainView(stream)
    for event in events:
        await view(event)
    lines = stream.getvalue().splitlines()
    aggregate = aggregate_of(events)

    named = ", ".join(f"{entry['label']} = {entry['name']}" for entry in sorted(aggregate, key=lambda e: e["label"]))
    at = lines.index(f"labels: {named}")
    assert all(index < at for index, line in enumerate(lines) if line.startswith("ranking  "))
    assert lines[at + 1].startswith(f"aggregate ranking: 1. {aggregate[0]['name']} ({aggregate[0]['label']}, avg ")


async def test_the_bias_figures_are_said_in_words_live_and_plain() -> None:
    events = await council_events()
    finished = next(event for event in events if isinstance(event, RunFinished))
    note = bias_note(finished.result)
    assert note is not None and note.startswith("bias: in ")
    stream = StringIO()
    view = PlainView(stream)
    for event in events:
        await view(event)
    assert note in stream.getvalue().splitlines()
    assert note in " ".join((await drawn(events, width=400)).split())
    assert not re.search(r"\b(own|shown) first \d+%", stream.getvalue()), "no bare percentages left"


def test_bias_note_wording() -> None:
    bias = {"own_first": 2, "own_reviews": 4, "shown_first": 0, "ranked_reviews": 4}
    result = {"bias": bias, "successful_responses": 4, "self_review": True}
    assert bias_note(result) == (
        "bias: in 2 of 4 reviews the reviewer ranked its own answer first (chance alone: 1 in 4); "
        "in 0 of 4 reviews the answer shown first was ranked first (chance alone: 1 in 4)"
    )
    # a reviewer that does not review its own answer is shown one fewer, and cannot favour its own
    no_self = {"bias": {**bias, "own_first": 0, "own_reviews": 0, "shown_first": 1}, "successful_responses": 4}
    assert bias_note({**no_self, "self_review": False}) == (
        "bias: in 1 of 4 reviews the answer shown first was ranked first (chance alone: 1 in 3)"
    )
    assert bias_note({"bias": {**bias, "own_reviews": 0, "ranked_reviews": 0}, "successful_responses": 4}) is None
    assert bias_note({"winner": "alice"}) is None
