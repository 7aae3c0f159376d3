"""vote and decide end to end through litellm against the fake OpenAI server (docs/protocols.md#vote-and-decide)."""

from __future__ import annotations

import json
from typing import Any

from panel_cli.config import Panel
from panel_cli.events import EventBus
from panel_cli.llm.gateway import Gateway
from panel_cli.protocols.vote.engine import decide, vote
from panel_cli.protocols.vote.tally import retally, stored_vote
from panel_cli.runs.execute import run_engine
from panel_cli.store.reader import TranscriptReader
from panel_cli.store.subscriber import TranscriptStore
from tests.fakes.openai_server import FakeOpenAIServer, after, error, hang, reply, responder
from tests.protocols.conftest import prompt_of, task_of

DB = ["PostgreSQL", "MySQL", "SQLite"]


def ballot(choice: Any, ranking: list[str] | None = None, confidence: Any = 80, reason: str = "because") -> str:
    return json.dumps({"choice": choice, "ranking": ranking or [choice], "confidence": confidence, "reason": reason})


def vote_panel(
    server: FakeOpenAIServer, names: list[str], *, member: dict[str, dict[str, Any]] | None = None, **fields: Any
) -> Panel:
    """A panel of fake-server members voting on DB; `member` adds fields to named members."""
    members = [
        {"name": name, "model": f"openai/{name}-model", "api_base": server.url, **(member or {}).get(name, {})}
        for name in names
    ]
    fields.setdefault("options", DB)
    fields.setdefault("defaults", {"retries": 0})
    return Panel.model_validate({"name": "t", "protocol": "vote", "members": members, **fields})


async def test_structured_ballots_counted_by_majority(fake_server, run_protocol):
    fake_server.script("ann-model", reply(ballot("PostgreSQL", ["PostgreSQL", "SQLite", "MySQL"], 90, "mature")))
    fake_server.script("bob-model", reply(ballot("postgresql", confidence=150)))
    fake_server.script("cy-model", reply(ballot("MySQL", confidence="sure")))
    result, events = await run_protocol(vote, vote_panel(fake_server, ["ann", "bob", "cy"]))

    assert result.final_answer == result.winner == "PostgreSQL"
    assert result.vote_counts == {"PostgreSQL": 2, "MySQL": 1, "SQLite": 0}
    assert (result.method, result.quorum_met, result.total_votes, result.winner_votes, result.abstained) == (
        "majority",
        True,
        3,
        2,
        [],
    )
    assert [(b.voter, b.choice, b.ranking, b.confidence, b.matched_by) for b in result.ballots] == [
        ("ann", "PostgreSQL", ["PostgreSQL", "SQLite", "MySQL"], 90.0, "structured"),
        ("bob", "PostgreSQL", ["PostgreSQL"], 100.0, "structured"),
        ("cy", "MySQL", ["MySQL"], None, "structured"),
    ]
    assert result.rounds is None
    kinds = [
        event.type
        for event in events.events
        if event.type in ("vote_opened", "vote_received", "quorum_reached", "vote_tallied", "run_finished")
    ]
    assert kinds == [
        "vote_opened",
        "vote_received",
        "vote_received",
        "vote_received",
        "quorum_reached",
        "vote_tallied",
        "run_finished",
    ]
    (quorum,) = events.of("quorum_reached")
    assert (quorum.current, quorum.required) == (3, 1)
    assert events.of("vote_tallied")[0].tally["winner"] == "PostgreSQL"
    assert events.envelope.calls == 3
    for request in fake_server.requests:
        assert task_of(request) == "ballot"
        assert "Options:\n- PostgreSQL\n- MySQL\n- SQLite\n" in prompt_of(request)


async def test_text_ballots_are_matched_longest_option_first(fake_server, run_protocol):
    options = ["Ship", "Do not ship", "Wait"]
    fake_server.script("ann-model", reply("Honestly: do not ship this week."))
    fake_server.script("bob-model", reply("Ship it."))
    fake_server.script("cy-model", reply("Shipping now would be a mistake; I have no view."))
    result, events = await run_protocol(vote, vote_panel(fake_server, ["ann", "bob", "cy"], options=options))

    assert [(b.voter, b.choice, b.matched_by) for b in result.ballots] == [
        ("ann", "Do not ship", "text"),
        ("bob", "Ship", "text"),
        ("cy", None, "none"),
    ]
    assert result.abstained == ["cy"] and result.total_votes == 2 and result.ballots_cast == 3
    assert (
        result.winner is None
        and result.failure_reason
        == "Ship and Do not ship tie with 1 vote each, so none has more than half; --method plurality --tie-break first, or a leader in panel decide, settles a tie"
    )
    assert ("cy", "named no option; recorded as an abstention") in [(w.member, w.message) for w in events.of("warning")]
    assert events.of("run_finished")[0].reached_answer is False


