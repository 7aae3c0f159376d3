"""supervise end to end through litellm against the fake OpenAI server (docs/protocols.md#supervise): the review
loop, the correction conversations, the round cap and an unusable critic."""

from __future__ import annotations

from typing import Any

from panel_cli.config import Panel
from panel_cli.protocols.supervise.engine import supervise
from tests.fakes.openai_server import FakeOpenAIServer, RecordedRequest, error, reply, reply_json, responder
from tests.protocols.conftest import fenced_texts, prompt_of, task_of

APPROVED = {"verdict": "APPROVED", "feedback": {}}


def rejected(**feedback: str) -> dict[str, Any]:
    return {"verdict": "REJECTED", "feedback": feedback}


def supervised_panel(server: FakeOpenAIServer, workers: dict[str, str], critic: str = "boss", **fields: Any) -> Panel:
    """Workers with their tasks, an inline critic, each on its own fake model."""
    members = [
        {"name": name, "model": f"openai/{name}-model", "api_base": server.url, "task": task}
        for name, task in workers.items()
    ]
    inline = {"name": critic, "model": f"openai/{critic}-model", "api_base": server.url}
    fields.setdefault("defaults", {"retries": 0})
    return Panel.model_validate({"name": "t", "members": members, "critic": inline, **fields})


def worker(draft: str, fixed: str = "", synthesis: str = "the consolidated answer"):
    """A worker's first deliverable, its corrections (`fixed`, numbered), and the chairman's answer."""

    def respond(request: RecordedRequest) -> str:
        task = task_of(request)
        if task == "supervise.synthesis":
            return synthesis
        if task == "supervise.correction":
            return f"{fixed} {sum(task_of_message(m) == 'supervise.correction' for m in request.messages)}"
        return draft

    return responder(respond)


def task_of_message(message: dict[str, Any]) -> str:
    content = str(message.get("content", ""))
    return content.rsplit("[panel-task: ", 1)[-1].rstrip("]") if "[panel-task: " in content else ""


def calls(server: FakeOpenAIServer, task: str, model: str | None = None) -> list[RecordedRequest]:
    return [r for r in server.requests if task_of(r) == task and (model is None or r.model == model)]


TEAM = {"writer": "Write the announcement.", "coder": "Write the booking script."}


async def test_approved_in_round_1_makes_no_correction_call(fake_server, run_protocol):
    fake_server.script("writer-model", worker("the announcement"))
    fake_server.script("coder-model", worker("the script"))
    fake_server.script("boss-model", reply_json(APPROVED))
    result, events = await run_protocol(supervise, supervised_panel(fake_server, TEAM))

    assert [task_of(r) for r in fake_server.requests].count("supervise.correction") == 0
    assert len(fake_server.requests) == 2 + 1 + 1
    assert (result.loop_end, result.approved, result.correction_rounds, result.max_rounds) == ("approved", True, 0, 2)
    assert [(w.name, w.deliverable, w.corrections, w.approved) for w in result.workers] == [
        ("writer", "the announcement", 0, True),
        ("coder", "the script", 0, True),
    ]
    (work_writer,) = calls(fake_server, "supervise.work", "writer-model")
    assert "Your task:\nWrite the announcement." in prompt_of(work_writer) and "Question:\nWhat is best?" in prompt_of(
        work_writer
    )
    (critic,) = calls(fake_server, "critic")
    assert fenced_texts(critic, "Deliverable") == {"writer": "the announcement", "coder": "the script"}
    assert "Workers:\n- writer\n- coder\n" in prompt_of(critic)
    (chair,) = calls(fake_server, "supervise.synthesis")
    assert chair.model == "writer-model", "without a chairman, the first member consolidates"
    assert fenced_texts(chair, "Deliverable") == {"writer": "the announcement", "coder": "the script"}
    assert "The critic approved them in round 1." in prompt_of(chair)
    assert result.final_answer == "the consolidated answer"
    assert [(v.round, v.verdict, v.rejected) for v in events.of("supervise_verdict")] == [(1, "APPROVED", [])]


