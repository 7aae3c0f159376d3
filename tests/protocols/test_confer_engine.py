"""confer end to end through litellm against the fake OpenAI server (docs/protocols.md#confer)."""

from __future__ import annotations

import math

import pytest

from panel_cli.protocols.confer.engine import confer
from tests.fakes.openai_server import error, hang, reply, responder
from tests.protocols.conftest import block_labels, make_panel, prompt_of, task_of, vote_json


def always(label: str, confidence: float, revised: str):
    """Answer round 0 with `<model> first answer`; vote `label` in every vote round."""

    def answer(request):
        if task_of(request) == "confer.vote":
            return vote_json(label, confidence, revised)
        return f"first answer, {len(request.model)} letters"

    return responder(answer)


async def test_converges_after_two_vote_rounds_with_exact_call_count(fake_server, run_protocol):
    names = ["ann", "bob", "cy"]
    for name in names:
        fake_server.script(f"{name}-model", always("A", 80, f"{name} revised"))
    result, events = await run_protocol(confer, make_panel(fake_server, names))
    assert result.converged is True
    assert len(result.rounds) == 2
    assert len(fake_server.requests) == 3 * (1 + 2) == events.envelope.calls
    assert result.winner == "ann"
    assert result.final_answer == "ann revised", "round 2 voted for ann's revision from round 1"
    assert result.final_answer_source == "revision"
    assert result.scores == {"A": 240.0, "B": 0.0, "C": 0.0}
    assert result.confidence_score == 240 / 300
    assert [t.winner for t in events.of("round_tallied")] == ["ann", "ann"]


async def test_stops_at_max_rounds_without_convergence(fake_server, run_protocol):
    rounds_seen: dict[str, int] = {}

    def alternate(request):
        if task_of(request) != "confer.vote":
            return "an answer"
        rounds_seen[request.model] = rounds_seen.get(request.model, 0) + 1
        label = "A" if rounds_seen[request.model] % 2 else "B"
        return vote_json(label, 60, f"{request.model} round {rounds_seen[request.model]}")

    names = ["ann", "bob"]
    for name in names:
        fake_server.script(f"{name}-model", responder(alternate))
    result, _ = await run_protocol(confer, make_panel(fake_server, names, max_rounds=3))
    assert result.converged is False
    assert [r.winner for r in result.rounds] == ["ann", "bob", "ann"]
    assert len(fake_server.requests) == 2 * (1 + 3)
    assert result.final_answer == "ann-model round 2", "the text round 3 voted for, not ann's unseen round-3 revision"
    assert result.final_answer_source == "revision"


async def test_no_convergence_runs_every_round(fake_server, run_protocol):
    for name in ["ann", "bob"]:
        fake_server.script(f"{name}-model", always("A", 80, "same"))
    result, _ = await run_protocol(
        confer, make_panel(fake_server, ["ann", "bob"], max_rounds=4, until_convergence=False)
    )
    assert len(result.rounds) == 4 and result.converged is False
    assert len(fake_server.requests) == 2 * 5


async def test_unstructured_vote_falls_back_to_own_answer_at_50(fake_server, run_protocol):
    fake_server.script("ann-model", always("B", 40, "ann revised"))
    fake_server.script(
        "bob-model",
        responder(lambda r: "I cannot produce JSON, sorry." if task_of(r) == "confer.vote" else "bob answer"),
    )
    result, events = await run_protocol(confer, make_panel(fake_server, ["ann", "bob"], max_rounds=1))
    bob_vote = next(v for v in result.rounds[0].votes if v.voter == "bob")
    assert bob_vote.chosen_label == "B" and bob_vote.confidence == 50 and bob_vote.fallback
    assert bob_vote.revised_answer == "bob answer"
    assert result.rounds[0].scores == {"A": 0.0, "B": 90.0}
    warnings = events.of("warning")
    assert len(warnings) == 1 and warnings[0].member == "bob" and "50" in warnings[0].message


async def test_a_round_of_fallbacks_cannot_converge_and_says_the_tie_rule_decided(fake_server, run_protocol):
    """A=50 B=50 C=50: the winner comes from the tie rule alone; two such rounds are not a
    stable winner, and the result warns."""
    for name in ["ann", "bob", "cy"]:
        fake_server.script(
            f"{name}-model",
            responder(lambda r, name=name: "no JSON here" if task_of(r) == "confer.vote" else f"{name} answer"),
        )
    result, events = await run_protocol(confer, make_panel(fake_server, ["ann", "bob", "cy"], max_rounds=3))

    assert [r.scores for r in result.rounds] == [{"A": 50.0, "B": 50.0, "C": 50.0}] * 3
    assert [r.signal for r in result.rounds] == [False, False, False]
    assert result.converged is False and len(result.rounds) == 3
    assert result.winner == "ann" and result.final_answer == "ann answer"
    tie_warnings = [w for w in events.of("warning") if "tie rule" in w.message]
    assert len(tie_warnings) == 3 and tie_warnings[0].member is None


async def test_warnings_do_not_repeat_the_members_name(fake_server, run_protocol):
    fake_server.script("ann-model", always("A", 80, "ann revised"))
    fake_server.script("flaky-model", responder(lambda r: "nope" if task_of(r) == "confer.vote" else "flaky answer"))
    _, events = await run_protocol(confer, make_panel(fake_server, ["ann", "flaky"], max_rounds=1))
    (warning,) = [w for w in events.of("warning") if w.member == "flaky"]
    assert warning.message.startswith("gave no usable vote")