async def test_no_match_first_keeps_the_seeds_behaviour(fake_server, run_protocol):
    fake_server.default(reply("No strong view."))
    result, _ = await run_protocol(vote, vote_panel(fake_server, ["ann", "bob"], no_match="first"))
    assert result.winner == "PostgreSQL" and [b.matched_by for b in result.ballots] == ["first", "first"]


async def test_a_voter_timing_out_on_its_own_limit_casts_no_ballot(fake_server, run_protocol):
    fake_server.default(reply(ballot("MySQL")))
    fake_server.script("cy-model", hang())
    panel = vote_panel(fake_server, ["ann", "bob", "cy"], member={"cy": {"timeout": "0.3s"}}, timeouts={"vote": "30s"})
    result, events = await run_protocol(vote, panel)

    assert [(f.voter, f.kind) for f in result.failed] == [("cy", "timeout")]
    assert [b.voter for b in result.ballots] == ["ann", "bob"] and result.late == []
    assert result.winner == "MySQL" and result.ballots_cast == 2
    assert sorted(e.voter for e in events.of("vote_received")) == ["ann", "bob"]  # in the order replies came


async def test_a_late_ballot_is_recorded_as_late_and_not_counted(fake_server, run_protocol):
    fake_server.default(reply(ballot("MySQL")))
    fake_server.script("cy-model", reply(ballot("SQLite"), latency=30))
    fake_server.script("dee-model", hang())
    panel = vote_panel(fake_server, ["ann", "bob", "cy", "dee"], timeouts={"vote": "3s"}, quorum=3)
    result, events = await run_protocol(vote, panel)

    assert result.late == ["cy", "dee"] and result.failed == []
    late = [b for b in result.ballots if b.late]
    assert [(b.voter, b.choice, b.reason) for b in late] == [
        ("cy", None, "no ballot before collection closed (3s)"),
        ("dee", None, "no ballot before collection closed (3s)"),
    ]
    assert result.vote_counts == {"PostgreSQL": 0, "MySQL": 2, "SQLite": 0} and result.ballots_cast == 2
    assert result.winner is None and result.failure_reason == "quorum not met: 2 ballots arrived, 3 needed"
    assert not events.of("quorum_reached")
    assert {(e.voter, e.late) for e in events.of("vote_received")} == {
        ("ann", False),
        ("bob", False),
        ("cy", True),
        ("dee", True),
    }
    assert "cast no ballot before collection closed (3s); recorded as late, not counted" in [
        w.message for w in events.of("warning") if w.member == "cy"
    ]


async def test_a_failing_voter_casts_no_ballot(fake_server, run_protocol):
    fake_server.default(reply(ballot("SQLite")))
    fake_server.script("bob-model", error(500, "boom"))
    fake_server.script("cy-model", error(401, "bad key"))
    result, _ = await run_protocol(vote, vote_panel(fake_server, ["ann", "bob", "cy"]))
    assert [(f.voter, f.kind) for f in result.failed] == [("bob", "server"), ("cy", "auth")]
    assert result.winner == "SQLite" and result.total_votes == 1 and result.late == []


async def test_no_more_voters_than_max_voters_are_asked_at_once(fake_server, run_protocol):
    # Replies wait until two voters have been asked at once; a third would show too.
    fake_server.default(after(lambda: fake_server.max_in_flight >= 2, responder(lambda _request: ballot("MySQL"))))
    result, _ = await run_protocol(vote, vote_panel(fake_server, ["a", "b", "c", "d", "e"], max_voters=2))
    assert result.total_votes == 5 and fake_server.max_in_flight == 2


