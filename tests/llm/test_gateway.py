"""The gateway against the fake server, through litellm's real code path."""

from __future__ import annotations

import asyncio
import time

import pytest
from pydantic import BaseModel

from panel_cli.config import Defaults, Member
from panel_cli.errors import MissingKeyError
from panel_cli.llm.gateway import Gateway
from tests.fakes.openai_server import error, hang, malformed, malformed_json, reply, reply_json


class Recorder:
    def __init__(self) -> None:
        self.events: list = []

    async def __call__(self, event) -> None:
        self.events.append(event)


def member(server, name: str = "m", **fields) -> Member:
    return Member(name=name, model=f"openai/{name}", api_base=server.url, **fields)


async def call(gateway: Gateway, who: Member, **kwargs):
    return await gateway.call(who, [{"role": "user", "content": "hello"}], stage="answer", **kwargs)


@pytest.fixture
async def gateway():
    recorder = Recorder()
    gw = Gateway(recorder, defaults=Defaults(retries=2))
    gw.recorder = recorder
    yield gw
    await gw.aclose()


async def test_success_reports_tokens_and_events(fake_server, gateway):
    fake_server.script("m", reply("hi there", prompt_tokens=12, completion_tokens=7))
    result = await call(gateway, member(fake_server))
    assert result.ok and result.text == "hi there"
    assert (result.tokens_in, result.tokens_out, result.attempts) == (12, 7, 1)
    assert [e.type for e in gateway.recorder.events] == ["call_started", "call_finished"]
    assert gateway.recorder.events[1].messages[-1]["content"] == "hello"


async def test_cost_is_null_for_an_unknown_model(fake_server, gateway):
    fake_server.script("unknown-model-xyz", reply("hi"))
    result = await call(gateway, member(fake_server, "unknown-model-xyz"))
    assert result.ok and result.cost is None


async def test_cost_uses_the_price_table_for_a_known_model(fake_server, gateway):
    fake_server.script("gpt-4o", reply("hi", prompt_tokens=1000, completion_tokens=1000))
    result = await call(gateway, member(fake_server, "gpt-4o"))
    assert result.cost is not None and result.cost > 0


async def test_timeout_is_honoured_close_to_its_deadline(fake_server, gateway):
    fake_server.script("m", hang())
    started = time.perf_counter()
    result = await call(gateway, member(fake_server, timeout=0.5))
    elapsed = time.perf_counter() - started
    assert not result.ok and result.error_kind == "timeout"
    assert elapsed >= 0.5
    assert result.attempts == 1, "a timeout is not retried"


async def test_stage_deadline_bounds_the_call(fake_server, gateway):
    fake_server.script("m", hang())
    deadline = asyncio.get_running_loop().time() + 0.4
    result = await call(gateway, member(fake_server), deadline=deadline)
    assert result.error_kind == "timeout"
    assert asyncio.get_running_loop().time() >= deadline


async def test_429_then_success_is_retried_honouring_retry_after(fake_server, gateway):
    fake_server.script("m", error(429, "slow down", retry_after=0.3), reply("finally"))
    started = time.perf_counter()
    result = await call(gateway, member(fake_server))
    assert result.ok and result.text == "finally" and result.attempts == 2
    assert time.perf_counter() - started >= 0.3
    assert len(fake_server.requests_for("m")) == 2


async def test_500_is_retried_up_to_the_limit(fake_server, gateway):
    fake_server.script("m", error(500, "kaput"))
    result = await call(gateway, member(fake_server, retries=2))
    assert not result.ok and result.error_kind == "server" and result.attempts == 3
    assert len(fake_server.requests_for("m")) == 3
    assert "kaput" in result.error


async def test_retry_never_waits_past_the_stage_deadline(fake_server, gateway):
    fake_server.script("m", error(429, "later", retry_after=30))
    deadline = asyncio.get_running_loop().time() + 1.0
    result = await call(gateway, member(fake_server), deadline=deadline)
    assert result.error_kind == "rate_limited" and result.attempts == 1
    assert asyncio.get_running_loop().time() < deadline


@pytest.mark.parametrize(("status", "kind"), [(400, "bad_request"), (401, "auth"), (404, "not_found")])
async def test_client_errors_are_not_retried(fake_server, gateway, status, kind):
    fake_server.script("m", error(status, "the provider's own words"))
    result = await call(gateway, member(fake_server))
    assert not result.ok and result.error_kind == kind and result.attempts == 1
    assert len(fake_server.requests_for("m")) == 1
    assert "the provider's own words" in result.error


