"""The gateway's tool loop, through litellm's real function-calling path (the fake OpenAI server
scripted to ask for tools) and the MCP SDK (the fixture server as a real subprocess)."""

from __future__ import annotations

import re

import pytest

from panel_cli.protocols.confer.engine import confer
from panel_cli.protocols.council.engine import council
from tests.fakes.openai_server import reply, reply_json, tool_calls, tool_responder
from tests.tools.conftest import answer_once, fixture_server, tool_messages, tool_panel, user_text


def fenced_result(text: str) -> str:
    """The text between a tool result's fences, as the model reads it."""
    found = re.search(
        r"^=== Tool result (.+?) \[([0-9a-f]{8})\] ===\n(.*?)\n=== end of Tool result \1 \[\2\] ===$", text, re.M | re.S
    )
    assert found, text
    return found.group(3)


@pytest.mark.subprocess
async def test_one_tool_call_then_an_answer(fake_server, run_with_tools):
    fake_server.script("a-model", tool_calls(("lookup", {"query": "tenants"})), reply("Use row-level security."))
    result, recorder = await run_with_tools(answer_once, tool_panel(fake_server, ["a"]))

    assert result.final_answer == "Use row-level security."
    first, second = fake_server.requests
    assert [tool["function"]["name"] for tool in first.body["tools"]] == [
        "lookup",
        "fail",
        "hang",
        "crash",
        "echo",
        "huge",
        "env",
        "pid",
        "header",
    ]
    assert second.body["tools"] == first.body["tools"]
    assert second.messages[1]["tool_calls"][0]["function"] == {"name": "lookup", "arguments": '{"query": "tenants"}'}
    assert [fenced_result(text) for text in tool_messages(second)] == ["found: tenants"]
    started, finished = recorder.of("tool_call_started"), recorder.of("tool_call_finished")
    assert [(e.member, e.server, e.tool, e.arguments) for e in started] == [
        ("a", "fix", "lookup", {"query": "tenants"})
    ]
    assert [(e.status, e.result, e.result_chars, e.error) for e in finished] == [("ok", "found: tenants", 14, None)]
    # Still one call: one row, the tokens of both requests, the hash of the first.
    (call,) = recorder.of("call_finished")
    assert (call.tokens_in, call.tokens_out, call.attempts) == (20, 40, 2)
    assert finished[0].call_id == call.call_id
    assert recorder.envelope is not None and recorder.envelope.calls == 1
    (server,) = recorder.of("tool_server_started")
    assert (server.server, server.transport, server.members) == ("fix", "stdio", ["a"])


@pytest.mark.subprocess
async def test_the_budget_is_spent_then_one_final_call_without_tools(fake_server, run_with_tools):
    fake_server.script("a-model", tool_calls(("lookup", {"query": "again"})))
    panel = tool_panel(fake_server, ["a"], defaults={"retries": 0, "tool_budget": 2})
    fake_server.script(
        "a-model", tool_calls(("lookup", {"query": "one"})), tool_calls(("lookup", {"query": "two"})), reply("done")
    )
    result, recorder = await run_with_tools(answer_once, panel)

    assert result.final_answer == "done"
    assert len(recorder.of("tool_call_finished")) == 2
    assert ["tools" in request.body for request in fake_server.requests] == [True, True, False]
    final = fake_server.requests[-1]
    assert all(message["role"] in ("user", "system") for message in final.messages)
    prompt = final.messages[-1]["content"]
    assert "found: one" in prompt and "found: two" in prompt
    assert prompt.endswith("[panel-task: answer]"), "the results go before the task marker"


@pytest.mark.subprocess
async def test_more_calls_in_one_turn_than_the_budget_allows(fake_server, run_with_tools):
    panel = tool_panel(fake_server, ["a"], defaults={"retries": 0, "tool_budget": 1})
    fake_server.script("a-model", tool_calls(("lookup", {"query": "x"}), ("lookup", {"query": "y"})), reply("done"))
    result, recorder = await run_with_tools(answer_once, panel)

    assert result.final_answer == "done"
    assert [e.arguments for e in recorder.of("tool_call_finished")] == [{"query": "x"}]
    assert (
        "Not run: 1 more tool call; your tool budget for this stage is spent."
        in fake_server.requests[-1].messages[-1]["content"]
    )
    assert "tools" not in fake_server.requests[-1].body


@pytest.mark.subprocess
async def test_a_tool_error_is_handed_back_to_the_model(fake_server, run_with_tools):
    fake_server.script("a-model", tool_calls(("fail", {"query": "tenants"})), reply("I could not look it up."))
    result, recorder = await run_with_tools(answer_once, tool_panel(fake_server, ["a"]))

    assert result.final_answer == "I could not look it up."
    (finished,) = recorder.of("tool_call_finished")
    assert finished.status == "failed" and finished.error
    assert fenced_result(tool_messages(fake_server.requests[1])[0]).startswith("Error: ")


