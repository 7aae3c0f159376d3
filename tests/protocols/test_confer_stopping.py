"""confer under `stop: decided`, and confer that converges on what matters
(docs/protocols.md#confer, #stopping-early): the pure rules by hand, then the engine against
the fake server."""

from __future__ import annotations

import math

import pytest

from panel_cli.config import Panel
from panel_cli.protocols.confer.engine import confer
from panel_cli.protocols.confer.stopping import (
    ONE_ANSWER,
    answer_key,
    leading_key,
    next_answerers,
    next_votes,
    vote_settled,
)
from panel_cli.protocols.posterior import STATED
from tests.fakes.openai_server import responder
from tests.protocols.conftest import block_labels, fenced_texts, task_of, vote_json

OPTIONS = ["alpha", "bravo", "charlie", "delta"]
NAMES = ["ann", "bob", "cy", "dee", "eve"]


def test_an_answer_is_the_option_it_names_else_its_text():
    assert answer_key("Bravo.\n\nBecause it is.", OPTIONS) == "bravo"
    assert answer_key("alpha or bravo, hard to say", OPTIONS) == "alpha or bravo, hard to say"
    assert answer_key("  Use  PostgreSQL\n", []) == "use postgresql"


def test_the_answers_settle_once_no_answers_left_could_change_the_leader():
    """Five members, a plurality of answers, a tie to the answer given first."""
    assert next_answerers([], 5, OPTIONS).size == 3
    assert next_answerers(["alpha", "alpha", "alpha"], 2, OPTIONS).size == 0
    # 2–1: one more for alpha settles it (3 against at most 1 + 1), so one is asked.
    assert next_answerers(["alpha", "bravo", "alpha"], 2, OPTIONS).size == 1
    # 2–2 after four, the tie goes to alpha, given first: the last could make bravo win.
    assert next_answerers(["alpha", "bravo", "alpha", "bravo"], 1, OPTIONS).size == 1
    # A failed answer counts for nothing: alpha's two settle it against two still to come (a tie
    # would go to alpha, given first).
    assert next_answerers(["alpha", None, "alpha"], 2, OPTIONS).size == 0
    assert next_answerers(["alpha", None, "bravo"], 2, OPTIONS).size == 1  # one more alpha: a tie at worst
    found = next_answerers(["alpha", "alpha", "alpha"], 2, OPTIONS)
    assert found.reason == "alpha leads whatever the 2 still to answer give"
    # Free text: the members still to answer could all give one answer nobody gave yet.
    assert next_answerers(["x", "x"], 3, []).size == 1
    assert next_answerers(["x", "x", "x"], 2, []).size == 0


def test_the_leading_answer_is_the_most_given_then_the_first():
    assert leading_key(["b", "a", "a", "b"]) == "b"
    assert leading_key([None, "a"]) == "a" and leading_key([None]) is None


def test_a_vote_round_is_settled_when_no_vote_left_could_overturn_its_winner():
    """Each vote left may weigh up to 100 (a confidence), for any label."""
    labels = ["A", "B", "C"]
    assert vote_settled({"A": 240.0, "B": 0.0, "C": 0.0}, labels, 2, 100.0)
    assert not vote_settled({"A": 160.0, "B": 0.0, "C": 0.0}, labels, 2, 100.0)
    # B catching up exactly ties A, and a tie goes to the lower label: A keeps it, B would not.
    assert vote_settled({"A": 200.0, "B": 0.0, "C": 0.0}, labels, 2, 100.0)
    assert not vote_settled({"A": 0.0, "B": 200.0, "C": 0.0}, labels, 2, 100.0)
    assert next_votes({}, labels, False, 5, "confidence", 3).size == 3
    assert next_votes({"A": 240.0, "B": 0.0, "C": 0.0}, labels, True, 2, "confidence", 3).size == 0
    # Under votes a vote weighs one: two votes in hand settle a round of four that
    # summed confidence (160 against up to 200) leaves open.
    assert next_votes({"A": 2.0, "B": 0.0, "C": 0.0}, labels, True, 2, "votes", 3).size == 0
    assert next_votes({"A": 160.0, "B": 0.0, "C": 0.0}, labels, True, 2, "confidence", 3).size == 1
    assert next_votes({}, labels, False, 4, "votes", 3).size == 2
    # Under log_odds a vote weighs at most log(99 (K − 1)).
    most = math.log(99 * 2)
    assert vote_settled({"A": 2 * most + 0.1, "B": 0.0, "C": 0.0}, labels, 2, most)


def oracle_replies(beliefs: dict[str, str], confidence: float = 80.0, moves: dict[str, str] | None = None):
    """Each member answers its belief and votes for the first answer shown that gives it (or,
    for a member in `moves`, the answer it moves to), revising its answer to that one."""

    def answer(request) -> str:
        voter = request.model.removesuffix("-model")
        if task_of(request) != "confer.vote":
            return f"{beliefs[voter].capitalize()}\n\nmy reasons"
        shown = fenced_texts(request, "Answer")
        held = (moves or {}).get(voter, beliefs[voter])
        label = next(label for label, text in shown.items() if answer_key(text, OPTIONS) == held)
        return vote_json(label, confidence, shown[label])

    return responder(answer)


def jury(server, **fields) -> Panel:
    members = [{"name": name, "model": f"openai/{name}-model", "api_base": server.url} for name in NAMES]
    fields.setdefault("options", OPTIONS)
    return Panel.model_validate({"name": "j", "protocol": "confer", "members": members, **fields})


