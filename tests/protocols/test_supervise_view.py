"""supervise in the live and the plain view, drawn from the events a real run emitted: the
worker × round grid of verdicts under each critique, with the critic's feedback."""

from __future__ import annotations

import re
from io import StringIO

from rich.console import Console

from panel_cli.protocols.supervise.engine import supervise
from panel_cli.view.live import LiveView
from panel_cli.view.plain import PlainView
from tests.fakes.openai_server import reply, reply_json
from tests.protocols.test_supervise_engine import APPROVED, TEAM, rejected, supervised_panel, worker
from tests.view.sample import play, screen

FEEDBACK = "Handle [bold]double[/bold] bookings."


async def recorded_run(fake_server, run_protocol, *critic):
    fake_server.script("writer-model", worker("the announcement"))
    fake_server.script("coder-model", worker("the script", fixed="the fixed script"))
    fake_server.script("boss-model", *critic)
    _, recorder = await run_protocol(supervise, supervised_panel(fake_server, TEAM, protocol="supervise"))
    return recorder.events


async def test_each_critique_shows_the_grid_so_far_and_its_feedback(fake_server, run_protocol):
    events = await recorded_run(fake_server, run_protocol, reply_json(rejected(coder=FEEDBACK)), reply_json(APPROVED))
    console = Console(file=StringIO(), force_terminal=True, width=120)
    await play(LiveView(console), events)
    text = screen(console)

    for title in ("round 1 · work", "round 1 · critique", "round 2 · correction", "round 2 · critique", "synthesis"):
        assert title in text
    round_one = re.escape(FEEDBACK)
    assert re.search(
        rf"worker +round 1 *\n─+\n writer +✓ approved *\n coder +✗ rejected *\n coder: {round_one}\n", text
    ), "round 1's critique: the grid so far, then its feedback, printed as written (never as markup)"
    assert re.search(
        r"worker +round 1 +round 2 *\n─+\n writer +✓ approved +✓ approved *\n coder +✗ rejected +✓ approved", text
    )
    assert "approved yes" in text and "corrections 1" in text and "chairman writer" in text


async def test_no_usable_verdict_reads_as_such(fake_server, run_protocol):
    events = await recorded_run(fake_server, run_protocol, reply("fine"))
    console = Console(file=StringIO(), force_terminal=True, width=120)
    await play(LiveView(console), events)
    text = screen(console)
    assert re.search(r"writer +no verdict", text)
    assert "no usable verdict: no JSON object in the reply" in text
    assert "approved no" in text


async def test_plain_lines(fake_server, run_protocol):
    events = await recorded_run(fake_server, run_protocol, reply_json(rejected(coder=FEEDBACK)), reply_json(APPROVED))
    stream = StringIO()
    await play(PlainView(stream), events)
    lines = stream.getvalue().splitlines()

    assert "[round 1] work started  writer, coder" in lines
    assert f"[round 1] verdict  boss: REJECTED  coder: {FEEDBACK}" in lines
    assert "[round 2] correction started  coder" in lines
    assert "[round 2] verdict  boss: APPROVED" in lines
    assert lines[-1].startswith("run finished  rounds 2  approved yes  corrections 1  chairman writer  calls 6")
