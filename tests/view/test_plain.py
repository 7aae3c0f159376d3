from __future__ import annotations

from io import StringIO

from panel_cli.view.plain import PlainView
from tests.view.sample import FINAL_ANSWER, RUN_ID, confer_events, council_events, play


async def test_one_plain_line_per_event() -> None:
    stream = StringIO()
    events = await play(PlainView(stream), confer_events())
    lines = stream.getvalue().splitlines()

    assert len(lines) == len(events)
    assert lines[0] == f"run started  confer  auth  members: alice, bob, carol  run {RUN_ID}"
    assert "[round 0] answer started  alice, bob, carol" in lines
    assert "[round 0] call finished  bob  0.87s  145 tok" in lines
    assert "[round 0] call failed  carol  timeout: deadline 5s passed" in lines
    assert "[round 1] vote  alice -> A (90)" in lines
    assert "[round 1] vote  bob -> B (50, fallback: kept own answer)" in lines
    assert "round 1 tallied: A=170 B=50 -> A (alice)" in lines
    assert "warning: bob: no structured vote; kept its own answer at 50" in lines
    assert lines[-1].startswith(
        "run finished  winner alice  confidence 57%  converged no  rounds 1  calls 6 (1 failed)"
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
    stream = StringIO()
    await play(PlainView(stream), council_events())
    lines = stream.getvalue().splitlines()
    assert "ranking  alice: Model B, Model A" in lines
    assert "aggregate ranking: 1. bob (avg 1.00), 2. alice (avg 2.00)" in lines