async def test_ranked_choice_runs_a_real_runoff(fake_server, run_protocol):
    """First preferences: PostgreSQL 2, MySQL 2, SQLite 1 of 5. SQLite goes; its ballot's next
    choice is MySQL, which then has 3 of 5."""
    fake_server.script("a-model", reply(ballot("PostgreSQL", ["PostgreSQL", "SQLite"])))
    fake_server.script("b-model", reply(ballot("PostgreSQL", ["PostgreSQL", "MySQL"])))
    fake_server.script("c-model", reply(ballot("MySQL", ["MySQL"])))
    fake_server.script("d-model", reply(ballot("MySQL", ["MySQL", "PostgreSQL"])))
    fake_server.script("e-model", reply(ballot("SQLite", ["SQLite", "MySQL", "PostgreSQL"])))
    result, _ = await run_protocol(vote, vote_panel(fake_server, ["a", "b", "c", "d", "e"], method="ranked_choice"))

    assert result.vote_counts == {"PostgreSQL": 2, "MySQL": 2, "SQLite": 1}
    assert [(r.counts, r.eliminated, r.transfers, r.winner) for r in result.rounds] == [
        ({"PostgreSQL": 2, "MySQL": 2, "SQLite": 1}, "SQLite", {"MySQL": 1}, None),
        ({"PostgreSQL": 2, "MySQL": 3}, None, {}, "MySQL"),
    ]
    assert result.winner == "MySQL" and result.winner_votes == 3


async def test_weighted_uses_each_members_weight(fake_server, run_protocol):
    fake_server.default(reply(ballot("MySQL")))
    fake_server.script("boss-model", reply(ballot("SQLite")))
    panel = vote_panel(fake_server, ["a", "b", "boss"], member={"boss": {"weight": 3}}, method="weighted")
    result, events = await run_protocol(vote, panel)
    assert result.weights == {"PostgreSQL": 0.0, "MySQL": 2.0, "SQLite": 3.0} and result.winner == "SQLite"
    assert events.of("vote_opened")[0].weights == {"a": 1.0, "b": 1.0, "boss": 3.0}


# decide ---------------------------------------------------------------------------------------


def decide_panel(server: FakeOpenAIServer, **fields: Any) -> Panel:
    return vote_panel(server, ["lead", "bob", "cy"], protocol="decide", leader="lead", **fields)


def leader_reply(choice: str) -> Any:
    """Votes PostgreSQL as a voter; as the leader (its prompt says so), chooses `choice`."""
    return responder(
        lambda request: (
            ballot(choice, reason="my call") if "You lead the panel" in prompt_of(request) else ballot("PostgreSQL")
        )
    )


async def test_the_leader_chooses_when_no_option_wins(fake_server, run_protocol):
    fake_server.script("lead-model", leader_reply("SQLite"))
    fake_server.script("bob-model", reply(ballot("MySQL", reason="SECRET-REASON")))
    fake_server.script("cy-model", reply(ballot("SQLite")))
    result, events = await run_protocol(decide, decide_panel(fake_server))

    assert (result.winner, result.final_answer, result.leader_override, result.consensus_reached) == (
        "SQLite",
        "SQLite",
        True,
        False,
    )
    assert result.vote_counts == {"PostgreSQL": 1, "MySQL": 1, "SQLite": 1} and result.leader == "lead"
    assert result.leader_ballot.choice == "SQLite" and result.failure_reason is None
    leader_prompt = prompt_of(fake_server.requests_for("lead-model")[-1])
    assert (
        "PostgreSQL, MySQL and SQLite tie with 1 vote each, so none has more than half" in leader_prompt
        and "--tie-break" not in leader_prompt
    )
    assert "SECRET-REASON" not in leader_prompt, "the leader sees counts, never another voter's words"
    assert [e.stage for e in events.of("stage_started")] == ["vote", "leader"]
    (chose,) = events.of("leader_chose")
    assert (chose.leader, chose.choice, chose.matched_by) == ("lead", "SQLite", "structured")
    (decision,) = events.of("decision_recorded")
    assert (decision.winner, decision.leader_override, decision.consensus_reached, decision.method) == (
        "SQLite",
        True,
        False,
        "majority",
    )
    assert decision.topic == "What is best?" and decision.total_votes == 3


