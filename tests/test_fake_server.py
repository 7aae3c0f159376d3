"""The fake OpenAI server behaves like a provider for raw httpx and for litellm.

The litellm cases double as documentation of how litellm 1.110 reports each failure the
fake can produce, which the model gateway relies on to classify errors:

- malformed body (200, not JSON)    -> litellm.InternalServerError (status 500),
  "OpenAIException - Expecting value: line 1 column 1 (char 0)"
- malformed_json (200, no choices)  -> litellm.InternalServerError (status 500),
  "... provider returned a response with no 'choices' ..."
- 429                               -> litellm.RateLimitError (status 429); the
  Retry-After header is on ``exc.response.headers``
- 500                               -> litellm.InternalServerError (status 500)
- 401                               -> litellm.AuthenticationError (status 401)
- hang with ``timeout=``            -> litellm.Timeout (an openai.APITimeoutError,
  status 408), "Request timed out ... timeout value=..."
- reset_mid_body                    -> litellm.InternalServerError (status 500),
  "OpenAIException - Connection error."; beneath it aiohttp's ClientPayloadError
  "Response payload is not completed ... (received 40 of N bytes)"
- invalid_utf8                      -> litellm.InternalServerError (status 500),
  "OpenAIException - 'utf-8' codec can't decode byte 0xe9 ..."
- refused_url                       -> litellm.InternalServerError (status 500),
  "OpenAIException - Connection error."; beneath it a ConnectionRefusedError
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from typing import Any

import httpx
import pytest

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["LITELLM_OFFLINE_MODE"] = "True"

import litellm  # noqa: E402  (must follow the offline settings above)

from tests.fakes.openai_server import (  # noqa: E402
    FakeOpenAIServer,
    RecordedRequest,
    Step,
    error,
    hang,
    invalid_utf8,
    malformed,
    malformed_json,
    refused_url,
    reply,
    reply_json,
    reset_mid_body,
    responder,
)
from tests.helpers import eventually, wait_until  # noqa: E402

litellm.suppress_debug_info = True

USER = [{"role": "user", "content": "What is 2+2?"}]


def _chat(server: FakeOpenAIServer, model: str, **extra: Any) -> httpx.Response:
    """One synchronous call, as a plain OpenAI client would make it."""
    return httpx.post(
        f"{server.url}/chat/completions",
        json={"model": model, "messages": USER, **extra},
        headers={"Authorization": "Bearer test-key"},
        timeout=10,
    )


def test_reply_has_completion_shape_and_usage(fake_server: FakeOpenAIServer) -> None:
    fake_server.script("gpt", reply("four", prompt_tokens=7, completion_tokens=3))

    body = _chat(fake_server, "gpt").json()

    assert body["object"] == "chat.completion"
    assert body["model"] == "gpt"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "four"}
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"] == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}


def test_script_is_consumed_then_last_step_repeats(fake_server: FakeOpenAIServer) -> None:
    fake_server.script("gpt", reply("one"), error(500), reply("last"))

    contents = [_chat(fake_server, "gpt") for _ in range(5)]

    assert [r.status_code for r in contents] == [200, 500, 200, 200, 200]
    texts = [r.json()["choices"][0]["message"]["content"] for r in contents if r.is_success]
    assert texts == ["one", "last", "last", "last"]


def test_unscripted_models_use_the_default(fake_server: FakeOpenAIServer) -> None:
    assert _chat(fake_server, "anything").json()["choices"][0]["message"]["content"] == "ok"
    fake_server.default(reply_json({"answer": 4}))
    assert _chat(fake_server, "other").json()["choices"][0]["message"]["content"] == '{"answer": 4}'


def test_responder_answers_from_the_prompt(fake_server: FakeOpenAIServer) -> None:
    def echo_last(request: RecordedRequest) -> str:
        return f"you said: {request.messages[-1]['content']}"

    fake_server.script("gpt", responder(echo_last))

    content = _chat(fake_server, "gpt").json()["choices"][0]["message"]["content"]
    assert content == "you said: What is 2+2?"


def test_rate_limit_carries_retry_after(fake_server: FakeOpenAIServer) -> None:
    fake_server.script("gpt", error(429, "slow down", retry_after=2))

    response = _chat(fake_server, "gpt")

    assert response.status_code == 429
    assert response.headers["retry-after"] == "2"
    assert response.json()["error"]["message"] == "slow down"
    assert response.json()["error"]["code"] == "rate_limit_exceeded"


def test_retry_after_can_be_any_text(fake_server: FakeOpenAIServer) -> None:
    fake_server.script("gpt", error(429, retry_after="soon"), error(429, retry_after=0.5))

    assert _chat(fake_server, "gpt").headers["retry-after"] == "soon"
    assert _chat(fake_server, "gpt").headers["retry-after"] == "0.5"


def test_invalid_utf8_body(fake_server: FakeOpenAIServer) -> None:
    fake_server.script("gpt", invalid_utf8())

    response = _chat(fake_server, "gpt")

    assert response.status_code == 200
    with pytest.raises(UnicodeDecodeError):
        response.content.decode("utf-8")


def test_reset_mid_body(fake_server: FakeOpenAIServer) -> None:
    fake_server.script("gpt", reset_mid_body(25), reply("after"))

    with pytest.raises(httpx.HTTPError):
        _chat(fake_server, "gpt")
    assert _chat(fake_server, "gpt").json()["choices"][0]["message"]["content"] == "after"
    assert len(fake_server.requests_for("gpt")) == 2


def test_refused_url_refuses() -> None:
    with refused_url() as url, pytest.raises(httpx.ConnectError):
        httpx.post(f"{url}/chat/completions", json={"model": "gpt", "messages": USER}, timeout=5)


def test_server_error(fake_server: FakeOpenAIServer) -> None:
    fake_server.script("gpt", error(500, "boom"))

    response = _chat(fake_server, "gpt")

    assert response.status_code == 500
    assert response.json()["error"]["type"] == "server_error"
    assert "retry-after" not in response.headers


def test_malformed_bodies(fake_server: FakeOpenAIServer) -> None:
    fake_server.script("raw", malformed())
    fake_server.script("nochoices", malformed_json())

    raw = _chat(fake_server, "raw")
    assert raw.status_code == 200 and raw.text == "not json at all"
    no_choices = _chat(fake_server, "nochoices")
    assert no_choices.status_code == 200 and "choices" not in no_choices.json()


def test_unknown_routes_are_rejected(fake_server: FakeOpenAIServer) -> None:
    assert httpx.get(f"{fake_server.url}/models", timeout=10).status_code == 404


def test_a_stream_is_sent_as_server_sent_events(fake_server: FakeOpenAIServer) -> None:
    fake_server.script("gpt", reply("four and more", chunk_chars=5, prompt_tokens=7, completion_tokens=3))
    response = _chat(fake_server, "gpt", stream=True, stream_options={"include_usage": True})
    assert response.status_code == 200 and response.headers["content-type"] == "text/event-stream"
    events = [line.removeprefix("data: ") for line in response.text.split("\n\n") if line]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]) == "four and more"
    assert chunks[-1]["usage"]["total_tokens"] == 10
    assert fake_server.requests[0].streamed
    (sent,) = fake_server.streams
    # The client has the last byte before the server's loop marks the stream finished.
    wait_until(lambda: sent.finished, "the server to mark the stream finished")
    assert sent.pieces == ["four ", "and m", "ore"] and sent.first_token_at is not None


def test_requests_are_recorded(fake_server: FakeOpenAIServer) -> None:
    before = time.monotonic()
    _chat(fake_server, "a", temperature=0.2)
    _chat(fake_server, "b")

    assert [r.model for r in fake_server.requests] == ["a", "b"]
    (recorded,) = fake_server.requests_for("a")
    assert recorded.messages == USER
    assert recorded.body["temperature"] == 0.2
    assert recorded.headers["authorization"] == "Bearer test-key"
    assert recorded.path == "/v1/chat/completions"
    assert recorded.received_at >= before


async def test_latency_is_honoured(fake_server: FakeOpenAIServer) -> None:
    fake_server.script("slow", reply("late", latency=0.3))
    fake_server.script("slowfail", error(503, latency=0.2))

    async with httpx.AsyncClient(base_url=fake_server.url, timeout=10) as client:
        for model, latency in [("slow", 0.3), ("slowfail", 0.2)]:
            started = time.monotonic()
            await client.post("/chat/completions", json={"model": model, "messages": USER})
            assert time.monotonic() - started >= latency


async def test_hang_is_seen_as_closed_early_when_the_client_gives_up(
    fake_server: FakeOpenAIServer,
) -> None:
    fake_server.script("stuck", hang())

    async with httpx.AsyncClient(base_url=fake_server.url, timeout=0.3) as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.post("/chat/completions", json={"model": "stuck", "messages": USER})

    await eventually(lambda: fake_server.closed_early == ["stuck"], "the server to record it")
    assert fake_server.in_flight == 0


def test_stop_ends_a_hanging_request() -> None:
    server = FakeOpenAIServer().start()
    server.script("stuck", hang())
    failures: list[httpx.HTTPError] = []

    def call() -> None:
        try:
            _chat(server, "stuck")
        except httpx.HTTPError as exc:
            failures.append(exc)

    worker = threading.Thread(target=call)
    worker.start()
    wait_until(lambda: server.requests, "the request to reach the server")
    server.stop()
    worker.join(timeout=60)

    assert not worker.is_alive()
    assert isinstance(failures[0], httpx.RemoteProtocolError)


async def test_two_hundred_concurrent_calls(fake_server: FakeOpenAIServer) -> None:
    fake_server.default(reply("ok", latency=0.05))
    # Ten clients of twenty connections: one httpx pool of 200 is slow on the client side.
    clients = [httpx.AsyncClient(base_url=fake_server.url, timeout=30) for _ in range(10)]

    try:
        responses = await asyncio.gather(
            *(clients[i % 10].post("/chat/completions", json={"model": f"m{i}", "messages": USER}) for i in range(200))
        )
    finally:
        await asyncio.gather(*(client.aclose() for client in clients))

    assert all(r.status_code == 200 for r in responses)
    assert len(fake_server.requests) == 200
    assert fake_server.max_in_flight > 1
    assert fake_server.in_flight == 0


async def test_litellm_reads_reply_and_usage(fake_server: FakeOpenAIServer) -> None:
    fake_server.script("gpt", reply("four", prompt_tokens=7, completion_tokens=3))

    response = await litellm.acompletion(
        model="openai/gpt",
        messages=USER,
        api_base=fake_server.url,
        api_key="test-key",
        max_retries=0,
    )

    assert response.choices[0].message.content == "four"
    assert response.usage.prompt_tokens == 7
    assert response.usage.completion_tokens == 3
    assert fake_server.requests_for("gpt")[0].messages == USER


@pytest.mark.parametrize(
    ("step", "exc_type", "status"),
    [
        (malformed(), litellm.InternalServerError, 500),
        (malformed_json(), litellm.InternalServerError, 500),
        (error(429, "slow down", retry_after=2), litellm.RateLimitError, 429),
        (error(500), litellm.InternalServerError, 500),
        (error(401, "bad key"), litellm.AuthenticationError, 401),
        (hang(), litellm.Timeout, 408),
        (reset_mid_body(), litellm.InternalServerError, 500),
        (invalid_utf8(), litellm.InternalServerError, 500),
    ],
    ids=["malformed", "malformed_json", "429", "500", "401", "hang", "reset", "utf8"],
)
async def test_litellm_error_classes(
    fake_server: FakeOpenAIServer, step: Step, exc_type: type[Exception], status: int
) -> None:
    fake_server.script("gpt", step)

    with pytest.raises(exc_type) as caught:
        await litellm.acompletion(
            model="openai/gpt",
            messages=USER,
            api_base=fake_server.url,
            api_key="test-key",
            max_retries=0,
            timeout=0.5,
        )

    assert getattr(caught.value, "status_code", None) == status
    if status == 429:
        assert caught.value.response.headers["retry-after"] == "2"  # type: ignore[attr-defined]
    if status == 408:
        await eventually(lambda: fake_server.closed_early == ["gpt"], "the server to record it")