async def test_a_round_that_moves_no_answer_ends_the_rounds(fake_server, run_protocol):
    """Five answers, one vote round: nobody moved, so the next round would repeat it."""
    beliefs = dict(zip(NAMES, ["alpha", "bravo", "alpha", "charlie", "alpha"], strict=True))
    fake_server.default(oracle_replies(beliefs))
    result, events = await run_protocol(confer, jury(fake_server))

    assert len(fake_server.requests) == 10 and len(result.rounds) == 1
    assert result.converged and result.winner == "ann" and result.final_answer.startswith("Alpha")
    assert result.stopping is None


async def test_a_round_that_moves_an_answer_is_followed_by_another(fake_server, run_protocol):
    """bob answers bravo but moves to alpha in round 1; round 2 shows the moved answer, moves
    nobody, and ends the rounds."""
    beliefs = dict(zip(NAMES, ["alpha", "bravo", "alpha", "charlie", "alpha"], strict=True))
    fake_server.default(oracle_replies(beliefs, moves={"bob": "alpha"}))
    result, _ = await run_protocol(confer, jury(fake_server))

    assert len(result.rounds) == 2 and result.converged and len(fake_server.requests) == 15
    assert answer_key(result.rounds[1].block["B"], OPTIONS) == "alpha"


@pytest.mark.parametrize(("tally", "votes", "not_voting"), [("votes", 2, ["dee", "bob"]), ("confidence", 3, ["bob"])])
async def test_a_vote_round_under_votes_is_settled_by_fewer_votes(fake_server, run_protocol, tally, votes, not_voting):
    """Four answer (alpha, bravo, alpha, alpha: the last could not change the leader). Those
    holding alpha vote first; under `votes` two votes for A settle it (B could reach a tie at
    most, and a tie goes to A), under summed confidence 160 could still lose to 200."""
    beliefs = dict(zip(NAMES, ["alpha", "bravo", "alpha", "alpha", "charlie"], strict=True))
    fake_server.default(oracle_replies(beliefs))
    result, _ = await run_protocol(confer, jury(fake_server, stop="decided", tally=tally))

    assert len(fake_server.requests) == 4 + votes
    assert result.winner == "ann" and result.final_answer.startswith("Alpha") and result.tally == tally
    assert result.scores["A"] == votes * (1.0 if tally == "votes" else 80.0)
    vote_stage = next(stage for stage in result.stopping.stages if stage.stage == "vote")
    assert vote_stage.not_asked == not_voting


async def test_decided_asks_for_answers_in_waves_and_skips_a_vote_on_one_answer(fake_server, run_protocol):
    """The first three answer alpha: no answer the last two give could change the leader, and
    with one answer given there is nothing to vote on."""
    fake_server.default(oracle_replies(dict.fromkeys(NAMES, "alpha")))
    result, events = await run_protocol(confer, jury(fake_server, stop="decided", tally="log_odds"))

    assert sorted(request.model for request in fake_server.requests) == ["ann-model", "bob-model", "cy-model"]
    assert result.final_answer.startswith("Alpha") and result.winner == "ann" and result.converged
    assert result.rounds == [] and result.final_answer_source == "answer"
    assert result.confidence is None and ONE_ANSWER in result.confidence_basis
    stop = result.stopping
    assert stop.saved_calls == 2 + 3
    assert [(stage.stage, stage.round, stage.not_asked) for stage in stop.stages] == [
        ("answer", 0, ["dee", "eve"]),
        ("vote", 1, ["ann", "bob", "cy"]),
    ]
    assert [event.stage for event in events.of("asking_stopped")] == ["answer", "vote"]


async def test_decided_votes_among_those_who_answered_leaders_first(fake_server, run_protocol):
    """Answers alpha, bravo, alpha, then alpha settles it (dee); eve is never asked. In the vote
    the alpha answerers vote first and settle the round at 3 × 80 against 100 still to come."""
    beliefs = dict(zip(NAMES, ["alpha", "bravo", "alpha", "alpha", "bravo"], strict=True))
    fake_server.default(oracle_replies(beliefs))
    result, _ = await run_protocol(confer, jury(fake_server, stop="decided"))

    answers = [r.model for r in fake_server.requests if task_of(r) == "answer"]
    votes = [r.model for r in fake_server.requests if task_of(r) == "confer.vote"]
    assert sorted(answers) == ["ann-model", "bob-model", "cy-model", "dee-model"]
    assert sorted(votes) == ["ann-model", "cy-model", "dee-model"]
    assert block_labels(next(r for r in fake_server.requests if task_of(r) == "confer.vote")) == ["A", "B", "C", "D"]
    assert result.winner == "ann" and len(result.rounds) == 1 and result.converged
    assert [vote.voter for vote in result.rounds[0].votes] == ["ann", "cy", "dee"]
    assert result.stopping.saved_calls == 1 + 1  # eve's answer, bob's vote (eve, never asked, never votes)


async def test_confer_reports_its_answers_probability_under_log_odds(fake_server, run_protocol):
    """Votes alpha, alpha, bravo at 80 over four options: alpha's posterior is
    e^(2w) / (e^(2w) + e^w + 2), w = log(3 · 0.8/0.2)."""
    beliefs = dict(zip(NAMES[:3], ["alpha", "alpha", "bravo"], strict=True))
    fake_server.default(oracle_replies(beliefs))
    members = NAMES[:3]
    panel = jury(fake_server, tally="log_odds").with_members(members)
    result, _ = await run_protocol(confer, panel)

    w = math.log(12)
    assert result.confidence == pytest.approx(math.exp(2 * w) / (math.exp(2 * w) + math.exp(w) + 2))
    assert result.confidence_basis == STATED
    by_sum, _ = await run_protocol(confer, jury(fake_server).with_members(members))
    assert by_sum.confidence is None and "tally: confidence" in by_sum.confidence_basis
    assert by_sum.confidence_score == pytest.approx(160 / 300)