@pytest.mark.subprocess
async def test_a_tool_that_hangs_times_out_and_the_model_answers(fake_server, run_with_tools):
    panel = tool_panel(fake_server, ["a"])
    panel = panel.model_copy(update={"tools": {"fix": panel.tools["fix"].model_copy(update={"timeout": 0.5})}})
    fake_server.script("a-model", tool_calls(("hang", {"query": "x"})), reply("answered without it"))
    result, recorder = await run_with_tools(answer_once, panel)

    assert result.final_answer == "answered without it"
    (finished,) = recorder.of("tool_call_finished")
    assert (finished.status, finished.error) == ("timeout", "no result within 0.5s")


@pytest.mark.subprocess
async def test_the_stage_deadline_bounds_the_whole_loop(fake_server, run_with_tools):
    """A tool allowed a minute, in a stage of three seconds: the call ends with the stage."""
    panel = tool_panel(fake_server, ["a"], defaults={"retries": 0}, timeouts={"answer": 3})
    fake_server.script("a-model", tool_calls(("hang", {"query": "x"})), reply("too late"))
    result, recorder = await run_with_tools(confer, panel.model_copy(update={"max_rounds": 1}))

    (finished,) = recorder.of("tool_call_finished")
    assert finished.status == "timeout"
    failed = recorder.of("call_failed")
    assert [event.kind for event in failed] == ["timeout"]


@pytest.mark.subprocess
async def test_the_server_dying_mid_run(fake_server, run_with_tools):
    panel = tool_panel(fake_server, ["a"], defaults={"retries": 0, "tool_budget": 3})
    fake_server.script(
        "a-model", tool_calls(("crash", {"query": "x"})), tool_calls(("lookup", {"query": "y"})), reply("carried on")
    )
    result, recorder = await run_with_tools(answer_once, panel)

    assert result.final_answer == "carried on"
    crashed, after = recorder.of("tool_call_finished")
    assert crashed.status == "failed" and "has stopped" in (crashed.error or "")
    assert "crashing on purpose" in (crashed.error or ""), "the server's last words say why"
    assert after.status == "failed" and "has stopped" in (after.error or "")
    warnings = [e.message for e in recorder.of("warning")]
    assert len([w for w in warnings if "stopped during the run" in w]) == 1


@pytest.mark.subprocess
async def test_an_unknown_tool_or_bad_arguments_go_back_as_errors(fake_server, run_with_tools):
    fake_server.script("a-model", tool_calls(("rm_rf", {"path": "/"}), ("lookup", "{not json")), reply("fine"))
    result, recorder = await run_with_tools(answer_once, tool_panel(fake_server, ["a"]))

    assert result.final_answer == "fine"
    unknown, bad = recorder.of("tool_call_finished")
    assert unknown.server is None and "no tool named 'rm_rf'" in (unknown.error or "")
    assert bad.arguments == "{not json" and bad.error == "the arguments must be a JSON object"


@pytest.mark.subprocess
async def test_votes_reviews_and_members_without_tools_get_none(fake_server, run_with_tools):
    """confer: the answers may use tools, the structured votes never; b names no server."""
    fake_server.script(
        "a-model",
        tool_calls(("lookup", {"query": "x"})),
        reply("a's answer"),
        reply_json({"chosen_label": "A", "revised_answer": "a", "confidence": 90, "rationale": "r"}),
    )
    fake_server.script(
        "b-model",
        reply("b's answer"),
        reply_json({"chosen_label": "A", "revised_answer": "b", "confidence": 90, "rationale": "r"}),
    )
    panel = tool_panel(fake_server, ["a", "b"], uses={"a": ["fix"]}, max_rounds=1)
    result, _ = await run_with_tools(confer, panel)

    assert result.final_answer is not None
    offered = [(r.model, "tools" in r.body, "confer.vote" in user_text(r)) for r in fake_server.requests]
    assert ("a-model", True, False) in offered
    assert all(not has_tools for model, has_tools, vote in offered if vote or model == "b-model")


@pytest.mark.subprocess
async def test_council_reviews_never_offer_tools_but_the_synthesis_may(fake_server, run_with_tools):
    def answer_or_rank(request):
        text = user_text(request)
        if "council.review" in text:
            return []
        return [] if tool_messages(request) else [("lookup", {"query": "q"})]

    for name in ("a", "b"):
        fake_server.script(
            f"{name}-model", tool_responder(answer_or_rank, text="FINAL RANKING:\n1. Model A\n2. Model B")
        )
    result, recorder = await run_with_tools(council, tool_panel(fake_server, ["a", "b"]))

    assert result.final_answer is not None
    assert all("tools" not in r.body for r in fake_server.requests if "council.review" in user_text(r))
    stages = sorted({e.stage for e in recorder.of("tool_call_finished")})
    assert stages == ["answer", "synthesis"]