async def test_confidence_is_clamped(fake_server, run_protocol):
    fake_server.script("ann-model", always("A", 150, "x"))
    fake_server.script("bob-model", always("A", -20, "y"))
    result, events = await run_protocol(confer, make_panel(fake_server, ["ann", "bob"], max_rounds=1))
    assert sorted(v.confidence for v in result.rounds[0].votes) == [0.0, 100.0]
    assert sorted(e.confidence for e in events.of("vote_cast")) == [0.0, 100.0]


async def test_member_failing_round_zero_has_no_label_but_votes_and_joins_next_block(fake_server, run_protocol):
    fake_server.script("ann-model", always("A", 70, "ann revised"))
    fake_server.script("bob-model", always("A", 70, "bob revised"))
    fake_server.script("cy-model", error(500, "boom"), always("A", 90, "cy revised"))
    result, events = await run_protocol(
        confer, make_panel(fake_server, ["ann", "bob", "cy"], max_rounds=2, until_convergence=False)
    )
    assert result.rounds[0].authors == {"A": "ann", "B": "bob"}
    assert {v.voter for v in result.rounds[0].votes} == {"ann", "bob", "cy"}
    assert result.rounds[1].authors == {"A": "ann", "B": "bob", "C": "cy"}
    assert result.rounds[1].block["C"] == "cy revised"
    assert [f.member for f in result.failures] == ["cy"] and result.failures[0].kind == "server"
    assert len(fake_server.requests) == 3 * 3


async def test_member_failing_a_vote_casts_nothing_and_keeps_its_answer(fake_server, run_protocol):
    fake_server.script("ann-model", always("B", 70, "ann revised"))
    fake_server.script("bob-model", reply("bob answer"), error(401, "bad key"), always("B", 70, "bob revised"))
    panel = make_panel(fake_server, ["ann", "bob"], max_rounds=2, until_convergence=False)
    result, _ = await run_protocol(confer, panel)
    assert [v.voter for v in result.rounds[0].votes] == ["ann"]
    assert result.rounds[1].block["B"] == "bob answer"
    assert result.failures[0].kind == "auth" and result.failures[0].round == 1


async def test_timed_out_member_is_recorded_and_the_round_goes_on(fake_server, run_protocol):
    fake_server.script("ann-model", always("A", 70, "ann revised"))
    fake_server.script("bob-model", hang())
    panel = make_panel(fake_server, ["ann", "bob"], max_rounds=1, timeouts={"answer": "3s", "vote": "3s"})
    result, events = await run_protocol(confer, panel)
    assert (result.final_answer, result.final_answer_source) == ("first answer, 9 letters", "answer")
    assert [f.kind for f in result.failures] == ["timeout", "timeout"]
    assert {e.kind for e in events.of("call_failed")} == {"timeout"}


async def test_vote_block_never_names_an_author(fake_server, run_protocol):
    names = ["alice", "bertrand"]
    for name in names:
        fake_server.script(f"{name}-model", always("A", 70, f"{name} says so"))
    await run_protocol(confer, make_panel(fake_server, names, max_rounds=2, until_convergence=False))
    votes = [r for r in fake_server.requests if task_of(r) == "confer.vote"]
    assert len(votes) == 4
    for request in votes:
        block = prompt_of(request).split("authors are not named.", 1)[1]
        assert block_labels(request) == ["A", "B"]
        for name in names:
            assert f"{name}-model" not in block
    round_two = [r for r in votes if "alice says so" in prompt_of(r)]
    assert round_two, "revised answers are the next round's block"


async def test_every_member_failing_reaches_no_answer(fake_server, run_protocol):
    fake_server.default(error(400, "nope"))
    result, events = await run_protocol(confer, make_panel(fake_server, ["ann", "bob"]))
    assert result.final_answer is None and result.rounds == []
    assert events.of("run_finished")[0].reached_answer is False
    assert len(fake_server.requests) == 2


async def test_tally_log_odds_lets_one_sure_voter_win_where_summed_confidence_would_not(fake_server, run_protocol):
    """ann votes its own A at 95; bob and cy vote B at 55. Summed confidence: B 110 beats A 95.
    Log-odds over the three options the panel declares: log(2 · 0.95 / 0.05) ≈ 3.64 beats
    2 · log(2 · 0.55 / 0.45) ≈ 1.79."""
    fake_server.script("ann-model", always("A", 95, "ann revised"))
    for name in ("bob", "cy"):
        fake_server.script(f"{name}-model", always("B", 55, f"{name} revised"))
    names = ["ann", "bob", "cy"]
    by_confidence, _ = await run_protocol(confer, make_panel(fake_server, names, max_rounds=1))
    assert (by_confidence.tally, by_confidence.winner, by_confidence.scores["B"]) == ("confidence", "bob", 110.0)
    panel = make_panel(fake_server, names, max_rounds=1, tally="Log_Odds", options=["x", "y", "z"])
    by_odds, events = await run_protocol(confer, panel)
    assert (by_odds.tally, by_odds.winner, by_odds.final_answer) == ("log_odds", "ann", "first answer, 9 letters")
    assert by_odds.scores["A"] == pytest.approx(math.log(38)) and by_odds.scores["C"] == 0.0
    assert by_odds.scores["B"] == pytest.approx(2 * math.log(1.1 / 0.45))
    assert events.of("round_tallied")[0].scores == by_odds.scores