async def test_a_rejected_worker_corrects_in_its_own_conversation(fake_server, run_protocol):
    fake_server.script("writer-model", worker("the announcement"))
    fake_server.script("coder-model", worker("the script", fixed="the fixed script"))
    fake_server.script("boss-model", reply_json(rejected(coder="Handle double bookings.")), reply_json(APPROVED))
    result, events = await run_protocol(supervise, supervised_panel(fake_server, TEAM))

    assert len(calls(fake_server, "supervise.work", "writer-model")) == 1, "an approved worker is not called again"
    first, second = fake_server.requests_for("coder-model")[:2]
    assert task_of(second) == "supervise.correction"
    assert second.messages[0] == first.messages[0], "the first exchange is kept: the same task prompt"
    assert second.messages[1] == {"role": "assistant", "content": "the script"}
    assert [m["role"] for m in second.messages] == ["user", "assistant", "user"]
    assert fenced_texts(second, "Feedback for") == {"coder": "Handle double bookings."}

    critic_1, critic_2 = calls(fake_server, "critic")
    assert "Review round 1 of at most 3." in prompt_of(critic_1) and "Review round 2 of at most 3." in prompt_of(
        critic_2
    )
    assert fenced_texts(critic_2, "Deliverable") == {"writer": "the announcement", "coder": "the fixed script 1"}
    assert fenced_texts(critic_2, "Feedback for") == {"coder": "Handle double bookings."}, (
        "the critic sees what it asked"
    )

    assert (result.loop_end, result.approved, result.correction_rounds) == ("approved", True, 1)
    assert [(r.index, [d.worker for d in r.deliveries], r.review.verdict) for r in result.rounds] == [
        (1, ["writer", "coder"], "REJECTED"),
        (2, ["coder"], "APPROVED"),
    ]
    assert [(w.name, w.corrections) for w in result.workers] == [("writer", 0), ("coder", 1)]
    assert [(s.stage, s.round, s.members) for s in events.of("stage_started")] == [
        ("work", 1, ["writer", "coder"]),
        ("critique", 1, ["boss"]),
        ("correction", 2, ["coder"]),
        ("critique", 2, ["boss"]),
        ("synthesis", None, ["writer"]),
    ]


async def test_the_round_cap_stops_the_corrections(fake_server, run_protocol):
    fake_server.script("writer-model", worker("the announcement", fixed="a new announcement"))
    fake_server.script("boss-model", reply_json(rejected(writer="Still too vague.")))
    result, events = await run_protocol(supervise, supervised_panel(fake_server, {"writer": "Write it."}))

    assert len(calls(fake_server, "critic")) == 3, "the default 2 correction rounds, each reviewed"
    assert len(calls(fake_server, "supervise.correction")) == 2
    last = calls(fake_server, "supervise.correction")[-1]
    assert [m["role"] for m in last.messages] == ["user", "assistant", "user", "assistant", "user"], (
        "the whole conversation"
    )
    assert (result.loop_end, result.approved, result.correction_rounds) == ("round_cap", False, 2)
    assert result.workers[0].deliverable == "a new announcement 2" and result.workers[0].approved is False
    assert (
        "the critic still rejects writer after 2 correction rounds; the deliverables go to consolidation as they are"
        in [w.message for w in events.of("warning")]
    )
    (chair,) = calls(fake_server, "supervise.synthesis")
    assert fenced_texts(chair, "Feedback for") == {"writer": "Still too vague."}, (
        "the chairman knows what is unresolved"
    )
    assert result.reached_answer


async def test_max_rounds_is_the_number_of_correction_rounds(fake_server, run_protocol):
    fake_server.script("writer-model", worker("draft", fixed="fix"))
    fake_server.script("boss-model", reply_json(rejected(writer="No.")))
    result, _ = await run_protocol(supervise, supervised_panel(fake_server, {"writer": "Write it."}, max_rounds=1))
    assert len(calls(fake_server, "critic")) == 2 and result.correction_rounds == 1 and result.max_rounds == 1