async def test_a_model_without_function_calling_gets_no_tools(fake_server, run_with_tools, monkeypatch):
    """litellm's model table says this model has no function calling. (A name of its own:
    litellm caches what it reads of its table.)"""
    from panel_cli.llm.litellm_setup import load_litellm

    litellm = load_litellm()
    entry = {
        "litellm_provider": "openai",
        "mode": "chat",
        "supports_function_calling": False,
        "max_tokens": 1000,
        "max_input_tokens": 1000,
        "max_output_tokens": 1000,
        "input_cost_per_token": 0.0,
        "output_cost_per_token": 0.0,
    }
    monkeypatch.setitem(litellm.model_cost, "openai/plain-model", entry)
    monkeypatch.setitem(litellm.model_cost, "plain-model", entry)
    fake_server.script("plain-model", reply("no tools here"))
    result, recorder = await run_with_tools(answer_once, tool_panel(fake_server, ["plain"]))

    assert result.final_answer == "no tools here"
    assert "tools" not in fake_server.requests[0].body
    assert [e.message for e in recorder.of("warning")] == [
        "openai/plain-model has no function calling, so it gets no tools"
    ]
    assert recorder.of("tool_server_started") == [], "no member may use it, so it is not started"


@pytest.mark.subprocess
async def test_one_server_is_shared_by_the_members_that_name_it(fake_server, run_with_tools):
    for name in ("a", "b"):
        fake_server.script(f"{name}-model", tool_calls(("pid", {})), reply(f"{name} done"))
    servers = {"fix": fixture_server(), "unused": fixture_server()}
    panel = tool_panel(fake_server, ["a", "b"], uses={"a": ["fix"], "b": ["fix"]}, max_rounds=1, tools=servers)
    _, recorder = await run_with_tools(confer, panel)

    assert [e.server for e in recorder.of("tool_server_started")] == ["fix"]
    pids = [e.result for e in recorder.of("tool_call_finished") if e.tool == "pid"]
    assert len(pids) == 2 and len(set(pids)) == 1


@pytest.mark.subprocess
async def test_a_server_gets_no_key_unless_its_env_names_it(fake_server, run_with_tools, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "fake-test-never-in-a-server")
    monkeypatch.setenv("NOTES_TOKEN", "given-on-purpose")
    panel = tool_panel(fake_server, ["a"], uses={"a": ["fix"]})
    panel = panel.model_copy(
        update={"tools": {"fix": panel.tools["fix"].model_copy(update={"env": {"NOTES_TOKEN": "given-on-purpose"}})}}
    )
    fake_server.script(
        "a-model", tool_calls(("env", {"name": "OPENAI_API_KEY"}), ("env", {"name": "NOTES_TOKEN"})), reply("ok")
    )
    _, recorder = await run_with_tools(answer_once, panel)

    assert [e.result for e in recorder.of("tool_call_finished")] == ["<unset>", "given-on-purpose"]


@pytest.mark.subprocess
async def test_a_resumed_call_reuses_the_final_text_and_makes_no_tool_call(fake_server, run_with_tools):
    fake_server.script("a-model", tool_calls(("lookup", {"query": "x"})), reply("the first run's answer"))
    panel = tool_panel(fake_server, ["a"])
    _, first = await run_with_tools(answer_once, panel)
    (finished,) = first.of("call_finished")

    class Stored:
        response = finished.text
        truncated = False
        tokens_in, tokens_out, cost = finished.tokens_in, finished.tokens_out, finished.cost

    requests_before = len(fake_server.requests)
    result, second = await run_with_tools(answer_once, panel, answered={finished.request_hash: [Stored()]})

    assert result.final_answer == "the first run's answer"
    assert len(fake_server.requests) == requests_before
    assert second.of("tool_call_started") == []
    reused = second.of("call_finished")[0]
    assert reused.reused and (reused.tokens_in, reused.tokens_out) == (finished.tokens_in, finished.tokens_out)


@pytest.mark.subprocess
async def test_a_server_that_cannot_start_fails_the_run_in_one_sentence(fake_server, run_with_tools):
    import pytest

    from panel_cli.errors import UserError

    panel = tool_panel(fake_server, ["a"], uses={"a": ["fix"]})
    panel = panel.model_copy(
        update={"tools": {"fix": panel.tools["fix"].model_copy(update={"command": ["definitely-not-a-command-xyz"]})}}
    )
    with pytest.raises(UserError) as caught:
        await run_with_tools(answer_once, panel)
    assert caught.value.message == (
        "Tool server 'fix' (definitely-not-a-command-xyz) could not start: no such command: definitely-not-a-command-xyz."
    )
    assert fake_server.requests == []


def test_request_hash_covers_the_tools_offered() -> None:
    from panel_cli.llm.request_hash import request_hash

    def digest(request: dict) -> str:
        return request_hash(request, member="m", stage="answer", context=[{"role": "user", "content": "q"}])

    base = {"model": "m"}
    assert digest(base) == digest({**base, "tools": None})
    assert digest(base) != digest({**base, "tools": [{"type": "function", "function": {"name": "lookup"}}]})
