"""How a vote is drawn, live and as plain lines, from the events of real runs against the fake server."""

from __future__ import annotations

from io import StringIO

from rich.console import Console

from panel_cli.events import BaseEvent, parse_event
from panel_cli.protocols.vote.engine import decide, vote
from panel_cli.view.live import LiveView
from panel_cli.view.plain import PlainView
from tests.fakes.openai_server import reply
from tests.helpers import terminal_screen
from tests.protocols.test_vote_engine import ballot, decide_panel, leader_reply, vote_panel


def terminal() -> Console:
    return Console(file=StringIO(), force_terminal=True, width=160, color_system=None)


async def play(view: LiveView | PlainView, events: list[BaseEvent]) -> None:
    for event in events:
        await view(event)
    view.close()


def screen(console: Console) -> str:
    return console.file.getvalue()  # type: ignore[attr-defined]


async def runoff_events(fake_server, run_protocol) -> list[BaseEvent]:
    fake_server.script("a-model", reply(ballot("PostgreSQL", ["PostgreSQL", "SQLite"], 90, "mature and boring")))
    fake_server.script("b-model", reply(ballot("PostgreSQL", ["PostgreSQL", "MySQL"])))
    fake_server.script("c-model", reply("MySQL, because the team knows it."))
    fake_server.script("d-model", reply(ballot("MySQL", ["MySQL", "PostgreSQL"])))
    fake_server.script("e-model", reply(ballot("SQLite", ["SQLite", "MySQL", "PostgreSQL"])))
    _, recorder = await run_protocol(vote, vote_panel(fake_server, ["a", "b", "c", "d", "e"], method="ranked_choice"))
    return recorder.events


async def test_the_live_view_draws_ballots_tally_quorum_rounds_and_winner(fake_server, run_protocol):
    console = terminal()
    await play(LiveView(console), await runoff_events(fake_server, run_protocol))
    text = screen(console)

    assert "→ PostgreSQL > SQLite 90" in text and "mature and boring" in text  # a ranked ballot's whole ranking
    assert "→ MySQL (from text)" in text
    assert "ranked choice · quorum 1 · 5 voters · collection closes after 30s" in text
    assert "quorum reached: 5 ballots, 1 needed" in text
    assert "instant runoff" in text
    assert "round 1: PostgreSQL 2 · MySQL 2 · SQLite 1 — SQLite dropped; its ballots: 1 → MySQL" in text
    assert "round 2: PostgreSQL 2 · MySQL 3 — MySQL wins with 3 of 5 live ballots" in text
    assert "winner: MySQL — 3 of 5 votes, ranked choice" in text
    assert "winner MySQL" in text and "method ranked_choice" in text and "quorum met" in text


async def test_the_running_tally_and_quorum_line_while_ballots_arrive(fake_server, run_protocol):
    events = await runoff_events(fake_server, run_protocol)
    view = LiveView(terminal())
    received = 0
    for event in events:
        await view(event)
        received += event.type == "vote_received"
        if received == 2:
            break
    board = view._stage.render()  # the stage in progress, as Live draws it
    console = Console(file=StringIO(), width=160, color_system=None)
    console.print(board)
    text = screen(console)
    view.close()
    assert "quorum 1: 2 ballots so far" in text
    assert "winner" not in text
    bars = {line.split()[0]: line.split()[-1] for line in text.splitlines() if "█" in line}
    assert sum(int(count) for count in bars.values()) == 2


async def test_a_vote_without_a_winner_says_exactly_why(fake_server, run_protocol):
    fake_server.default(reply(ballot("MySQL")))
    fake_server.script("b-model", reply("[bold]no idea[/bold]"))
    _, recorder = await run_protocol(
        vote, vote_panel(fake_server, ["a", "b"], quorum=3, options=["MySQL", "[red]Evil[/red]"])
    )
    console = terminal()
    await play(LiveView(console), recorder.events)
    text = screen(console)
    assert "quorum not met: 2 ballots arrived, 3 needed" in text
    assert "no winner: quorum not met: 2 ballots arrived, 3 needed" in text
    assert "abstained: b" in text and "[red]Evil[/red]" in text and "[bold]no idea[/bold]" in text


async def test_the_leader_override_is_drawn(fake_server, run_protocol):
    fake_server.script("lead-model", leader_reply("SQLite"))
    fake_server.script("bob-model", reply(ballot("MySQL")))
    fake_server.script("cy-model", reply(ballot("SQLite")))
    _, recorder = await run_protocol(decide, decide_panel(fake_server))
    console = terminal()
    await play(LiveView(console), recorder.events)
    text = screen(console)
    assert "no winner: PostgreSQL, MySQL and SQLite tie with 1 vote each, so none has more than half" in text
    assert "leader lead chose SQLite — the leader's choice decides (leader override)" in text
    assert "leader override lead" in text


async def test_a_replay_from_stored_events_draws_the_same(fake_server, run_protocol):
    events = await runoff_events(fake_server, run_protocol)
    live, replayed = terminal(), terminal()
    await play(LiveView(live), events)
    await play(LiveView(replayed), [parse_event(event.model_dump(mode="json")) for event in events])
    # What each terminal shows at the end; the bytes differ with how often Live's clock redrew.
    assert terminal_screen(screen(live)) == terminal_screen(screen(replayed))


async def test_plain_lines(fake_server, run_protocol):
    stream = StringIO()
    await play(PlainView(stream), await runoff_events(fake_server, run_protocol))
    lines = stream.getvalue().splitlines()
    assert (
        "vote opened  ranked choice · quorum 1 · 5 voters · collection closes after 30s  options: PostgreSQL, MySQL, SQLite"
        in lines
    )
    assert "ballot  a -> PostgreSQL (90)  ranking PostgreSQL > SQLite  mature and boring" in lines
    assert "ballot  c -> MySQL (from text)  MySQL, because the team knows it." in lines
    assert "quorum reached: 5 ballots, 1 needed" in lines
    assert "tally (ranked_choice): PostgreSQL=2 MySQL=2 SQLite=1" in lines
    assert "  runoff round 1: PostgreSQL 2 · MySQL 2 · SQLite 1 — SQLite dropped; its ballots: 1 → MySQL" in lines
    assert "winner: MySQL — 3 of 5 votes, ranked choice" in lines
    assert any(
        line.startswith("run finished  winner MySQL  rounds 2  method ranked_choice  votes 3 of 5  quorum met")
        for line in lines
    )


async def test_plain_lines_for_late_ballots_and_decisions(fake_server, run_protocol):
    fake_server.script("lead-model", leader_reply("SQLite"))
    fake_server.script("bob-model", reply(ballot("MySQL")))
    fake_server.script("cy-model", reply(ballot("SQLite"), latency=30))
    _, recorder = await run_protocol(decide, decide_panel(fake_server, timeouts={"vote": "3s"}))
    stream = StringIO()
    await play(PlainView(stream), recorder.events)
    lines = stream.getvalue().splitlines()
    assert "ballot  cy  late, not counted: no ballot before collection closed (3s)" in lines
    assert "leader lead chose SQLite — the leader's choice decides (leader override)" in lines
    assert "decision recorded: SQLite (leader override)" in lines
