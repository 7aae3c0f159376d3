"""The eval runner end to end: real engines through litellm, against the fake server and the
simulated voters; the gold answer reaches simulated members only; every run stored, tagged."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest

from panel_cli.config import Panel
from panel_cli.errors import UserError
from panel_cli.eval.confidence import item_confidence
from panel_cli.eval.datasets import Dataset, EvalItem, load_dataset
from panel_cli.eval.runner import MULTIPLE_CHOICE, SHORT_ANSWER, plan_eval, question_text, run_eval, voters_for
from panel_cli.llm.brief import SimulatedVoter
from panel_cli.protocols.base import ProtocolResult
from panel_cli.protocols.ensemble.engine import NO_CONFIDENCE
from panel_cli.protocols.posterior import STATED, WEIGHTS
from panel_cli.store.reader import TranscriptReader
from panel_cli.store.subscriber import TranscriptStore
from tests.fakes.openai_server import FakeOpenAIServer, RecordedRequest, after, hang, reply, responder
from tests.helpers import eventually
from tests.protocols.conftest import block_labels, fenced_texts, prompt_of, task_of

COLOURS = ["red", "green", "blue"]


def mc_dataset(n: int = 4) -> Dataset:
    return Dataset(
        source="test",
        items=[
            EvalItem(id=f"q{i}", question=f"Which colour is number {i}?", answer=COLOURS[i % 3], options=COLOURS)
            for i in range(n)
        ],
    )


def sums_dataset() -> Dataset:
    return Dataset(
        source="sums",
        items=[EvalItem(id=f"s{i}", question=f"What is {i} + {i}?", answer=str(2 * i)) for i in range(1, 4)],
    )


def by_task(answer: str) -> Any:
    """A real model that always holds `answer`: it answers it, votes for the first answer that
    gives it, ranks, chairs and casts its ballot the same way."""

    def reply_for(request: RecordedRequest) -> str:
        task = task_of(request)
        if task == "confer.vote":
            texts = fenced_texts(request, "Answer")
            label = next(
                (label for label, text in texts.items() if text.splitlines()[0] == answer), block_labels(request)[0]
            )
            return json.dumps({"chosen_label": label, "revised_answer": answer, "confidence": 70, "rationale": "mine"})
        if task == "council.review":
            return "Fine.\n\nFINAL RANKING: " + ", ".join(f"Model {label}" for label in fenced_texts(request, "Model"))
        if task == "ballot":
            return json.dumps({"choice": answer, "ranking": [answer], "confidence": 70, "reason": "mine"})
        return answer

    return responder(reply_for)


def mixed_panel(server: FakeOpenAIServer) -> Panel:
    return Panel.model_validate(
        {
            "name": "mixed",
            "members": [
                {"name": "v1", "model": "demo/oracle@1"},
                {"name": "v2", "model": "demo/oracle@1"},
                {"name": "real", "model": "openai/real-model", "api_base": server.url, "system": "You are careful."},
            ],
            "defaults": {"retries": 0},
        }
    )


def oracle_panel(p: float = 1.0, n: int = 3, **fields: Any) -> Panel:
    return Panel.model_validate(
        {"name": "jury", "members": [{"name": f"v{i}", "model": f"demo/oracle@{p}"} for i in range(1, n + 1)], **fields}
    )


async def test_the_gold_answer_never_reaches_a_real_model(fake_server):
    fake_server.script("real-model", by_task("blue"))
    plan = plan_eval(
        mixed_panel(fake_server), mc_dataset(), protocols="confer,council,vote", baseline="real", grader=None
    )
    result = await run_eval(plan, store=None, secrets=[], eval_id="e1")

    assert fake_server.requests
    for request in fake_server.requests:
        body = json.dumps(request.body)
        assert '"gold"' not in body and '"voter"' not in body and "0:q" not in body
        # Its own system message, unchanged, and no other.
        assert [m["content"] for m in request.messages if m["role"] == "system"] == ["You are careful."]
    tasks = {task_of(request) for request in fake_server.requests}
    assert tasks == {"answer", "confer.vote", "council.review", "ballot"}  # v1 chairs the council
    # The two certain oracles outvote the real member, who always says blue.
    scores = {score.system: score for score in result.systems}
    assert scores["baseline"].correct == 1  # the real member alone: right on q2 only
    assert scores["vote"].correct == 4
    assert scores["confer"].correct == 4


def test_eval_tells_its_simulated_members_only():
    panel = Panel.model_validate(
        {
            "members": [
                {"name": "v1", "model": "demo/oracle@0.7", "system": "Be brief."},
                {"name": "sage", "model": "demo/sage"},
                {"name": "gpt", "model": "openai/gpt-4o"},
            ],
            "chairman": {"name": "chair", "model": "demo/oracle@0.9"},
        }
    )
    item = mc_dataset().items[1]
    assert voters_for(panel, item, "7:q1") == {
        "v1": SimulatedVoter(voter="v1", key="7:q1", gold="green", options=tuple(COLOURS)),
        "chair": SimulatedVoter(voter="chair", key="7:q1", gold="green", options=tuple(COLOURS)),
    }


def test_question_text_per_protocol():
    item = mc_dataset().items[0]
    assert question_text(item, "vote") == item.question
    assert question_text(item, "confer") == f"{item.question}\n\nOptions:\n- red\n- green\n- blue\n\n{MULTIPLE_CHOICE}"
    assert question_text(sums_dataset().items[0], "council") == f"What is 1 + 1?\n\n{SHORT_ANSWER}"


async def test_every_run_is_stored_and_tagged(tmp_path: Path):
    db = tmp_path / "eval.db"
    store = await TranscriptStore.open(db)
    try:
        plan = plan_eval(oracle_panel(), mc_dataset(3), protocols="vote,confer", baseline="v2", grader=None)
        result = await run_eval(plan, store=store, secrets=[], eval_id="e2", seed=5)
    finally:
        await store.close()
    assert [score.system for score in result.systems] == ["baseline", "vote", "confer"]
    assert [score.members for score in result.systems] == [["v2"], ["v1", "v2", "v3"], ["v1", "v2", "v3"]]
    assert len(result.items) == 9
    with TranscriptReader.open(db) as reader:
        assert len(reader.list_runs(limit=-1)) == 9
        for item in result.items:
            run = reader.get_run(item.run_id)
            assert run.config["tags"] == {"eval": "e2", "eval_system": item.system, "eval_question": item.question_id}
            assert run.status == "finished"
            assert run.final_answer == item.final_answer
            assert run.protocol == {"baseline": "ensemble", "vote": "vote", "confer": "confer"}[item.system]
    assert all(item.correct for item in result.items)
    assert (result.seed, result.baseline, result.grader) == (5, "v2", "option match")


async def test_the_same_seed_gives_the_same_grades_and_another_seed_others():
    plan = plan_eval(oracle_panel(0.5, 5), mc_dataset(30), protocols="vote", baseline=None, grader=None)

    async def grades(seed: int) -> list[bool]:
        result = await run_eval(plan, store=None, secrets=[], eval_id="e", seed=seed)
        return [item.correct for item in result.items]

    first = await grades(1)
    assert first == await grades(1)
    assert first != await grades(2)


async def test_a_run_that_fails_outright_is_graded_wrong_and_the_eval_goes_on(monkeypatch):
    from panel_cli.protocols import base

    real = base.engine_of

    async def broken(panel: Panel, question: str, gateway: Any, emit: Any) -> Any:
        raise RuntimeError("engine exploded")

    monkeypatch.setattr(base, "engine_of", lambda protocol: broken if protocol == "confer" else real(protocol))
    plan = plan_eval(oracle_panel(), mc_dataset(2), protocols="confer,vote", baseline=None, grader=None)
    result = await run_eval(plan, store=None, secrets=[], eval_id="e3")
    confer = next(score for score in result.systems if score.system == "confer")
    assert (confer.correct, confer.failed, confer.answered) == (0, 2, 0)
    failed = [item for item in result.items if item.system == "confer"]
    assert [item.error for item in failed] == ["RuntimeError: engine exploded"] * 2
    assert next(score for score in result.systems if score.system == "vote").correct == 2


async def test_a_judge_outside_the_panel_grades_short_answers(fake_server, tmp_path, monkeypatch):
    """A judge given as a model, not a member: it grades every answer and takes no part; its
    verdicts are in the result and its cost is kept apart from the systems'."""
    (tmp_path / "panel-config" / "aliases.yaml").write_text(
        f"checker:\n  model: openai/checker-model\n  api_base: {fake_server.url}\n"
    )
    fake_server.script("a-model", responder(lambda request: "4" if "2 + 2" in prompt_of(request) else "It is 2."))

    def verdict(request: RecordedRequest) -> str:
        graded = fenced_texts(request, "Answer")["to grade"]
        reference = prompt_of(request).split("Reference answer:\n", 1)[1].split("\n", 1)[0]
        return json.dumps({"verdict": "CORRECT" if reference in graded else "INCORRECT", "reason": "compared"})

    fake_server.script("checker-model", responder(verdict, prompt_tokens=50, completion_tokens=10))
    panel = Panel.model_validate(
        {
            "name": "solo",
            "members": [{"name": "a", "model": "openai/a-model", "api_base": fake_server.url}],
            "defaults": {"retries": 0},
        }
    )
    plan = plan_eval(panel, sums_dataset(), protocols="ensemble", baseline=None, grader="judge:checker")
    assert plan.judge is not None and plan.judge.name == "checker"
    assert [member.name for member in plan.called.members] == ["a", "checker"]
    result = await run_eval(plan, store=None, secrets=[], eval_id="e4")

    assert result.grader == "judge:checker"
    for score in result.systems:
        # 1 + 1 and 3 + 3 get "It is 2.": the judge accepts the first (2 is in it), not the second.
        assert (score.correct, score.calls, score.judge_tokens) == (2, 3, 180)
    graded = [item.grade for item in result.items]
    assert {grade.method for grade in graded} == {"judge"}
    assert [grade.predicted for grade in graded[:3]] == ["CORRECT", "CORRECT", "INCORRECT"]
    judged = [request for request in fake_server.requests if request.model == "checker-model"]
    assert len(judged) == 6
    assert all(task_of(request) == "judge" for request in judged)


