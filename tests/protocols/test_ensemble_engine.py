"""ensemble end to end through litellm against the fake OpenAI server (docs/protocols.md#ensemble), and its
choosing arithmetic by hand."""

from __future__ import annotations

import json

import pytest

from panel_cli.errors import UserError
from panel_cli.protocols.ensemble.engine import (
    distinct_words,
    ensemble,
    highest,
    jaccard,
    parse_scorer,
    plan_ensemble,
    resemblance_counts,
)
from tests.fakes.openai_server import RecordedRequest, error, hang, reply, responder
from tests.helpers import eventually
from tests.protocols.conftest import make_panel, prompt_of, task_of


def by_task(answer: str, **others: str):
    """Answer the question with `answer`; answer a task marker `name` with `others[name]`."""
    return responder(lambda request: others.get(task_of(request), answer))


async def wait_for_closed(server, models: set[str]) -> None:
    """The server notices a closed connection on its own thread; give it the moment it needs."""
    await eventually(lambda: models <= set(server.closed_early), f"the server to see {sorted(models)} hang up")


def test_words_are_case_folded_and_distinct():
    assert distinct_words("The cat, the CAT and the hat.") == {"the", "cat", "and", "hat"}


def test_jaccard_by_hand():
    assert jaccard({"a", "b", "c"}, {"a", "b", "d"}) == 2 / 4
    assert jaccard({"a", "b", "c"}, {"a", "b", "c", "d"}) == 3 / 4
    assert jaccard(set(), set()) == 0.0


def test_resemblance_needs_more_than_half_shared():
    texts = {"ann": "a b c", "bob": "a b d", "cy": "a b c d"}
    # ann~bob 2/4 (not > 0.5), ann~cy 3/4, bob~cy 3/4
    assert resemblance_counts(texts) == {"ann": 1, "bob": 1, "cy": 2}


def test_highest_breaks_ties_by_member_order():
    assert highest({"cy": 3.0, "bob": 5.0, "ann": 5.0}, ["ann", "bob", "cy"]) == "ann"


def test_scorers():
    assert parse_scorer("length") == ("length", None)
    assert parse_scorer(" judge:gpt-4o ") == ("judge", "gpt-4o")
    for bad in ["judge:", "longest", "judge"]:
        with pytest.raises(UserError, match="length' or 'judge:<member>"):
            parse_scorer(bad)


def test_the_plan_checks_judges_and_aggregators_before_any_call(fake_server):
    with pytest.raises(UserError, match="The judge 'zed' is not a member"):
        plan_ensemble(make_panel(fake_server, ["ann", "bob"], mode="consensus", scorer="judge:zed"))
    with pytest.raises(UserError, match="The aggregator 'zed' is not a member"):
        plan_ensemble(make_panel(fake_server, ["ann", "bob"], mode="synthesize", aggregator="zed"))
    assert plan_ensemble(make_panel(fake_server, ["ann", "bob"], mode="synthesize")).aggregator.name == "ann"
    assert (
        plan_ensemble(make_panel(fake_server, ["ann", "bob"], mode="synthesize", chairman="bob")).aggregator.name
        == "bob"
    )


async def test_fanout_returns_every_result_failures_too(fake_server, run_protocol):
    fake_server.script("ann-model", reply("ann says yes"))
    fake_server.script("bob-model", error(500, "boom"))
    fake_server.script("cy-model", hang())
    panel = make_panel(fake_server, ["ann", "bob", "cy"], mode="fanout", timeouts={"answer": "3s"})
    result, _ = await run_protocol(ensemble, panel)

    assert [(r.name, r.success, r.error_kind) for r in result.responses] == [
        ("ann", True, None),
        ("bob", False, "server"),
        ("cy", False, "timeout"),
    ]
    assert result.chosen is None and result.reached_answer
    assert "### ann\n\nann says yes" in result.final_answer
    assert "### bob — failed" in result.final_answer and "### cy — failed\n\n_timeout_" in result.final_answer
    assert result.successful_responses == 1 and result.member_count == 3
    assert len(fake_server.requests) == 3


