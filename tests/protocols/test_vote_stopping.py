"""vote and decide under `stop:` against the fake server (docs/protocols.md#stopping-early):
the waves asked, the calls never made, what the result and the events say, and what is refused."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from panel_cli.config import read_stop
from panel_cli.llm.budget import Budget
from panel_cli.protocols.posterior import WEIGHTS
from panel_cli.protocols.vote.engine import decide, vote
from tests.fakes.openai_server import reply
from tests.helpers import cli_json, cli_ok, cli_refused, write_panel
from tests.protocols.test_vote_engine import ballot, vote_panel

NAMES = ["ann", "bob", "cy", "dee", "eve"]


def scripted(server, choices: dict[str, str]) -> None:
    for name, choice in choices.items():
        server.script(f"{name}-model", reply(ballot(choice)))


def asked(server) -> list[str]:
    return [request.model.removesuffix("-model") for request in server.requests]


async def test_a_plurality_stops_once_the_rest_cannot_change_the_winner(fake_server, run_protocol):
    """Five voters, plurality: three are asked first; they agree, so the last two never are."""
    scripted(fake_server, {name: "PostgreSQL" for name in NAMES})
    panel = vote_panel(fake_server, NAMES, method="plurality", stop="decided")
    result, events = await run_protocol(vote, panel)

    assert sorted(asked(fake_server)) == ["ann", "bob", "cy"]
    assert result.winner == "PostgreSQL" and result.total_votes == 3
    assert events.envelope.calls == 3 and events.envelope.calls_by_status.answered == 3
    assert events.envelope.calls_by_status.cancelled == 0
    stop = result.stopping
    assert stop is not None and (stop.rule, stop.saved_calls) == ("decided", 2)
    (stage,) = stop.stages
    assert (stage.stage, stage.asked, stage.not_asked, stage.waves) == ("vote", ["ann", "bob", "cy"], ["dee", "eve"], 1)
    assert stage.reason == "PostgreSQL wins whatever the 2 members still to ask vote"
    (said,) = events.of("asking_stopped")
    assert (said.stage, said.rule, said.not_asked, said.reason) == ("vote", "decided", ["dee", "eve"], stage.reason)


async def test_a_split_first_wave_asks_only_as_many_more_as_still_matter(fake_server, run_protocol):
    """3 asked: 2 for PostgreSQL, 1 for MySQL; one more could settle it, and it does."""
    scripted(
        fake_server, {"ann": "PostgreSQL", "bob": "MySQL", "cy": "PostgreSQL", "dee": "PostgreSQL", "eve": "MySQL"}
    )
    panel = vote_panel(fake_server, NAMES, method="plurality", stop="decided")
    result, _ = await run_protocol(vote, panel)

    assert asked(fake_server)[3:] == ["dee"] and len(fake_server.requests) == 4
    assert result.winner == "PostgreSQL" and result.stopping.stages[0].waves == 2
    assert [ballot.voter for ballot in result.ballots] == ["ann", "bob", "cy", "dee"]


async def test_a_vote_asks_everyone_when_the_last_could_still_change_it(fake_server, run_protocol):
    scripted(fake_server, {"ann": "PostgreSQL", "bob": "MySQL", "cy": "SQLite", "dee": "PostgreSQL", "eve": "MySQL"})
    result, events = await run_protocol(vote, vote_panel(fake_server, NAMES, method="plurality", stop="decided"))

    assert len(fake_server.requests) == 5 and result.winner is None and result.tied == ["PostgreSQL", "MySQL"]
    assert result.stopping is not None and (result.stopping.saved_calls, result.stopping.stages) == (0, [])
    assert events.of("asking_stopped") == []


async def test_the_heaviest_weights_are_asked_first(fake_server, run_protocol):
    """weighted_plurality, eve weighing 5 and the rest 1: asked first, eve alone outweighs the
    four others whatever they vote; with 3.5, one more who agrees is needed (4.5 against 3)."""
    scripted(fake_server, {name: "SQLite" for name in NAMES})
    panel = vote_panel(fake_server, NAMES, method="weighted_plurality", member={"eve": {"weight": 5.0}}, stop="decided")
    result, _ = await run_protocol(vote, panel)
    assert asked(fake_server) == ["eve"] and result.winner == "SQLite"

    fake_server.requests.clear()
    panel = vote_panel(fake_server, NAMES, method="weighted_plurality", member={"eve": {"weight": 3.5}}, stop="decided")
    result, _ = await run_protocol(vote, panel)
    assert asked(fake_server) == ["eve", "ann"] and result.stopping.stages[0].asked == ["eve", "ann"]


async def test_confident_stops_once_the_leading_option_is_likely_enough(fake_server, run_protocol):
    """Weights log(2 · 0.9/0.1) = log 18 each over three options: one ballot gives its option
    18/20 = 0.9, two agreeing 324/326; confident(0.95) stops after the second."""
    scripted(fake_server, {name: "MySQL" for name in NAMES})
    weight = math.log(18)
    member = {name: {"weight": weight} for name in NAMES}
    panel = vote_panel(fake_server, NAMES, method="majority", member=member, stop="confident(0.95)")
    result, events = await run_protocol(vote, panel)

    assert asked(fake_server) == ["ann", "bob"]
    assert result.winner == result.final_answer == "MySQL" and result.failure_reason is None
    assert result.confidence == pytest.approx(324 / 326)
    assert result.confidence_basis == WEIGHTS
    assert result.stopping.stages[0].reason == "MySQL is right with 0.994"
    assert result.stopping.stages[0].waves == 2
    assert events.of("asking_stopped")[0].rule == "confident(0.95)"


async def test_confident_never_reached_counts_everyone_and_a_decision_asks_its_leader(fake_server, run_protocol):
    """Split ballots never reach 0.99: everyone votes, majority counts them, nothing wins,
    and the leader chooses as ever."""
    scripted(fake_server, {"bob": "MySQL", "cy": "SQLite", "dee": "PostgreSQL", "eve": "MySQL"})
    fake_server.script("ann-model", reply(ballot("PostgreSQL")), reply(ballot("SQLite")))
    member = {name: {"weight": 1.0} for name in NAMES}
    panel = vote_panel(
        fake_server, NAMES, method="majority", member=member, stop="confident(0.99)", leader="ann", protocol="decide"
    )
    result, _ = await run_protocol(decide, panel)

    assert len(fake_server.requests) == 6 and asked(fake_server)[-1] == "ann"
    assert result.leader_override and result.winner == "SQLite"
    assert result.stopping.saved_calls == 0


async def test_the_budget_ends_the_waves_and_says_so(fake_server, run_protocol):
    scripted(fake_server, {"ann": "PostgreSQL", "bob": "MySQL", "cy": "SQLite", "dee": "PostgreSQL", "eve": "MySQL"})
    panel = vote_panel(fake_server, NAMES, method="plurality", stop="decided")
    result, _ = await run_protocol(vote, panel, budget=Budget(max_calls=2))

    assert len(fake_server.requests) == 2
    assert result.stopping.stages[0].reason == "the budget ran out"
    assert result.stopping.stages[0].not_asked == ["dee", "eve"]


def test_the_rules_a_panel_may_give():
    assert [str(read_stop(text)) for text in ("decided", " Decided ", "confident(0.95)", "CONFIDENT( 95% )")] == [
        "decided",
        "decided",
        "confident(0.95)",
        "confident(0.95)",
    ]
    assert read_stop("all") is None and read_stop(None) is None
    for bad, said in [
        ("sometimes", "'sometimes' is not a stopping rule"),
        ("confident(1)", "confident takes a probability between 0 and 1"),
        ("confident(high)", "not 'high'"),
        ("confident(0.95", "is not a stopping rule"),
    ]:
        with pytest.raises(ValueError, match=said):
            read_stop(bad)


def test_confident_without_weights_is_refused_before_any_call(fake_server, tmp_path: Path):
    path = write_panel(
        tmp_path / "p.yaml", fake_server, NAMES, "protocol: vote", "options: [A, B]", "stop: confident(0.95)"
    )
    message = cli_refused("vote", str(path), "-q", "Which?")
    assert "stop: confident(0.95) needs each member's accuracy, read from its weight" in message
    assert fake_server.requests == []


def test_confer_and_ensemble_refuse_confident_and_a_bad_rule_names_the_option(fake_server, tmp_path: Path):
    path = write_panel(tmp_path / "p.yaml", fake_server, NAMES[:3], "question: Which?")
    assert "confer cannot stop at confident(0.9)" in cli_refused("confer", str(path), "--stop", "confident(0.9)")
    refused = cli_refused("ensemble", str(path), "--mode", "majority", "--stop", "confident(0.9)")
    assert "ensemble cannot stop at confident(0.9)" in refused
    assert "--stop applies to --mode majority" in cli_refused("ensemble", str(path), "--stop", "decided")
    assert cli_refused("vote", str(path), "--options", "A", "B", "--stop", "soon").startswith(
        "--stop: 'soon' is not a stopping rule"
    )
    assert fake_server.requests == []


def test_the_result_and_the_store_agree_on_the_calls_never_made(fake_server, tmp_path: Path):
    """--json's calls, the stopping record and `history show` count the same calls: the two
    never asked are in none of them."""
    for name in NAMES:
        fake_server.script(name, reply(ballot("B")))
    path = write_panel(
        tmp_path / "p.yaml", fake_server, NAMES, "protocol: vote", "options: [A, B]", "method: plurality"
    )
    db = str(tmp_path / "r.db")
    result = cli_json("vote", str(path), "-q", "Which?", "--stop", "decided", "--db", db)
    shown = cli_json("history", "show", result["run_id"], "--db", db)

    assert result["calls"] == 3 and result["stopping"]["saved_calls"] == 2
    assert shown["result"]["stopping"] == result["stopping"]
    assert len(shown["call_records"]) == shown["calls"] == shown["result"]["calls"] == 3
    assert sorted(record["member"] for record in shown["call_records"]) == ["ann", "bob", "cy"]
    assert "asking_stopped" in [event["type"] for event in shown["events"]]
    drawn = cli_ok("history", "show", result["run_id"], "--db", db)
    assert "not asked" in drawn and "stop decided: 2 calls saved" in " ".join(drawn.split())
    exported = cli_ok("history", "export", result["run_id"], "--format", "md", "--db", db)
    assert "asking stopped (decided): dee, eve not asked; B wins whatever the 2 members still to ask vote" in exported


async def test_a_decision_whose_leader_will_choose_still_hears_everyone(fake_server, run_protocol):
    """Unanimous: two who disagree settle that nothing wins, but the leader chooses from the
    counts, so the rest are asked as without a rule and the leader sees all five."""
    scripted(fake_server, {"bob": "MySQL", "cy": "SQLite", "dee": "PostgreSQL", "eve": "MySQL"})
    fake_server.script("ann-model", reply(ballot("PostgreSQL")), reply(ballot("SQLite")))
    panel = vote_panel(fake_server, NAMES, method="unanimous", stop="decided", leader="ann", protocol="decide")
    result, _ = await run_protocol(decide, panel)

    assert len(fake_server.requests) == 6 and result.total_votes == 5
    assert result.leader_override and result.stopping.saved_calls == 0
    assert "PostgreSQL 2, MySQL 2, SQLite 1" in fake_server.requests[-1].messages[-1]["content"]
