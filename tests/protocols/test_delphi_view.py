"""delphi in the live and the plain view, drawn from the events a real run emitted (as a
replay of stored events would draw them)."""

from __future__ import annotations

import re
from io import StringIO

from rich.console import Console

from panel_cli.protocols.delphi.engine import delphi
from panel_cli.view.live import LiveView
from panel_cli.view.plain import PlainView
from tests.fakes.openai_server import error, responder
from tests.protocols.conftest import make_panel, task_of
from tests.protocols.test_delphi_engine import NAMES, WORDS, expert, revision
from tests.view.sample import play, screen


async def recorded_run(fake_server, run_protocol):
    """ximena fails round 1; yusuf's round 2 is not structured; all settle in round 3."""
    for name in NAMES:
        fake_server.script(f"{name}-model", expert(WORDS[name], changes_until=2))
    fake_server.script("ximena-model", error(500, "boom"), expert("alpha", changes_until=2))

    def yusuf(request):
        task = task_of(request)
        if task == "delphi.contribution" and "this is round 2 " in request.messages[-1]["content"]:
            return "[bold]beta[/bold] stays, no JSON"
        return revision("beta 2", False) if task == "delphi.contribution" else "beta 1"

    fake_server.script("yusuf-model", responder(yusuf))
    _, recorder = await run_protocol(delphi, make_panel(fake_server, NAMES, protocol="delphi", max_rounds=4))
    return recorder.events


async def test_a_table_per_round_with_changed_and_the_analysis(fake_server, run_protocol):
    events = await recorded_run(fake_server, run_protocol)
    console = Console(file=StringIO(), force_terminal=True, width=140)
    await play(LiveView(console), events)
    text = screen(console)

    for title in ("round 1 · contribution", "round 2 · contribution", "round 3 · contribution", "synthesis"):
        assert title in text
    assert "round 4" not in text
    header = next(line for line in text.splitlines() if "changed?" in line)
    assert header.split() == ["expert", "status", "changed?", "latency", "tokens", "analysis"]
    assert re.search(r"B yusuf +answered +first", text) and re.search(r"A ximena +answered +yes", text)
    assert re.search(r"A ximena +answered +no", text), "round 3: nothing changed"
    assert "first" in text and "yes (unstructured)" in text
    assert "[bold]beta[/bold] stays, no JSON" in text, "model text is never markup"
    assert "gamma 2" in text, "the analysis, not the JSON reply"
    assert '{"analysis"' not in text
    assert "server: the provider failed (500): boom" in text, "a failed expert's row says why"
    assert "2 of 3 experts contributed" in text
    assert "3 of 3 experts contributed · every one reports no change: no further round" in text
    assert "converged yes" in text and "stopped early yes" in text and "rounds 3" in text


async def test_a_narrow_terminal_keeps_expert_status_and_changed(fake_server, run_protocol):
    events = await recorded_run(fake_server, run_protocol)
    console = Console(file=StringIO(), force_terminal=True, width=40)
    await play(LiveView(console), events)
    header = next(line for line in screen(console).splitlines() if "changed?" in line)
    assert header.split()[:3] == ["expert", "status", "changed?"] and "tokens" not in header


async def test_plain_lines(fake_server, run_protocol):
    events = await recorded_run(fake_server, run_protocol)
    stream = StringIO()
    await play(PlainView(stream), events)
    lines = stream.getvalue().splitlines()

    assert "[round 1] contribution started  ximena, yusuf, zoltan" in lines
    assert "[round 1] contribution  zoltan (Expert C)  first contribution" in lines
    assert "[round 2] contribution  yusuf (Expert B)  changed (unstructured reply)" in lines
    assert "[round 3] contribution  ximena (Expert A)  unchanged" in lines
    assert "round 1 ended: 2 of 3 experts contributed" in lines
    assert "round 3 ended: 3 of 3 experts contributed, every one reports no change -> no further round" in lines
    assert any(line.startswith("warning: ximena: no contribution in round 1 (server") for line in lines)
    assert lines[-1].startswith("run finished  converged yes  rounds 3  chairman ximena  stopped early yes")