async def test_a_decision_tallies_with_the_declared_method(fake_server, run_protocol):
    """Seed 001 counts ranked choice as majority; here the runoff decides and no leader is asked."""
    fake_server.script("lead-model", reply(ballot("PostgreSQL", ["PostgreSQL", "MySQL"])))
    fake_server.script("bob-model", reply(ballot("MySQL", ["MySQL", "PostgreSQL"])))
    fake_server.script("cy-model", reply(ballot("SQLite", ["SQLite", "MySQL"])))
    result, events = await run_protocol(decide, decide_panel(fake_server, method="ranked_choice"))
    assert result.winner == "MySQL" and result.consensus_reached and not result.leader_override
    assert not events.of("leader_chose") and len(fake_server.requests) == 3


async def test_a_leader_that_fails_leaves_no_decision(fake_server, run_protocol):
    fake_server.script("lead-model", reply(ballot("PostgreSQL")), error(500, "down"))
    fake_server.script("bob-model", reply(ballot("MySQL")))
    fake_server.script("cy-model", reply(ballot("SQLite")))
    result, events = await run_protocol(decide, decide_panel(fake_server))
    assert result.winner is None and not result.leader_override and not result.consensus_reached
    assert result.failure_reason == (
        "PostgreSQL, MySQL and SQLite tie with 1 vote each, so none has more than half;"
        " the leader lead could not choose: server: the provider failed (500): down"
    )
    assert events.of("leader_chose")[0].error is not None
    assert events.of("decision_recorded")[0].winner is None


async def test_a_retally_reads_the_stored_ballots_with_no_call(fake_server, tmp_path):
    """A decision stored as it ran is recounted from the store alone: the server sees no new request."""
    fake_server.script("lead-model", leader_reply("SQLite"))
    fake_server.script("bob-model", reply(ballot("MySQL", ["MySQL", "PostgreSQL"])))
    fake_server.script("cy-model", reply(ballot("SQLite", ["SQLite", "MySQL"])))
    path = tmp_path / "runs.db"
    store = await TranscriptStore.open(path)
    bus = EventBus("run-decide-1", [store])
    gateway = Gateway(bus.emit, defaults=decide_panel(fake_server).defaults)
    try:
        await run_engine(decide, decide_panel(fake_server), "Which database?", gateway, bus)
    finally:
        await gateway.aclose()
        await store.close()
    asked = len(fake_server.requests)

    with TranscriptReader.open(path) as reader:
        (decision,) = reader.list_decisions()
        stored = stored_vote(reader.run_events("run-decide-1"))
    assert (decision.run_id, decision.topic, decision.winner, decision.leader_override) == (
        "run-decide-1",
        "Which database?",
        "SQLite",
        True,
    )
    assert decision.vote_counts == {"PostgreSQL": 1, "MySQL": 1, "SQLite": 1}
    assert stored is not None and sorted(b.voter for b in stored.ballots) == [
        "bob",
        "cy",
        "lead",
    ]  # in the order they came in
    recount = retally(stored, method="ranked_choice")
    assert recount.winner == "MySQL" and not recount.leader_override  # SQLite goes, its ballot to MySQL
    assert (retally(stored).winner, retally(stored).leader_override) == ("SQLite", True)
    assert len(fake_server.requests) == asked


# plurality and its tie rules ------------------------------------------------------------------


async def test_plurality_wins_without_a_majority_and_says_so_in_its_events(fake_server, run_protocol):
    fake_server.script("ann-model", reply(ballot("MySQL")))
    fake_server.script("bob-model", reply(ballot("MySQL")))
    fake_server.script("cy-model", reply(ballot("SQLite")))
    fake_server.script("dee-model", reply(ballot("PostgreSQL")))
    fake_server.script("eve-model", reply(ballot("nothing of the kind")))
    panel = vote_panel(fake_server, ["ann", "bob", "cy", "dee", "eve"], method="PLURALITY")
    result, events = await run_protocol(vote, panel)
    assert (result.method, result.winner, result.winner_votes, result.total_votes) == ("plurality", "MySQL", 2, 4)
    assert (result.tie_break, result.tied) == ("none", [])
    (opened,) = events.of("vote_opened")
    assert (opened.method, opened.tie_break) == ("plurality", "none")
    tallied = events.of("vote_tallied")[0].tally
    assert (tallied["method"], tallied["winner"], tallied["tie_break"], tallied["tied"]) == (
        "plurality",
        "MySQL",
        "none",
        [],
    )