async def test_race_returns_the_first_success_and_cancels_the_rest(fake_server, run_protocol):
    fake_server.script("ann-model", hang())
    fake_server.script("bob-model", reply("bob was quick"))
    fake_server.script("cy-model", reply("cy is slow", latency=60))
    result, events = await run_protocol(ensemble, make_panel(fake_server, ["ann", "bob", "cy"], mode="race"))

    assert result.final_answer == "bob was quick" and result.chosen == "bob"
    assert "first to answer" in result.reason
    assert [(r.name, r.success, r.error_kind) for r in result.responses] == [
        ("ann", False, "cancelled"),
        ("bob", True, None),
        ("cy", False, "cancelled"),
    ]
    assert {(e.member, e.kind) for e in events.of("call_failed")} == {("ann", "cancelled"), ("cy", "cancelled")}
    await wait_for_closed(fake_server, {"ann-model", "cy-model"})
    assert {"ann-model", "cy-model"} <= set(fake_server.closed_early)


async def test_race_skips_failures_and_waits_for_a_success(fake_server, run_protocol):
    fake_server.script("ann-model", error(400, "refused"))
    fake_server.script("bob-model", reply("bob got there", latency=0.2))
    fake_server.script("cy-model", hang())
    result, _ = await run_protocol(ensemble, make_panel(fake_server, ["ann", "bob", "cy"], mode="race"))

    assert result.chosen == "bob"
    assert [(r.name, r.error_kind) for r in result.responses] == [
        ("ann", "bad_request"),
        ("bob", None),
        ("cy", "cancelled"),
    ]


async def test_race_with_no_success_reaches_no_answer(fake_server, run_protocol):
    fake_server.default(error(400, "refused"))
    result, events = await run_protocol(ensemble, make_panel(fake_server, ["ann", "bob"], mode="race"))
    assert result.final_answer is None and result.chosen is None
    assert events.of("run_finished")[0].reached_answer is False


async def test_majority_picks_the_response_most_others_resemble(fake_server, run_protocol):
    fake_server.script("ann-model", reply("Use Rust for the parser"))
    fake_server.script("bob-model", reply("use PostgreSQL with a read replica"))
    fake_server.script("cy-model", reply("Use PostgreSQL with one read replica"))
    fake_server.script("dee-model", reply("USE postgresql WITH A READ REPLICA today"))
    result, events = await run_protocol(ensemble, make_panel(fake_server, ["ann", "bob", "cy", "dee"], mode="majority"))

    assert result.scores == {"ann": 0.0, "bob": 2.0, "cy": 2.0, "dee": 2.0}
    assert result.chosen == "bob", "a tie goes to member order"
    assert result.reason == (
        "resembles 2 of the other 3 (over half their distinct words shared); tied with cy and dee, it comes first"
        " in member order"
    )
    assert result.final_answer == "use PostgreSQL with a read replica"
    (tally,) = events.of("round_tallied")
    assert tally.winner == "bob" and tally.scores == result.scores
    assert [r.score for r in result.responses] == [0.0, 2.0, 2.0, 2.0]
    assert result.majority == "bob"


async def test_no_majority_says_so_and_falls_back_to_the_first_success(fake_server, run_protocol):
    fake_server.script("ann-model", error(500, "down"))
    fake_server.script("bob-model", reply("Use Rust for the parser"))
    fake_server.script("cy-model", reply("PostgreSQL with a read replica"))
    fake_server.script("dee-model", reply("Buy a bigger machine first"))
    result, events = await run_protocol(ensemble, make_panel(fake_server, ["ann", "bob", "cy", "dee"], mode="majority"))

    assert result.majority is None and result.chosen == "bob"
    assert result.final_answer == "Use Rust for the parser"
    assert result.reason.startswith("no majority")
    assert any(w.message.startswith("no majority") for w in events.of("warning"))


