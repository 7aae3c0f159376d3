"""The spending cap against the fake server through litellm: the cap stops a run at the right
call (no request is made for a refused call), and each protocol ends with what it has.

Every fake model costs nothing per prompt token and $0.001 per output token, and every panel
sets `max_tokens: 100`, so each call's worst case is exactly $0.10; the fake server reports
20 output tokens, so each call settles at $0.02. A stage's calls reserve in member order."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from panel_cli.config import Panel
from panel_cli.errors import UserError
from panel_cli.llm.budget import Budget
from panel_cli.llm.litellm_setup import load_litellm
from panel_cli.protocols.confer.engine import confer
from panel_cli.protocols.council.engine import council
from panel_cli.protocols.delphi.engine import delphi
from panel_cli.protocols.ensemble.engine import ensemble
from panel_cli.protocols.orchestrate.engine import orchestrate
from panel_cli.protocols.supervise.engine import supervise
from panel_cli.protocols.vote.engine import vote
from panel_cli.store.reader import TranscriptReader
from tests.fakes.openai_server import FakeOpenAIServer, RecordedRequest, reply_json, responder
from tests.helpers import cli
from tests.protocols.conftest import Recorder, make_panel, run_recorded, task_of, vote_json

OUTPUT_PRICE = 0.001
LIMITS = {"retries": 0, "max_tokens": 100}
FAKE_MODELS = ["ann", "bob", "cy", "dee", "chair", "boss", "judge", "research", "analysis"]


@pytest.fixture(autouse=True)
def priced() -> Iterator[None]:
    """Give every fake model a price in litellm's table for the test, then take it away."""
    litellm = load_litellm()
    names = [f"{name}-model" for name in FAKE_MODELS]
    litellm.register_model(
        {
            name: {
                "input_cost_per_token": 0.0,
                "output_cost_per_token": OUTPUT_PRICE,
                "litellm_provider": "openai",
                "mode": "chat",
            }
            for name in names
        }
    )
    yield
    for name in names:
        litellm.model_cost.pop(name, None)


@pytest.fixture
def run_capped() -> Callable[..., Any]:
    async def run(engine: Any, panel: Panel, budget: Budget, question: str = "What is best?") -> tuple[Any, Recorder]:
        return await run_recorded(engine, panel, question, budget=budget)

    return run


def panel_of(server: FakeOpenAIServer, names: list[str], **fields: Any) -> Panel:
    fields.setdefault("defaults", LIMITS)
    return make_panel(server, names, **fields)


def refused(recorder: Recorder) -> list[str]:
    return [event.member for event in recorder.of("call_failed") if event.kind == "budget"]


def budget_warnings(recorder: Recorder) -> list[str]:
    """The warnings that say how the protocol ends (a member's own failed call warns too)."""
    return [event.message for event in recorder.of("warning") if event.message.startswith("the budget ran out")]


def confer_member(label: str = "A") -> Any:
    def respond(request: RecordedRequest) -> str:
        if task_of(request) == "confer.vote":
            return vote_json(label, 80, f"{request.model} revised")
        return f"{request.model} answer"

    return responder(respond)


async def test_the_cap_refuses_the_call_that_would_pass_it_and_confer_keeps_the_first_answer(fake_server, run_capped):
    for name in ["ann", "bob", "cy"]:
        fake_server.script(f"{name}-model", confer_member())
    budget = Budget(max_cost=0.35)
    result, events = await run_capped(confer, panel_of(fake_server, ["ann", "bob", "cy"]), budget)
    # Answers: 3 x $0.10 reserved, $0.06 spent. Vote round 1: $0.16, $0.26, then $0.36 > $0.35.
    assert len(fake_server.requests) == 5
    assert refused(events) == ["cy"]
    refusal = next(event for event in events.of("call_failed") if event.kind == "budget")
    assert refusal.message == "not made: it could cost up to $0.1000 and $0.0900 of the $0.35 cap is left"
    assert result.rounds == [] and result.winner == "ann" and result.final_answer == "ann-model answer"
    assert budget_warnings(events) == [
        "the budget ran out; vote round 1 is not counted and the current candidate stands"
    ]
    envelope = events.envelope
    assert envelope.budget_exhausted is True and envelope.reached_answer is True
    assert envelope.budget is not None
    assert (envelope.budget.calls, envelope.budget.refused) == (5, 1)
    assert envelope.budget.spent == pytest.approx(5 * 20 * OUTPUT_PRICE) == envelope.cost
    fields = list(envelope.model_dump())
    assert fields.index("excluded_members") + 1 == fields.index("budget_exhausted") == fields.index("budget") - 1