async def test_an_invalid_critic_twice_stops_the_loop_and_consolidation_goes_on(fake_server, run_protocol):
    fake_server.script("writer-model", worker("the announcement"))
    fake_server.script("coder-model", worker("the script"))
    fake_server.script("boss-model", reply("Looks fine to me overall."), reply('{"verdict": "OK"}'))
    result, events = await run_protocol(supervise, supervised_panel(fake_server, TEAM))

    first, second = calls(fake_server, "critic")
    assert [m["role"] for m in second.messages] == ["user", "assistant", "user"]
    assert second.messages[1]["content"] == "Looks fine to me overall."
    assert "Your reply could not be used: no JSON object in the reply." in second.messages[2]["content"]
    assert calls(fake_server, "supervise.correction") == []
    (review,) = [r.review for r in result.rounds]
    assert review.verdict is None and review.attempts == 2
    assert review.problem == "invalid verdict: Input should be 'APPROVED' or 'REJECTED'"
    messages = [w.message for w in events.of("warning")]
    assert "its verdict could not be used (no JSON object in the reply); asked once more" in messages
    assert (
        "the critic gave no usable verdict in round 1, twice (invalid verdict: Input should be 'APPROVED' or 'REJECTED'); "
        "the deliverables go to consolidation as they are"
    ) in messages
    (chair,) = calls(fake_server, "supervise.synthesis")
    assert "The critic gave no valid verdict, so the deliverables come as they are." in prompt_of(chair)
    assert (result.loop_end, result.approved, result.final_answer) == ("no_verdict", False, "the consolidated answer")
    assert [w.approved for w in result.workers] == [False, False]
    (verdict,) = events.of("supervise_verdict")
    assert verdict.verdict is None and verdict.problem == review.problem


async def test_a_critic_that_fails_twice_is_a_critic_without_verdict(fake_server, run_protocol):
    fake_server.script("writer-model", worker("the announcement"))
    fake_server.script("boss-model", error(500, "down"))
    result, _ = await run_protocol(supervise, supervised_panel(fake_server, {"writer": "Write it."}))
    first, second = calls(fake_server, "critic")
    assert second.messages == first.messages, "a failed call is asked again as it was"
    assert result.loop_end == "no_verdict" and result.reached_answer


async def test_a_worker_without_a_deliverable_is_named_to_the_critic(fake_server, run_protocol):
    fake_server.script("writer-model", worker("the announcement"))
    fake_server.script("coder-model", error(500, "down"), worker("never used", fixed="late script"))
    fake_server.script("boss-model", reply_json(rejected(coder="Deliver something.")), reply_json(APPROVED))
    result, events = await run_protocol(supervise, supervised_panel(fake_server, TEAM))

    first_critic = calls(fake_server, "critic")[0]
    assert fenced_texts(first_critic, "Deliverable") == {"writer": "the announcement"}
    assert "No deliverable from: coder (the call failed)." in prompt_of(first_critic)
    assert any(
        w.member == "coder" and w.message.startswith("delivered nothing in round 1 (") for w in events.of("warning")
    )
    retry = fake_server.requests_for("coder-model")[1]
    assert [m["role"] for m in retry.messages] == ["user", "user"], "the task it never answered, then the feedback"
    assert result.workers[1].deliverable == "late script 1" and result.approved


async def test_no_deliverable_at_all_reaches_no_answer(fake_server, run_protocol):
    fake_server.default(error(400, "nope"))
    result, _ = await run_protocol(supervise, supervised_panel(fake_server, TEAM))
    assert result.final_answer is None and result.failure_reason == "Supervision failed: no worker delivered anything"
    assert result.loop_end == "no_deliverables" and len(fake_server.requests) == 2