async def test_questions_run_at_most_concurrency_at_a_time(fake_server):
    # The first request is held until a second one is in flight, so two are at once for sure;
    # meanwhile, and later, any third would show in max_in_flight.
    fake_server.script("slow-model", after(lambda: fake_server.in_flight >= 2, reply("red")), reply("red", latency=0.2))
    panel = Panel.model_validate(
        {"name": "slow", "members": [{"name": "s", "model": "openai/slow-model", "api_base": fake_server.url}]}
    )
    plan = plan_eval(panel, mc_dataset(6), protocols="vote", baseline=None, grader=None)
    await run_eval(plan, store=None, secrets=[], eval_id="e5", concurrency=2)
    assert len(fake_server.requests) == 12
    assert fake_server.max_in_flight == 2


async def test_cancelling_an_eval_leaves_its_runs_in_flight_interrupted(fake_server, tmp_path: Path):
    """Ctrl-C: every run in flight is stored as interrupted before the eval returns, so the
    store can be closed at once; the questions not started have no run."""
    fake_server.script("slow-model", hang())
    panel = Panel.model_validate(
        {"name": "slow", "members": [{"name": "s", "model": "openai/slow-model", "api_base": fake_server.url}]}
    )
    plan = plan_eval(panel, mc_dataset(5), protocols="vote", baseline=None, grader=None)
    db = tmp_path / "cancel.db"
    store = await TranscriptStore.open(db)
    task = asyncio.create_task(run_eval(plan, store=store, secrets=[], eval_id="e6", concurrency=2))
    await eventually(lambda: fake_server.in_flight == 2 or task.done(), "two runs to be in flight")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await store.close()
    with TranscriptReader.open(db) as reader:
        assert [run.status for run in reader.list_runs(limit=-1)] == ["interrupted", "interrupted"]