async def test_consensus_by_length_with_ties_to_member_order(fake_server, run_protocol):
    fake_server.script("ann-model", reply("short"))
    fake_server.script("bob-model", reply("a longer one"))
    fake_server.script("cy-model", reply("same length!"))
    result, _ = await run_protocol(ensemble, make_panel(fake_server, ["ann", "bob", "cy"], mode="consensus"))

    assert result.scores == {"ann": 5.0, "bob": 12.0, "cy": 12.0}
    assert result.chosen == "bob" and result.final_answer == "a longer one"
    assert result.scorer == "length"


async def test_consensus_by_a_judge_member(fake_server, run_protocol):
    scores = {"ann answer": 40, "bob answer": 90, "judge answer": 150}

    def judge(request: RecordedRequest) -> str:
        if task_of(request) != "judge":
            return "judge answer"
        text = next(t for t in scores if t in prompt_of(request))
        return json.dumps({"score": scores[text], "reason": f"scored {text}"})

    fake_server.script("ann-model", reply("ann answer"))
    fake_server.script("bob-model", reply("bob answer"))
    fake_server.script("judge-model", responder(judge))
    panel = make_panel(fake_server, ["ann", "bob", "judge"], mode="consensus", scorer="judge:judge")
    result, events = await run_protocol(ensemble, panel)

    assert result.scores == {"ann": 40.0, "bob": 90.0, "judge": 100.0}, "a score above 100 is clamped"
    assert result.chosen == "judge" and "scored it highest" in result.reason
    assert [r.note for r in result.responses] == ["scored ann answer", "scored bob answer", "scored judge answer"]
    judge_calls = [r for r in fake_server.requests if task_of(r) == "judge"]
    assert len(judge_calls) == 3
    assert all("ann answer" not in prompt_of(r) or "bob answer" not in prompt_of(r) for r in judge_calls), (
        "one response per call"
    )
    assert [e.stage for e in events.of("stage_started")] == ["answer", "judge"]
    judged = sorted(e.about for e in events.of("call_started") if e.stage == "judge")
    assert judged == ["ann", "bob", "judge"], "each judge call says which response it scores"


async def test_a_judge_that_scores_nothing_leaves_the_first_success(fake_server, run_protocol):
    fake_server.script("ann-model", reply("ann answer"))
    fake_server.script("bob-model", by_task("bob answer", judge="I would rather not say."))
    panel = make_panel(fake_server, ["ann", "bob"], mode="consensus", scorer="judge:bob")
    result, events = await run_protocol(ensemble, panel)

    assert result.chosen == "ann" and result.final_answer == "ann answer"
    assert "scored no response" in result.reason
    assert any("could not score" in w.message for w in events.of("warning"))


async def test_synthesize_has_the_aggregator_write_the_answer(fake_server, run_protocol):
    fake_server.script("ann-model", reply("ann answer"))
    fake_server.script("bob-model", by_task("bob answer", synthesis="bob's merged answer"))
    panel = make_panel(fake_server, ["ann", "bob"], mode="synthesize", aggregator="bob")
    result, events = await run_protocol(ensemble, panel)

    assert result.final_answer == "bob's merged answer" and result.chosen == "bob" and result.aggregator == "bob"
    (merge,) = [r for r in fake_server.requests if task_of(r) == "synthesis"]
    assert "ann answer" in prompt_of(merge) and "bob answer" in prompt_of(merge)
    assert "ann" not in prompt_of(merge).replace("ann answer", "")
    assert [e.stage for e in events.of("stage_started")] == ["answer", "synthesis"]


async def test_synthesize_falls_back_to_the_first_success_when_the_aggregator_fails(fake_server, run_protocol):
    fake_server.script("ann-model", error(500, "down"))
    fake_server.script("bob-model", reply("bob answer"))
    fake_server.script("cy-model", reply("cy answer"), error(503, "overloaded"))
    panel = make_panel(fake_server, ["ann", "bob", "cy"], mode="synthesize", aggregator="cy")
    result, events = await run_protocol(ensemble, panel)

    assert result.final_answer == "bob answer" and result.chosen == "bob"
    assert "aggregator failed" in result.reason and result.reached_answer
    (warning,) = events.of("warning")
    assert warning.member == "cy" and "first successful response" in warning.message
