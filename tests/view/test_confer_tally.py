"""A confer round's tally with more members than letters: labels in the order they were given
(A…Z, AA, AB…), and only the labels with votes, the rest counted on one line."""

from __future__ import annotations

from io import StringIO

from rich.console import Console

from panel_cli.events import MemberInfo, RoundTallied, RunStarted, StageStarted, VoteCast
from panel_cli.protocols.base import labels_for
from panel_cli.view import fmt
from panel_cli.view.confer import voted_labels
from panel_cli.view.live import LiveView
from panel_cli.view.plain import PlainView
from tests.helpers import terminal_screen
from tests.view.sample import play

LABELS = labels_for(64)
NAMES = [f"m{index:02d}" for index in range(64)]


def round_events() -> list:
    """64 members; round 1's votes go to C (two of them, the winner) and AB (one)."""
    votes = {"m00": "AB", "m01": "C", "m02": "C"}
    scores = dict.fromkeys(LABELS, 0.0) | {"C": 160.0, "AB": 70.0}
    return [
        RunStarted(
            protocol="confer",
            panel="wide",
            question="Q?",
            members=[
                MemberInfo(name=name, model="openai/m", label=label) for name, label in zip(NAMES, LABELS, strict=True)
            ],
        ),
        StageStarted(stage="vote", round=1, members=NAMES),
        *(VoteCast(round=1, voter=voter, choice=choice, confidence=80.0) for voter, choice in votes.items()),
        RoundTallied(
            round=1,
            scores=scores,
            winner_label="C",
            winner="m02",
            authors=dict(zip(LABELS, NAMES, strict=True)),
        ),
    ]


def test_labels_sort_as_they_were_given():
    order = [
        label for label, _ in fmt.tally_order(dict.fromkeys(["AA", "B", "A", "AB", "Z", "BA"], 1.0), best_first=False)
    ]
    assert order == ["A", "B", "Z", "AA", "AB", "BA"]
    best = fmt.tally_order({"AA": 5.0, "B": 5.0, "C": 9.0}, best_first=True)
    assert [label for label, _ in best] == ["C", "B", "AA"], "a tie goes in label order"


def test_only_the_labels_with_votes_and_the_winner_are_listed():
    scores = dict.fromkeys(LABELS, 0.0) | {"AB": 70.0, "C": 160.0}
    assert voted_labels(scores, {"AB", "C"}, "C") == ([("C", 160.0), ("AB", 70.0)], 62)
    # A winner no vote went to (every vote a fallback elsewhere) is still listed.
    assert voted_labels(scores, {"AB"}, "A") == ([("A", 0.0), ("AB", 70.0)], 62)
    assert voted_labels({"A": 0.0, "B": 0.0}, set(), None) == ([], 2)


async def test_the_live_tally_lists_the_labels_with_votes_in_label_order():
    console = Console(file=StringIO(), force_terminal=True, width=140, height=200)
    await play(LiveView(console, animate=False), round_events())
    screen = terminal_screen(console.file.getvalue())  # type: ignore[attr-defined]
    start = screen.index("★ the round's winner") + 1
    assert [line.split() for line in screen[start:] if line] == [
        ["C", "m02", "█" * 24, "160", "winner:", "m02"],
        ["AB", "m27", "█" * 10, "70"],
        ["+", "62", "with", "no", "votes"],
    ]


async def test_the_plain_tally_lists_the_labels_with_votes_in_label_order():
    out = StringIO()
    await play(PlainView(out), round_events())
    assert "round 1 tallied: C=160 AB=70 + 62 with no votes -> C (m02)" in out.getvalue().splitlines()