def test_default_protocols_leave_vote_out_of_short_answers():
    plan = plan_eval(oracle_panel(), sums_dataset(), protocols=None, baseline=None, grader=None)
    assert [system.name for system in plan.systems] == ["baseline", "confer", "council"]
    assert plan.grader == "exact match"
    full = plan_eval(oracle_panel(), load_dataset("builtin:general"), protocols=None, baseline=None, grader=None)
    assert [system.name for system in full.systems] == ["baseline", "confer", "council", "vote"]


@pytest.mark.parametrize(
    "panel, protocols, baseline, grader, message",
    [
        (
            oracle_panel(),
            "confer,parliament",
            None,
            None,
            "--protocols: 'parliament' is not a protocol; choose from confer, council, decide, delphi, ensemble, orchestrate, supervise, vote.",
        ),
        (oracle_panel(), "vote,vote", None, None, "--protocols: 'vote' is given twice."),
        (
            oracle_panel(),
            ",",
            None,
            None,
            "--protocols needs at least one protocol, separated by commas (e.g. confer,council,vote).",
        ),
        (
            oracle_panel(),
            None,
            "zed",
            None,
            "The baseline 'zed' is not a member of panel 'jury' (members: v1, v2, v3).",
        ),
        (
            oracle_panel(),
            None,
            None,
            "vibes",
            "--grader: 'vibes' is not a grader; use auto or judge:<member or model>.",
        ),
        (oracle_panel(n=1), "council", None, None, "A council needs at least 2 members; panel 'jury' has 1."),
    ],
)
def test_plan_errors_are_one_sentence_before_any_call(panel, protocols, baseline, grader, message):
    with pytest.raises(UserError) as caught:
        plan_eval(panel, mc_dataset(), protocols=protocols, baseline=baseline, grader=grader)
    assert caught.value.message == message