async def test_confer_keeps_the_candidate_of_the_last_whole_round(fake_server, run_capped):
    for name in ["ann", "bob", "cy"]:
        fake_server.script(f"{name}-model", confer_member("B"))
    # After round 1, $0.12 is spent; round 2 reserves $0.22, $0.32, then $0.42 > $0.40.
    result, events = await run_capped(confer, panel_of(fake_server, ["ann", "bob", "cy"]), Budget(max_cost=0.40))
    assert len(fake_server.requests) == 3 + 3 + 2
    assert [r.index for r in result.rounds] == [1] and result.winner == "bob"
    assert result.final_answer == "bob-model answer" and result.converged is False
    assert result.final_answer_source == "answer", "the text round 1 voted for, not bob's unseen revision"
    assert len(events.of("round_tallied")) == 1


async def test_no_budget_exhaustion_when_everything_fits(fake_server, run_capped):
    for name in ["ann", "bob"]:
        fake_server.script(f"{name}-model", confer_member())
    result, events = await run_capped(confer, panel_of(fake_server, ["ann", "bob"]), Budget(max_cost=10.0))
    assert result.converged is True and len(fake_server.requests) == 2 * 3
    assert events.envelope.budget_exhausted is False and refused(events) == []


async def test_max_calls_stops_at_the_nth_call(fake_server, run_capped):
    for name in ["ann", "bob", "cy"]:
        fake_server.script(f"{name}-model", confer_member())
    result, events = await run_capped(confer, panel_of(fake_server, ["ann", "bob", "cy"]), Budget(max_calls=4))
    assert len(fake_server.requests) == 4
    assert refused(events) == ["bob", "cy"]
    assert result.final_answer == "ann-model answer" and events.envelope.budget_exhausted is True
    assert events.of("call_failed")[-1].message == "not made: the run has made its 4 calls (--max-calls)"


def council_member(request: RecordedRequest) -> str:
    task = task_of(request)
    if task == "council.review":
        return "Fine answers.\nFINAL RANKING: Model B, Model A, Model C"
    if task == "council.synthesis":
        return "the chairman's answer"
    return f"{request.model} answer"


async def test_council_skips_to_its_chairman_when_its_call_still_fits(fake_server, run_capped):
    fake_server.default(responder(council_member))
    # Answers settle at $0.06; reviews reserve $0.16, $0.26, then $0.36 > $0.35 (cy's is refused);
    # the chairman's call then needs $0.10 of the $0.25 left.
    result, events = await run_capped(council, panel_of(fake_server, ["ann", "bob", "cy"]), Budget(max_cost=0.35))
    assert [task_of(request) for request in fake_server.requests].count("council.synthesis") == 1
    assert len(fake_server.requests) == 3 + 2 + 1 and refused(events) == ["cy"]
    assert result.outcome == "answered" and result.final_answer == "the chairman's answer"
    assert len([review for review in result.stage2_reviews if review.success]) == 2
    assert budget_warnings(events) == [
        "the budget ran out; the chairman writes from the reviews that came in, if its call fits"
    ]


async def test_council_returns_the_top_ranked_answer_when_the_chairman_does_not_fit(fake_server, run_capped):
    fake_server.default(responder(council_member))
    chair = {"name": "chair", "model": "openai/chair-model", "api_base": fake_server.url, "max_tokens": 1000}
    panel = panel_of(fake_server, ["ann", "bob", "cy"], chairman=chair)
    result, events = await run_capped(council, panel, Budget(max_cost=0.35))
    assert fake_server.requests_for("chair-model") == []
    assert refused(events) == ["cy", "chair"]
    assert result.outcome == "top_ranked" and result.top_ranked == "bob"
    assert result.final_answer == "bob-model answer" and result.failure_reason is None
    assert events.envelope.reached_answer is True and events.envelope.budget_exhausted is True


async def test_vote_counts_the_ballots_that_came_in(fake_server, run_capped):
    fake_server.default(reply_json({"choice": "Yes", "ranking": ["Yes", "No"], "confidence": 90, "reason": "sure"}))
    panel = panel_of(fake_server, ["ann", "bob", "cy", "dee"], protocol="vote", options=["Yes", "No"])
    result, events = await run_capped(vote, panel, Budget(max_cost=0.25))
    assert len(fake_server.requests) == 2
    assert result.winner == "Yes" and result.ballots_cast == 2
    assert [(failure.voter, failure.kind) for failure in result.failed] == [("cy", "budget"), ("dee", "budget")]
    assert budget_warnings(events) == ["the budget ran out; only the 2 ballots cast before it did are counted"]