@pytest.mark.parametrize("step", [malformed(), malformed_json()])
async def test_malformed_body_is_classified(fake_server, gateway, step):
    fake_server.script("m", step)
    result = await call(gateway, member(fake_server, retries=0))
    assert not result.ok and result.error_kind == "malformed"
    failed = gateway.recorder.events[-1]
    assert failed.type == "call_failed" and failed.kind == "malformed"


async def test_empty_reply_is_malformed(fake_server, gateway):
    fake_server.script("m", reply(""))
    result = await call(gateway, member(fake_server))
    assert result.error_kind == "malformed"


class Pick(BaseModel):
    choice: str
    confidence: int


async def test_structured_output_from_prose_with_instructions_in_the_prompt(fake_server, gateway):
    fake_server.script("m", reply('Here it is:\n```json\n{"choice": "B", "confidence": 7}\n```'))
    result = await gateway.call(member(fake_server), [{"role": "user", "content": "pick"}], stage="vote", schema=Pick)
    assert result.parsed == {"choice": "B", "confidence": 7} and result.parse_error is None
    sent = fake_server.requests_for("m")[0]
    assert "JSON schema" in sent.messages[-1]["content"] and "response_format" not in sent.body


async def test_structured_output_native_when_litellm_says_so(fake_server, gateway):
    fake_server.script("gpt-4o", reply_json({"choice": "A", "confidence": 3}))
    result = await gateway.call(member(fake_server, "gpt-4o"), [{"role": "user", "content": "pick"}], stage="vote", schema=Pick)
    assert result.parsed == {"choice": "A", "confidence": 3}
    assert "response_format" in fake_server.requests_for("gpt-4o")[0].body


async def test_unparsable_structured_reply_is_ok_with_a_parse_error(fake_server, gateway):
    fake_server.script("m", reply("no idea"))
    result = await gateway.call(member(fake_server), [{"role": "user", "content": "pick"}], stage="vote", schema=Pick)
    assert result.ok and result.parsed is None and result.parse_error == "no JSON object in the reply"


async def test_concurrency_is_limited_per_endpoint(fake_server):
    fake_server.default(reply("ok", latency=0.1))
    gw = Gateway(Recorder(), defaults=Defaults(concurrency=3))
    try:
        results = await asyncio.gather(*(call(gw, member(fake_server, f"m{i}")) for i in range(10)))
    finally:
        await gw.aclose()
    assert all(r.ok for r in results)
    assert fake_server.max_in_flight == 3


async def test_system_prompt_goes_first(fake_server, gateway):
    fake_server.script("m", reply("ok"))
    await call(gateway, member(fake_server, system="You are terse."))
    assert fake_server.requests_for("m")[0].messages[0] == {"role": "system", "content": "You are terse."}


def test_missing_key_names_the_variable(monkeypatch, gateway):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(MissingKeyError, match="ANTHROPIC_API_KEY"):
        gateway.check_keys([Member(name="claude", model="anthropic/claude-sonnet-4-5")])


def test_missing_api_key_env_names_the_variable(monkeypatch, gateway):
    monkeypatch.delenv("MY_PROXY_KEY", raising=False)
    with pytest.raises(MissingKeyError, match="MY_PROXY_KEY"):
        gateway.check_keys([Member(name="p", model="openai/x", api_base="http://127.0.0.1:1", api_key_env="MY_PROXY_KEY")])


def test_keyless_members_pass(monkeypatch, gateway):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    gateway.check_keys([Member(name="d", model="demo/sage"), Member(name="l", model="llama"), Member(name="v", model="openai/x", api_base="http://127.0.0.1:1")])


async def test_api_key_env_is_sent_as_the_key(fake_server, gateway, monkeypatch):
    monkeypatch.setenv("MY_PROXY_KEY", "proxy-secret-123456")
    fake_server.script("m", reply("ok"))
    await call(gateway, member(fake_server, api_key_env="MY_PROXY_KEY"))
    assert fake_server.requests_for("m")[0].headers["authorization"] == "Bearer proxy-secret-123456"


async def test_a_second_gateway_works_after_the_first_is_closed(fake_server):
    fake_server.default(reply("ok"))
    for _ in range(2):
        gw = Gateway(Recorder())
        result = await call(gw, member(fake_server))
        await gw.aclose()
        assert result.ok, result.error
