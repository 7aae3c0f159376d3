"""How a run that stopped asking early, and an answer's confidence, are drawn: the live view's
rows say `not asked`, the plain view and the exports say why, and the summary gives the
confidence (or why there is none) and the calls saved."""

from __future__ import annotations

from io import StringIO

from panel_cli.events import RunFinished
from panel_cli.protocols.vote.engine import vote
from panel_cli.view.live import LiveView
from panel_cli.view.plain import PlainView
from panel_cli.view.summary import summary_fields
from tests.fakes.openai_server import reply
from tests.protocols.test_vote_engine import ballot, vote_panel
from tests.protocols.test_vote_view import play, screen, terminal

NAMES = ["ann", "bob", "cy", "dee", "eve"]


async def stopped_events(fake_server, run_protocol, **fields):
    for name in NAMES:
        fake_server.script(f"{name}-model", reply(ballot("MySQL")))
    _, recorder = await run_protocol(vote, vote_panel(fake_server, NAMES, method="plurality", stop="decided", **fields))
    return recorder.events


async def test_the_live_view_marks_the_members_never_asked(fake_server, run_protocol):
    console = terminal()
    await play(LiveView(console), await stopped_events(fake_server, run_protocol))
    text = screen(console)

    rows = [line for line in text.splitlines() if line.strip().startswith(("│ dee", "│ eve", "dee", "eve"))]
    assert rows and all("not asked" in row for row in rows)
    assert "MySQL wins whatever the 2 members still to ask vote" in text
    assert "stop decided: 2 calls saved (MySQL wins whatever the 2 members still to ask vote)" in text


async def test_the_plain_view_says_who_was_not_asked_and_why(fake_server, run_protocol):
    stream = StringIO()
    await play(PlainView(stream), await stopped_events(fake_server, run_protocol))
    lines = stream.getvalue().splitlines()

    assert (
        "[vote] asking stopped (decided): dee, eve not asked; MySQL wins whatever the 2 members still to ask vote"
        in lines
    )
    finished = next(line for line in lines if line.startswith("run finished"))
    assert "  confidence none (plurality counts every member alike" in finished
    assert "  stop decided: 2 calls saved (" in finished and "  calls 3  " in finished


def test_the_summary_gives_the_probability_and_keeps_confer_s_score_apart():
    confer = RunFinished(
        final_answer="x",
        result={"winner": "ann", "confidence_score": 0.57, "confidence": 0.912, "confidence_basis": "b"},
    )
    fields = dict(summary_fields(confer, None))
    assert fields["confidence score"] == "57%" and fields["confidence"] == "0.912 (b)"
    council = RunFinished(final_answer="x", result={"confidence": None, "confidence_basis": "why not"})
    assert dict(summary_fields(council, None))["confidence"] == "none (why not)"
    unanswered = RunFinished(final_answer=None, result={"confidence": None, "confidence_basis": "no answer"})
    assert "confidence" not in dict(summary_fields(unanswered, None))