async def test_ensemble_consensus_asks_no_judge_once_the_budget_ran_out(fake_server, run_capped):
    fake_server.default(responder(lambda request: f"{request.model} answer"))
    panel = panel_of(fake_server, ["ann", "bob", "cy"], protocol="ensemble", mode="consensus", scorer="judge:cy")
    # Answers reserve $0.10, $0.20, then $0.30 > $0.25: the judge's own answer is refused.
    result, events = await run_capped(ensemble, panel, Budget(max_cost=0.25))
    assert len(fake_server.requests) == 2 and refused(events) == ["cy"]
    assert result.chosen == "ann" and result.final_answer == "ann-model answer" and result.scores == {}
    assert budget_warnings(events) == [
        "the budget ran out; the judge is not asked and the first successful response is the answer"
    ]


async def test_delphi_stops_its_rounds_and_the_chairman_writes(fake_server, run_capped):
    def expert(request: RecordedRequest) -> str:
        return "the consensus" if task_of(request) == "delphi.synthesis" else f"{request.model} analysis"

    fake_server.default(responder(expert))
    panel = panel_of(fake_server, ["ann", "bob", "cy"], protocol="delphi", max_rounds=3)
    # Round 1 settles at $0.06; round 2 reserves $0.16, $0.26, then $0.36 > $0.35; the chairman
    # (ann) then needs $0.10 of the $0.25 left.
    result, events = await run_capped(delphi, panel, Budget(max_cost=0.35))
    assert [r.index for r in result.rounds] == [1, 2] and refused(events) == ["cy"]
    assert result.final_answer == "the consensus"
    assert budget_warnings(events) == ["the budget ran out; the rounds stop after round 2"]


async def test_delphi_gives_the_latest_analyses_when_no_chairman_fits(fake_server, run_capped):
    fake_server.default(responder(lambda request: f"{request.model} analysis"))
    chair = {"name": "chair", "model": "openai/chair-model", "api_base": fake_server.url, "max_tokens": 1000}
    panel = panel_of(fake_server, ["ann", "bob"], protocol="delphi", max_rounds=1, chairman=chair)
    result, events = await run_capped(delphi, panel, Budget(max_cost=0.5))
    assert fake_server.requests_for("chair-model") == [] and refused(events) == ["chair"]
    assert result.final_answer == "### ann\n\nann-model analysis\n\n### bob\n\nbob-model analysis"
    assert events.envelope.reached_answer is True


def supervised(server: FakeOpenAIServer, **fields: Any) -> Panel:
    members = [
        {"name": name, "model": f"openai/{name}-model", "api_base": server.url, "task": f"{name}'s part"}
        for name in ["ann", "bob"]
    ]
    critic = {"name": "boss", "model": "openai/boss-model", "api_base": server.url}
    return Panel.model_validate(
        {"name": "t", "protocol": "supervise", "members": members, "critic": critic, "defaults": LIMITS, **fields}
    )


async def test_supervise_ends_its_review_loop_and_consolidates_what_stands(fake_server, run_capped):
    fake_server.script(
        "boss-model", reply_json({"verdict": "REJECTED", "feedback": {"ann": "Fix it.", "bob": "Fix it too."}})
    )

    def worker(request: RecordedRequest) -> str:
        return (
            "the consolidation"
            if task_of(request) == "supervise.synthesis"
            else f"{request.model} work {len(request.messages)}"
        )

    fake_server.default(responder(worker))
    # Work $0.04 spent, critic $0.06; corrections reserve $0.16, $0.26 > $0.25: bob's is refused.
    # The loop ends; the chairman (ann) needs $0.10 and $0.17 is left.
    result, events = await run_capped(supervise, supervised(fake_server), Budget(max_cost=0.25))
    assert refused(events) == ["bob"]
    assert result.loop_end == "budget" and result.final_answer == "the consolidation"
    assert [(w.name, w.deliverable) for w in result.workers] == [
        ("ann", "ann-model work 3"),
        ("bob", "bob-model work 1"),
    ]
    assert budget_warnings(events) == ["the budget ran out; the deliverables go to consolidation as they stand"]


async def test_orchestrate_starts_no_further_subtask_and_keeps_what_succeeded(fake_server, run_capped):
    plan = {
        "subtasks": [
            {"task_id": "t1", "worker": "research", "title": "find", "description": "find it", "depends_on": []},
            {"task_id": "t2", "worker": "analysis", "title": "weigh", "description": "weigh it", "depends_on": ["t1"]},
        ]
    }
    chair = {"name": "chair", "model": "openai/chair-model", "api_base": fake_server.url, "max_tokens": 1000}
    fake_server.script("boss-model", reply_json(plan))
    fake_server.default(responder(lambda request: f"output by {request.model}"))
    analysis = {"name": "analysis", "model": "openai/analysis-model", "api_base": fake_server.url, "max_tokens": 1000}
    panel = Panel.model_validate(
        {
            "name": "t",
            "protocol": "orchestrate",
            "planner": "boss",
            "chairman": chair,
            "defaults": LIMITS,
            "members": [
                {"name": "boss", "model": "openai/boss-model", "api_base": fake_server.url},
                {"name": "research", "model": "openai/research-model", "api_base": fake_server.url},
                analysis,
            ],
        }
    )
    # Plan $0.02, t1 $0.02 spent; t2 could cost $1.00: refused, and so is the chairman.
    result, events = await run_capped(orchestrate, panel, Budget(max_cost=0.5))
    assert [request.model for request in fake_server.requests] == ["boss-model", "research-model"]
    assert refused(events) == ["analysis", "chair"]
    assert [(task.id, task.status) for task in result.tasks] == [("t1", "succeeded"), ("t2", "failed")]
    assert result.final_answer == "### find\n\noutput by research-model"