async def test_a_plurality_tie_in_a_vote_is_no_winner_unless_tie_break_first(fake_server, run_protocol):
    fake_server.default(reply(ballot("SQLite")))
    fake_server.script("ann-model", reply(ballot("MySQL")))
    names = ["ann", "bob"]
    tied, events = await run_protocol(vote, vote_panel(fake_server, names, method="plurality"))
    assert (tied.winner, tied.tied, tied.final_answer) == (None, ["MySQL", "SQLite"], None)
    assert tied.failure_reason == "MySQL and SQLite tie with 1 vote each"
    assert events.of("vote_tallied")[0].tally["reason"] == tied.failure_reason
    first, _ = await run_protocol(vote, vote_panel(fake_server, names, method="plurality", tie_break="First"))
    assert (first.winner, first.tied, first.tie_break, first.failure_reason) == (
        "MySQL",
        ["MySQL", "SQLite"],
        "first",
        None,
    )


async def test_weighted_plurality_gives_the_most_weight_the_win(fake_server, run_protocol):
    fake_server.default(reply(ballot("MySQL")))
    fake_server.script("boss-model", reply(ballot("SQLite")))
    fake_server.script("cy-model", reply(ballot("PostgreSQL")))
    panel = vote_panel(
        fake_server, ["a", "b", "boss", "cy"], member={"boss": {"weight": 2.5}}, method="weighted_plurality"
    )
    result, _ = await run_protocol(vote, panel)
    assert result.weights == {"PostgreSQL": 1.0, "MySQL": 2.0, "SQLite": 2.5} and result.winner == "SQLite"


async def test_a_decisions_leader_settles_a_plurality_tie_by_default(fake_server, run_protocol):
    fake_server.script("lead-model", leader_reply("SQLite"))  # votes PostgreSQL, then chooses SQLite
    fake_server.script("bob-model", reply(ballot("MySQL")))
    fake_server.script("cy-model", reply(ballot("PostgreSQL")))
    fake_server.script("dee-model", reply(ballot("MySQL")))
    panel = vote_panel(fake_server, ["lead", "bob", "cy", "dee"], protocol="decide", leader="lead", method="plurality")
    result, events = await run_protocol(decide, panel)
    assert (result.tie_break, result.tied, result.winner_votes) == ("leader", ["PostgreSQL", "MySQL"], 0)
    assert (result.winner, result.leader_override, result.consensus_reached) == ("SQLite", True, False)
    assert "PostgreSQL and MySQL tie with 2 votes each" in prompt_of(fake_server.requests_for("lead-model")[-1])
    assert events.of("vote_opened")[0].tie_break == "leader"


async def test_tie_break_none_leaves_a_decisions_tie_undecided_without_asking_the_leader(fake_server, run_protocol):
    fake_server.script("lead-model", reply(ballot("MySQL")))
    fake_server.script("bob-model", reply(ballot("SQLite")))
    panel = vote_panel(
        fake_server, ["lead", "bob"], protocol="decide", leader="lead", method="plurality", tie_break="none"
    )
    result, events = await run_protocol(decide, panel)
    assert result.winner is None and not events.of("leader_chose") and len(fake_server.requests) == 2
    assert result.failure_reason == (
        "MySQL and SQLite tie with 1 vote each; tie_break none leaves a tie undecided, so the leader lead was not asked"
    )


def test_tie_break_warnings_for_rules_that_cannot_use_it():
    from panel_cli.protocols.checks import check_panel

    panel = Panel.model_validate(
        {"members": [{"name": "a", "model": "demo/sage"}], "options": DB, "tie_break": "first", "method": "majority"}
    )
    assert check_panel(panel, "vote") == [
        "tie_break: used only by methods plurality and weighted_plurality, not majority."
    ]
    led = panel.model_copy(update={"method": "plurality", "tie_break": "leader"})
    assert check_panel(led, "vote") == [
        "tie_break: a vote has no leader, so a tie is no winner; use first to settle it by the options' order."
    ]
    assert check_panel(led, "decide") == [
        "tie_break: this decision names no leader, so a tie is no winner; use first to settle it by the options' order."
    ]
    assert check_panel(led.model_copy(update={"leader": "a"}), "decide") == []