def test_vote_needs_options_on_every_question():
    with pytest.raises(UserError) as caught:
        plan_eval(oracle_panel(), sums_dataset(), protocols="confer,vote", baseline=None, grader=None)
    assert (
        caught.value.message
        == "--protocols: vote votes on options, and 3 questions of sums have none (the first: 's1')."
    )


def test_a_judge_member_is_taken_from_the_panel():
    plan = plan_eval(oracle_panel(), mc_dataset(), protocols="vote", baseline=None, grader="judge:v3")
    assert plan.judge is plan.panel.members[2]
    assert plan.called is plan.panel


async def test_each_answer_carries_its_confidence_worked_out_from_its_ballots():
    """Certain oracles, so every ballot is the gold option: vote's confidence, as its run reports
    it, is the posterior of weights 2, 1, 1 read as log-odds over the 3 options; confer's, of
    three stated 100s held at 0.99; the baseline, one member alone (a race), states none and says why."""
    panel = Panel.model_validate(
        {
            "name": "sure",
            "method": "weighted_plurality",
            "tally": "log_odds",
            "members": [
                {"name": f"v{i}", "model": "demo/oracle@1?confidence=p", "weight": weight}
                for i, weight in enumerate((2.0, 1.0, 1.0), start=1)
            ],
        }
    )
    plan = plan_eval(panel, mc_dataset(4), protocols="confer,vote", baseline=None, grader=None)
    result = await run_eval(plan, store=None, secrets=[], eval_id="e9")
    by_system = {
        system: [item for item in result.items if item.system == system] for system in ("baseline", "confer", "vote")
    }
    vote = math.exp(4) / (math.exp(4) + 2)
    confer = 198**3 / (198**3 + 2)
    assert [item.confidence for item in by_system["vote"]] == pytest.approx([vote] * 4)
    assert [item.confidence for item in by_system["confer"]] == pytest.approx([confer] * 4)
    assert {item.confidence_from for item in result.items} == {"run"}
    assert by_system["vote"][0].confidence_basis == WEIGHTS
    assert by_system["confer"][0].confidence_basis == STATED
    assert by_system["baseline"][0].confidence is None
    assert by_system["baseline"][0].confidence_basis == NO_CONFIDENCE["race"]
    scores = {score.system: score for score in result.systems}
    assert scores["vote"].confidence.ece == pytest.approx(1 - vote)
    assert scores["vote"].confidence.basis == WEIGHTS
    assert scores["baseline"].confidence.items == 0


def test_a_confidence_the_run_reports_is_read_as_it_is():
    class Reported(ProtocolResult):
        confidence: float
        confidence_basis: str

    found = item_confidence("vote", oracle_panel(), Reported(final_answer="red", confidence=0.42, confidence_basis="b"))
    assert (found.confidence, found.basis, found.worked_out_by) == (0.42, "b", "run")


def test_a_run_that_reports_no_confidence_is_taken_at_its_word_and_one_silent_is_worked_out():
    class NoFigure(ProtocolResult):
        confidence: float | None
        confidence_basis: str | None

    found = item_confidence("vote", oracle_panel(), NoFigure(final_answer="red", confidence=None, confidence_basis="w"))
    assert (found.confidence, found.basis, found.worked_out_by) == (None, "w", "run")
    silent = item_confidence("council", oracle_panel(), ProtocolResult(final_answer="red"))
    assert (silent.confidence, silent.worked_out_by) == (None, "eval")