# The command line: the cap comes from --max-cost, --max-calls or defaults.max_cost ------------

ROOT = Path(__file__).resolve().parents[2]
UNPRICED = (
    "--max-cost cannot bound this run: 2 members have no known price ('x' (openai/mystery-x), 'y' (openai/mystery-y)); "
    "add --allow-unknown-prices to run them as if they were free."
)


def unpriced_file(tmp_path: Path, server: FakeOpenAIServer, extra: str = "") -> Path:
    members = "".join(
        f"  - {{name: {name}, model: openai/mystery-{name}, api_base: '{server.url}'}}\n" for name in ["x", "y"]
    )
    path = tmp_path / "panel.yaml"
    path.write_text(f"name: unpriced\nquestion: Which?\nmembers:\n{members}defaults: {{retries: 0{extra}}}\n")
    return path


@pytest.mark.parametrize(
    ("extra", "args", "cap"), [("", ["--max-cost", "1"], "--max-cost"), (", max_cost: 0.5", [], "defaults.max_cost")]
)
def test_a_cost_cap_over_an_unknown_price_refuses_to_start(fake_server, tmp_path, extra, args, cap):
    db = tmp_path / "runs.db"
    outcome = cli("confer", str(unpriced_file(tmp_path, fake_server, extra)), *args, "--json", "--db", str(db))
    assert isinstance(outcome.exception, UserError) and outcome.exception.exit_code == 2
    assert outcome.exception.message == UNPRICED.replace("--max-cost", cap)
    assert fake_server.requests == [] and not db.exists()


def test_allow_unknown_prices_runs_them_as_free_and_max_calls_still_holds(fake_server, tmp_path):
    fake_server.default(responder(lambda request: f"{request.model} answer"))
    file = unpriced_file(tmp_path, fake_server)
    outcome = cli(
        "confer",
        str(file),
        "--max-cost",
        "1",
        "--allow-unknown-prices",
        "--max-calls",
        "2",
        "--json",
        "--db",
        str(tmp_path / "r.db"),
    )
    assert outcome.exit_code == 0, outcome.output
    result = json.loads(outcome.stdout)
    assert len(fake_server.requests) == 2 and result["final_answer"] == "mystery-x answer"
    assert result["budget_exhausted"] is True
    assert result["budget"] == {"max_cost": 1.0, "max_calls": 2, "spent": 0.0, "calls": 2, "refused": 2}
    # A refused call is kept as a row, but counted nowhere as a call: no request went out.
    assert result["calls"] == 2
    with TranscriptReader.open(tmp_path / "r.db") as reader:
        stored = reader.run_calls(result["run_id"])
        assert reader.list_runs(limit=1)[0].calls == 2
    assert sorted(call.error_kind or "ok" for call in stored) == ["budget", "budget", "ok", "ok"]


def test_demo_personas_are_free_so_a_zero_cap_holds_them_all(tmp_path):
    outcome = cli(
        "confer",
        str(ROOT / "configs" / "demo.yaml"),
        "--max-cost",
        "0",
        "--max-rounds",
        "1",
        "--json",
        "--db",
        str(tmp_path / "r.db"),
    )
    assert outcome.exit_code == 0, outcome.output
    result = json.loads(outcome.stdout)
    assert result["budget_exhausted"] is False
    assert result["budget"] == {"max_cost": 0.0, "max_calls": None, "spent": 0.0, "calls": 8, "refused": 0}


def test_a_run_without_a_cap_reports_no_budget(tmp_path):
    outcome = cli(
        "confer", str(ROOT / "configs" / "demo.yaml"), "--max-rounds", "1", "--json", "--db", str(tmp_path / "r.db")
    )
    result = json.loads(outcome.stdout)
    assert result["budget_exhausted"] is False and result["budget"] is None


def test_defaults_max_cost_is_a_non_negative_amount():
    members = [{"name": "a", "model": "demo/sage"}]
    assert Panel.model_validate({"members": members, "defaults": {"max_cost": 0.25}}).defaults.max_cost == 0.25
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        Panel.model_validate({"members": members, "defaults": {"max_cost": -1}})
