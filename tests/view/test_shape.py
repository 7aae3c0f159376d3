"""The live view keeps its shape while a run goes on: each stage's table has the same columns
and spans the same width from the frame its stage opens to the one it closes, and text
columns take the width the terminal has.

Every shipped example panel (demo personas, offline) is run through the run core, and its
events, each streamed reply growing in two steps as a terminal's run streams it, are drawn
into a console of a given width. After each event the stage in progress is rendered as Live
would draw it; no live timing is involved, and what is compared is the rendered state."""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console, RenderableType

from panel_cli.config import load_panel
from panel_cli.events import BaseEvent, CallFinished, CallTextGrew
from panel_cli.protocols.base import engine_of
from panel_cli.view.live import LiveView
from tests.protocols.conftest import run_recorded

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
EXAMPLES = ["demo", "council", "vote", "decide", "delphi", "ensemble", "orchestrate", "supervise", "tools"]
ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\r")
RULE = re.compile(r"^[─━]+$")
FIRST_HEADERS = ("member", "expert", "task")


def rendered(renderable: RenderableType, width: int) -> str:
    """What a terminal of `width` columns shows of `renderable`, without escape sequences."""
    console = Console(file=StringIO(), force_terminal=True, width=width, color_system=None)
    console.print(renderable)
    return ESCAPES.sub("", console.file.getvalue())  # type: ignore[attr-defined]


def table_shape(text: str) -> tuple[tuple[str, ...], int] | None:
    """A stage table's column headers and its width (its rule's length), from its drawing;
    None before the stage draws its table (a vote's, until the vote opens)."""
    lines = text.splitlines()
    at = next(
        (index for index, line in enumerate(lines) if line.split()[:1] and line.split()[0] in FIRST_HEADERS), None
    )
    if at is None:
        return None
    rule = lines[at + 1].strip()
    assert RULE.match(rule), lines[at : at + 2]
    return tuple(lines[at].split()), len(lines[at + 1].rstrip())


def streamed(events: list[BaseEvent]) -> list[BaseEvent]:
    """The events as a terminal's run has them: each reply grows (half, then all of it) before it finishes."""
    out: list[BaseEvent] = []
    for event in events:
        if isinstance(event, CallFinished) and event.text:
            where = event.model_dump(include={"call_id", "member", "model", "stage", "round", "about"})
            out += [
                CallTextGrew(**where, text=event.text[: len(event.text) // 2]),
                CallTextGrew(**where, text=event.text),
            ]
        out.append(event)
    return out


def stage_block(printed: str, title: str) -> str:
    """The printed table of the stage titled `title`: its title, header, rule and rows."""
    return next(block for block in printed.split("\n\n") if block.splitlines()[0].strip() == title)


async def example_events(name: str) -> list[BaseEvent]:
    panel = load_panel(CONFIGS / f"{name}.yaml")
    _, recorder = await run_recorded(engine_of(panel.protocol), panel, panel.question or "Which database?")
    return streamed(recorder.events)


async def frames(events: list[BaseEvent], width: int) -> tuple[dict[tuple[str, int | None], set], str]:
    """Each stage's shapes over the frames it was drawn in, and what the view printed."""
    console = Console(file=StringIO(), force_terminal=True, width=width, color_system=None)
    view = LiveView(console, animate=False)
    shapes: dict[tuple[str, int | None], set] = {}
    for event in events:
        await view(event)
        stage = view._stage  # the stage in progress, as Live draws it
        shape = table_shape(rendered(stage.render(), width)) if stage is not None and stage.rows else None
        if stage is not None and shape is not None:
            shapes.setdefault(stage.key, set()).add(shape)
    view.close()
    return shapes, ESCAPES.sub("", console.file.getvalue())  # type: ignore[attr-defined]


@pytest.mark.parametrize("example", EXAMPLES)
@pytest.mark.parametrize("width", [100, 160])
async def test_every_stage_keeps_its_columns_and_its_width_while_it_runs(example: str, width: int) -> None:
    shapes, printed = await frames(await example_events(example), width)

    assert shapes, "the run drew no stage table"
    for stage, seen in shapes.items():
        assert len(seen) == 1, f"{example} {stage}: the table changed shape between frames: {seen}"
        ((headers, drawn),) = seen
        assert drawn == width, f"{example} {stage}: {drawn} columns wide, not the terminal's {width}"
    finished = [table_shape(block) for block in printed.split("\n\n")]
    drawn_live = {shape for seen in shapes.values() for shape in seen}
    assert all(shape in drawn_live for shape in finished if shape is not None), (
        "a finished stage prints as its frames were drawn"
    )


async def test_the_stage_tables_columns_are_the_stages_own() -> None:
    """Each stage shows the columns of what it is, from its first frame: a review its ranking,
    a vote its vote and reason, an answer stage of members with tools its tool calls."""
    expected = {
        ("council", ("answer", None)): ("member", "status", "latency", "tokens", "answer"),
        ("council", ("review", None)): ("member", "status", "latency", "tokens", "ranking", "review"),
        ("demo", ("vote", 1)): ("member", "status", "latency", "tokens", "vote", "rationale"),
        ("vote", ("vote", None)): ("member", "status", "latency", "tokens", "vote", "reason"),
        ("tools", ("answer", None)): ("member", "status", "latency", "tokens", "tools", "answer"),
        ("tools", ("review", None)): ("member", "status", "latency", "tokens", "ranking", "review"),
    }
    for (example, stage), headers in expected.items():
        shapes, _ = await frames(await example_events(example), 200)
        assert {shape[0] for shape in shapes[stage]} == {headers}, (example, stage)


async def test_at_160_columns_an_answer_shows_as_much_as_its_column_holds() -> None:
    """Not cut at 60 characters: the answer column takes what the other columns leave."""
    _, printed = await frames(await example_events("council"), 160)
    block = stage_block(printed, "answer")
    rows = [line for line in block.splitlines()[3:] if line.strip()]
    header = block.splitlines()[1]
    starts = header.index("answer")
    assert len(rows) == 4
    # the text runs to the table's edge (one space of padding) and is cut there, not before
    assert all(len(row.rstrip()) == 159 and row.rstrip().endswith("…") for row in rows)
    assert all(len(row[starts:].rstrip()) > 100 for row in rows)


async def test_at_100_columns_a_ranked_ballot_is_one_line() -> None:
    """A ranked-choice ballot's whole ranking sits on its row's one line, beside its reason."""
    events = await example_events("vote")
    _, printed = await frames(events, 100)
    ballots = {event.voter: event for event in events if event.type == "vote_received"}
    block = stage_block(printed, "vote")
    rows = [line for line in block.splitlines()[3:] if line.strip()]
    assert len(rows) == len(ballots)
    for row in rows:
        ballot = ballots[row.split()[0]]
        if len(ballot.ranking) > 1:
            assert "→ " + " > ".join(ballot.ranking) in row
