"""orchestrate end to end through litellm against the fake OpenAI server (docs/protocols.md#orchestrate): plans
re-asked with the exact error, subtasks started as soon as their own dependencies are done,
failures skipping their dependents, and the synthesis from the outputs that succeeded."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from panel_cli.protocols.orchestrate.engine import DEFAULT_WORKERS, NOTHING_TO_SYNTHESISE, orchestrate, team_of
from tests.fakes.openai_server import FakeOpenAIServer, RecordedRequest, after, error, hang, reply, responder
from tests.protocols.conftest import fenced_texts, make_panel, prompt_of, task_of

WORKERS = ["research", "analysis", "writing"]
SLOW = 2.0
GUARD = 60.0  # how long t2's reply waits for t3 at most: a hang guard, not a measurement


def step(task_id: str, worker: str, *depends_on: str, **extra: Any) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "worker": worker,
        "title": f"do {task_id}",
        "description": f"{task_id} in detail",
        "depends_on": list(depends_on),
        **extra,
    }


def plan_of(*steps: dict[str, Any]) -> str:
    return json.dumps({"subtasks": list(steps)})


def coordinator(*plans: str, answer: str = "The final answer.") -> Any:
    """The planner and chairman: the plans in turn (the last one repeats), then the answer."""
    queue = list(plans)

    def respond(request: RecordedRequest) -> str:
        if task_of(request) == "plan":
            return queue.pop(0) if len(queue) > 1 else queue[0]
        return answer

    return responder(respond)


def subtask_of(request: RecordedRequest) -> str:
    found = re.search(r"Your subtask is (\S+):", prompt_of(request))
    return found.group(1) if found else ""


def worker(latency: float = 0.0) -> Any:
    return responder(lambda request: f"output of {subtask_of(request)} by {request.model}", latency=latency)


def team_panel(server: FakeOpenAIServer, **fields: Any) -> Any:
    """research, analysis and writing work; boss plans and chairs."""
    fields.setdefault("planner", "boss")
    fields.setdefault("chairman", "boss")
    return make_panel(server, ["boss", *WORKERS], **fields)


def calls_of(server: FakeOpenAIServer, task: str) -> list[RecordedRequest]:
    return [request for request in server.requests if task_of(request) == task]


async def test_a_plan_runs_every_subtask_with_its_inputs_and_the_chairman_writes_the_answer(fake_server, run_protocol):
    plan = plan_of(step("t1", "research"), step("t2", "analysis", "t1"), step("t3", "writing", "t1", "t2"))
    fake_server.script("boss-model", coordinator(plan))
    fake_server.default(worker())
    result, events = await run_protocol(orchestrate, team_panel(fake_server), "Which database?")

    assert result.final_answer == "The final answer."
    assert result.success is True
    assert (result.succeeded, result.failed, result.skipped) == (3, 0, 0)
    assert [task.task_id for task in result.plan] == ["t1", "t2", "t3"]
    assert [(t.id, t.worker, t.depends_on, t.status) for t in result.tasks] == [
        ("t1", "research", [], "succeeded"),
        ("t2", "analysis", ["t1"], "succeeded"),
        ("t3", "writing", ["t1", "t2"], "succeeded"),
    ]
    assert all(t.started_at is not None and t.ended_at >= t.started_at for t in result.tasks)
    assert result.tasks[2].output == "output of t3 by writing-model"
    assert result.workers == WORKERS and result.planner == "boss" and result.chairman == "boss"

    writing = fake_server.requests_for("writing-model")[0]
    assert fenced_texts(writing, "Output") == {
        "t1": "output of t1 by research-model",
        "t2": "output of t2 by analysis-model",
    }
    assert writing.messages[0] == {"role": "system", "content": DEFAULT_WORKERS["writing"]}
    assert fenced_texts(fake_server.requests_for("research-model")[0], "Output") == {}
    (synthesis,) = calls_of(fake_server, "orchestrate.synthesis")
    assert set(fenced_texts(synthesis, "Output")) == {"t1", "t2", "t3"}
    (planning,) = calls_of(fake_server, "plan")
    assert "Workers:\n- research\n- analysis\n- writing\n" in prompt_of(planning)

    kinds = [event.type for event in events.events if event.type.startswith(("plan_", "task_"))]
    assert kinds[:2] == ["plan_proposed", "plan_accepted"]
    assert kinds.count("task_started") == 3 and kinds.count("task_finished") == 3
    assert events.envelope.calls == 5


INVALID_PLANS = [
    pytest.param(
        plan_of(step("t1", "research", "t3"), step("t2", "analysis", "t1"), step("t3", "writing", "t2")),
        "the dependencies form a cycle: t1 -> t3 -> t2 -> t1 (each waits for the next)",
        id="cycle",
    ),
    pytest.param(
        plan_of(step("t1", "research"), step("t2", "writing", "t1", "t9")),
        "t2 depends on 't9', which is not a task_id in the plan",
        id="unknown-dependency",
    ),
    pytest.param(
        plan_of(step("t1", "research"), step("t2", "design", "t1")),
        "t2: worker 'design' is not one of the workers (research, analysis or writing)",
        id="unknown-worker",
    ),
]


@pytest.mark.parametrize(("plan", "problem"), INVALID_PLANS)
async def test_an_invalid_plan_goes_back_with_the_exact_error_then_the_run_fails(
    fake_server, run_protocol, plan, problem
):
    fake_server.script("boss-model", coordinator(plan))
    fake_server.default(worker())
    result, events = await run_protocol(orchestrate, team_panel(fake_server, max_plan_attempts=3))

    assert result.final_answer is None and result.success is False
    assert result.failure_reason == f"No valid plan after 3 attempts: {problem}"
    assert result.plan is None and result.tasks == []
    assert [(a.attempt, a.accepted, a.error) for a in result.plan_attempts] == [(n, False, problem) for n in (1, 2, 3)]
    planning = calls_of(fake_server, "plan")
    assert len(planning) == 3 and len(fake_server.requests) == 3, "no worker and no chairman is called"
    retry = planning[1].messages
    assert [m["role"] for m in retry] == ["user", "assistant", "user"]
    assert retry[1]["content"] == plan
    assert retry[2]["content"].startswith(f"That plan cannot be used: {problem}.\n")
    rejected = events.of("plan_rejected")
    assert [(r.attempt, r.error, r.final) for r in rejected] == [
        (1, problem, False),
        (2, problem, False),
        (3, problem, True),
    ]
    assert [stage.stage for stage in events.of("stage_started")] == ["plan", "plan", "plan"]


async def test_a_plan_that_is_not_json_counts_as_an_attempt_and_a_corrected_plan_runs(fake_server, run_protocol):
    good = plan_of(step("t1", "research"), step("t2", "writing", "t1"))
    fake_server.script("boss-model", coordinator("Here is my plan: first research, then writing.", good))
    fake_server.default(worker())
    result, events = await run_protocol(orchestrate, team_panel(fake_server))

    assert result.final_answer == "The final answer." and result.success is True
    no_json = 'the reply holds no JSON object; reply with one object of the form {"subtasks": [...]}'
    assert [(a.attempt, a.accepted, a.error) for a in result.plan_attempts] == [(1, False, no_json), (2, True, None)]
    assert [event.attempt for event in events.of("plan_accepted")] == [2]
    assert result.succeeded == 2


async def test_the_planners_json_may_say_worker_type(fake_server, run_protocol):
    plan = plan_of(
        {"task_id": "a", "worker_type": "research", "title": "look", "description": "look it up", "depends_on": []}
    )
    fake_server.script("boss-model", coordinator(plan))
    fake_server.default(worker())
    result, _ = await run_protocol(orchestrate, team_panel(fake_server))
    assert [(t.id, t.worker, t.status) for t in result.tasks] == [("a", "research", "succeeded")]


async def test_each_subtask_starts_as_soon_as_its_own_dependencies_are_done(fake_server, run_protocol):
    """t1 is fast, t2 slow, t3 needs only t1: t3 reaches the server while t2 is still being
    answered. A wave scheduler would hold t3 until t2 ends."""
    plan = plan_of(step("t1", "research"), step("t2", "analysis"), step("t3", "writing", "t1"))
    fake_server.script("boss-model", coordinator(plan))
    fake_server.script("research-model", worker())
    # t2's reply waits for t3's request to reach the server, then SLOW more (t3's own reply
    # is immediate); a scheduler that held t3 back would get it only after the gate's guard.
    fake_server.script(
        "analysis-model", after(lambda: fake_server.requests_for("writing-model"), worker(latency=SLOW), guard=GUARD)
    )
    fake_server.script("writing-model", worker())
    result, events = await run_protocol(orchestrate, team_panel(fake_server))

    (t2,) = fake_server.requests_for("analysis-model")
    (t3,) = fake_server.requests_for("writing-model")
    assert t3.received_at < t2.received_at + GUARD, "t3 reached the server while t2 was being answered"
    order = [(event.type, event.task_id) for event in events.events if event.type in ("task_started", "task_finished")]
    assert order.index(("task_started", "t3")) < order.index(("task_finished", "t2"))
    tasks = {task.id: task for task in result.tasks}
    assert tasks["t3"].ended_at < tasks["t2"].ended_at
    assert result.success is True


async def test_a_failed_subtask_skips_its_dependents_which_are_never_called(fake_server, run_protocol):
    plan = plan_of(
        step("t1", "research"),
        step("t2", "analysis", "t1"),
        step("t3", "writing", "t2"),
        step("t4", "writing"),
    )
    fake_server.script("boss-model", coordinator(plan))
    fake_server.script("research-model", error(500, "research is down"))
    fake_server.default(worker())
    result, events = await run_protocol(orchestrate, team_panel(fake_server))

    tasks = {task.id: task for task in result.tasks}
    assert tasks["t1"].status == "failed" and "research is down" in tasks["t1"].error
    assert (tasks["t2"].status, tasks["t2"].blocked_by, tasks["t2"].error) == ("skipped", "t1", "t1 failed")
    assert (tasks["t3"].status, tasks["t3"].blocked_by, tasks["t3"].error) == ("skipped", "t2", "t2 was skipped")
    assert tasks["t2"].started_at is None and tasks["t2"].output is None
    assert tasks["t4"].status == "succeeded"
    assert (result.succeeded, result.failed, result.skipped) == (1, 1, 2)
    assert fake_server.requests_for("analysis-model") == []
    assert [subtask_of(r) for r in fake_server.requests_for("writing-model")] == ["t4"]
    (synthesis,) = calls_of(fake_server, "orchestrate.synthesis")
    assert fenced_texts(synthesis, "Output") == {"t4": "output of t4 by writing-model"}
    assert "- t1 (research): do t1 [failed: server: the provider failed (500): research is down]" in prompt_of(
        synthesis
    )
    assert result.final_answer == "The final answer." and result.success is False
    assert [(e.task_id, e.blocked_by) for e in events.of("task_skipped")] == [("t2", "t1"), ("t3", "t2")]
    assert (
        "1 failed and 2 skipped of 4 subtasks; the answer is built from the 1 that succeeded"
        in events.envelope.warnings
    )


async def test_no_subtask_succeeding_means_no_synthesis_and_no_answer(fake_server, run_protocol):
    fake_server.script("boss-model", coordinator(plan_of(step("t1", "research"), step("t2", "writing", "t1"))))
    fake_server.script("research-model", error(500))
    result, _ = await run_protocol(orchestrate, team_panel(fake_server))
    assert result.final_answer is None and result.failure_reason == NOTHING_TO_SYNTHESISE
    assert calls_of(fake_server, "orchestrate.synthesis") == []
    assert (result.succeeded, result.failed, result.skipped) == (0, 1, 1)


async def test_a_subtask_is_bounded_by_the_task_limit(fake_server, run_protocol):
    fake_server.script(
        "boss-model", coordinator(plan_of(step("t1", "research"), step("t2", "writing", "t1"), step("t3", "analysis")))
    )
    fake_server.script("research-model", hang())
    fake_server.default(worker())
    result, _ = await run_protocol(orchestrate, team_panel(fake_server, timeouts={"task": "3s"}))
    tasks = {task.id: task for task in result.tasks}
    assert tasks["t1"].status == "failed" and tasks["t1"].error.startswith("timeout")
    assert tasks["t2"].status == "skipped" and tasks["t3"].status == "succeeded"
    assert result.final_answer == "The final answer."


async def test_a_planner_that_fails_for_good_is_not_asked_again(fake_server, run_protocol):
    fake_server.script("boss-model", error(401, "bad key"))
    result, events = await run_protocol(orchestrate, team_panel(fake_server, max_plan_attempts=3))
    assert len(fake_server.requests) == 1
    assert result.failure_reason.startswith("No valid plan after 1 attempt: the planner's call failed (auth:")
    assert events.of("plan_rejected")[-1].final is True


async def test_among_subtasks_ready_together_the_lower_priority_number_starts_first(fake_server, run_protocol):
    plan = plan_of(
        step("a", "research", priority=3), step("b", "research", priority=1), step("c", "research", priority=2)
    )
    fake_server.script("boss-model", coordinator(plan))
    fake_server.default(worker())
    panel = team_panel(fake_server, concurrency={fake_server.url: 1})
    await run_protocol(orchestrate, panel)
    assert [subtask_of(r) for r in fake_server.requests_for("research-model")] == ["b", "c", "a"]


async def test_with_no_member_left_to_work_the_default_workers_join_on_the_planners_model(fake_server, run_protocol):
    fake_server.script(
        "boss-model",
        responder(
            lambda r: (
                plan_of(step("t1", "research"), step("t2", "writing", "t1"))
                if task_of(r) == "plan"
                else ("The final answer." if task_of(r) == "orchestrate.synthesis" else f"output of {subtask_of(r)}")
            )
        ),
    )
    panel = make_panel(fake_server, ["boss"], planner="boss")
    team = team_of(panel)
    assert [w.name for w in team.workers] == WORKERS and team.default_workers
    result, _ = await run_protocol(orchestrate, panel)

    assert result.workers == WORKERS and result.final_answer == "The final answer."
    systems = {
        subtask_of(r): r.messages[0]["content"] for r in fake_server.requests if task_of(r) == "orchestrate.task"
    }
    assert systems == {"t1": DEFAULT_WORKERS["research"], "t2": DEFAULT_WORKERS["writing"]}


def test_who_plans_chairs_and_works(fake_server):
    # Neither named: the first member plans, chairs, and works too.
    team = team_of(make_panel(fake_server, ["research", "writing"]))
    assert (team.planner.name, [c.name for c in team.chairmen], [w.name for w in team.workers]) == (
        "research",
        ["research"],
        ["research", "writing"],
    )
    # The planner defaults to the chairman; a named chairman does not work.
    team = team_of(make_panel(fake_server, ["boss", "research"], chairman="boss"))
    assert (team.planner.name, [w.name for w in team.workers]) == ("boss", ["research"])
    # An inline planner; a member's own system prompt is kept, another kind gets a generic one.
    panel = make_panel(
        fake_server,
        ["design", "research"],
        planner={"name": "lead", "model": "openai/lead", "api_base": fake_server.url},
    )
    team = team_of(
        panel.model_copy(
            update={"members": [panel.members[0], panel.members[1].model_copy(update={"system": "Mine."})]}
        )
    )
    assert team.planner.name == "lead"
    assert (
        team.workers[0].system.startswith("You are the design worker of a team.") and team.workers[1].system == "Mine."
    )
    # A default worker does not take the name of a member who plans.
    team = team_of(make_panel(fake_server, ["research"], planner="research"))
    assert [w.name for w in team.workers] == ["research-worker", "analysis", "writing"]


async def test_a_failing_chairman_hands_over_to_its_backup(fake_server, run_protocol):
    plan = plan_of(step("t1", "research"))
    fake_server.script("boss-model", coordinator(plan))
    fake_server.script("chair-model", error(500, "chair is down"))
    fake_server.script("backup-model", reply("The backup's answer."))
    fake_server.default(worker())
    panel = make_panel(
        fake_server, ["boss", "chair", "backup", "research"], planner="boss", chairman=["chair", "backup"]
    )
    result, events = await run_protocol(orchestrate, panel)
    assert result.final_answer == "The backup's answer." and result.chairman == "backup"
    assert [f.chairman for f in result.chair_failures] == ["chair"]
    assert result.workers == ["research"]
