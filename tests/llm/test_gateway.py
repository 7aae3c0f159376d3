"""The gateway against the fake server, through litellm's real code path, and its pure
helpers (Retry-After, classification, the message cleaner) on litellm's own exceptions.
Every fault a provider can cause has its end-to-end row in tests/faults/."""

from __future__ import annotations

import asyncio
import email.utils
import json
import time

import httpx
import openai
import pytest
from pydantic import BaseModel

from panel_cli.config import Defaults, Member
from panel_cli.llm.errors import (
    ClassifiedError,
    classify,
    clean_message,
    clean_words,
    describe,
    parse_retry_after,
    retry_after_seconds,
)
from panel_cli.llm.gateway import Gateway
from panel_cli.llm.litellm_setup import load_litellm
from tests.fakes.openai_server import after, error, hang, malformed, malformed_json, reply, reply_json
from tests.helpers import member


class Recorder:
    def __init__(self) -> None:
        self.events: list = []

    async def __call__(self, event) -> None:
        self.events.append(event)


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


async def test_a_call_queued_past_the_stage_deadline_sends_nothing(fake_server):
    fake_server.default(hang())
    gw = Gateway(Recorder(), defaults=Defaults(concurrency=1))
    deadline = asyncio.get_running_loop().time() + 3.0  # time for the first request to go out
    try:
        results = await asyncio.gather(*(call(gw, member(fake_server, name), deadline=deadline) for name in ("a", "b")))
    finally:
        await gw.aclose()
    assert [r.error_kind for r in results] == ["timeout", "timeout"]
    assert len(fake_server.requests) == 1


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
    deadline = asyncio.get_running_loop().time() + 10.0  # room for the one request on a loaded machine
    result = await call(gateway, member(fake_server), deadline=deadline)
    assert result.error_kind == "rate_limited" and result.attempts == 1
    assert result.error == "rate limited; the provider asked to wait 30s, longer than this call may take"
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
    result = await gateway.call(
        member(fake_server, "gpt-4o"), [{"role": "user", "content": "pick"}], stage="vote", schema=Pick
    )
    assert result.parsed == {"choice": "A", "confidence": 3}
    assert "response_format" in fake_server.requests_for("gpt-4o")[0].body


async def test_unparsable_structured_reply_is_ok_with_a_parse_error(fake_server, gateway):
    fake_server.script("m", reply("no idea"))
    result = await gateway.call(member(fake_server), [{"role": "user", "content": "pick"}], stage="vote", schema=Pick)
    assert result.ok and result.parsed is None and result.parse_error == "no JSON object in the reply"


async def test_concurrency_is_limited_per_endpoint(fake_server):
    # Replies wait until three requests have been in flight at once; a fourth would show too.
    fake_server.default(after(lambda: fake_server.max_in_flight >= 3, reply("ok")))
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


async def test_about_is_carried_by_every_event_of_a_call(fake_server, gateway):
    fake_server.script("ok", reply("fine"))
    fake_server.script("gone", error(401, "bad key"))
    await call(gateway, member(fake_server, "ok"), about="Answer B")
    await call(gateway, member(fake_server, "gone"), about="Answer C")
    await call(gateway, member(fake_server, "gone"), about="Answer D")
    abouts = [(e.type, e.about) for e in gateway.recorder.events if e.type != "warning"]
    assert abouts == [
        ("call_started", "Answer B"),
        ("call_finished", "Answer B"),
        ("call_started", "Answer C"),
        ("call_failed", "Answer C"),
        ("member_skipped", "Answer D"),
    ]


# -- pure helpers, on the exceptions litellm really raises -------------------------------

REQUEST = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")


def http_response(status: int, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, headers=headers or {}, request=REQUEST)


def rate_limited(headers: dict[str, str]) -> Exception:
    litellm = load_litellm()
    return litellm.RateLimitError(
        message="litellm.RateLimitError: RateLimitError: OpenAIException - slow down",
        llm_provider="openai",
        model="m",
        response=http_response(429, headers),
    )


def wrapped(cause: BaseException, message: str = "Connection error.") -> Exception:
    """How litellm reports a transport failure of the openai SDK: an InternalServerError
    whose context is the SDK's APIConnectionError, caused by the transport's exception."""
    litellm = load_litellm()
    sdk = openai.APIConnectionError(message=message, request=REQUEST)
    sdk.__cause__ = cause
    outer = litellm.InternalServerError(
        message=f"litellm.InternalServerError: InternalServerError: OpenAIException - {message}",
        llm_provider="openai",
        model="m",
        response=http_response(500),
    )
    outer.__context__ = sdk
    return outer


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("0", 0.0), ("7", 7.0), (" 2 ", 2.0), ("0.3", 0.3), ("3600", 3600.0)],
)
def test_retry_after_in_seconds(value, seconds):
    assert parse_retry_after(value) == seconds
    assert retry_after_seconds(rate_limited({"retry-after": value})) == seconds


@pytest.mark.parametrize(
    "value", ["soon", "0x10", "1,5", "Mon, 99 Foo 2024 25:61:00 GMT", "inf", "nan", "-5", "", "1e3", "9" * 400]
)
def test_malformed_retry_after_is_ignored(value):
    assert parse_retry_after(value) is None
    assert retry_after_seconds(rate_limited({"retry-after": value})) is None


def test_retry_after_as_an_http_date():
    now = 1_700_000_000.0
    assert parse_retry_after(email.utils.formatdate(now + 90, usegmt=True), now=now) == 90.0
    assert parse_retry_after(email.utils.formatdate(now - 90, usegmt=True), now=now) == 0.0
    assert parse_retry_after("Tue, 14 Nov 2023 22:14:50 -0000", now=now) == 90.0


def test_retry_after_ms_is_preferred_and_absent_headers_give_none():
    assert retry_after_seconds(rate_limited({"retry-after-ms": "250", "retry-after": "1"})) == 0.25
    assert retry_after_seconds(rate_limited({"retry-after-ms": "soon", "retry-after": "1"})) == 1.0
    assert retry_after_seconds(rate_limited({})) is None
    assert retry_after_seconds(ValueError("no headers here")) is None


def test_a_refused_connection_is_a_connection_failure_that_lasts():
    exc = wrapped(ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 5555)"))
    failure = describe(exc)
    assert (failure.kind, failure.permanent) == ("connection", True)
    assert failure.message == "could not connect to 127.0.0.1:5555 (connection refused)"
    assert "ConnectionRefusedError" in failure.detail and "OpenAIException - Connection error." in failure.detail


def test_refused_in_words_counts_only_on_our_side_of_the_connection():
    litellm = load_litellm()
    ours = litellm.APIConnectionError(
        message="litellm.APIConnectionError: OllamaException - [Errno 111] Connection refused",
        llm_provider="ollama",
        model="llama3.1",
    )
    proxy = litellm.ServiceUnavailableError(
        message="litellm.ServiceUnavailableError: OpenAIException - upstream connect error or disconnect/reset "
        "before headers. reset reason: connection refused",
        llm_provider="openai",
        model="m",
        response=http_response(503),
    )
    assert (describe(ours).kind, describe(ours).permanent) == ("connection", True)
    assert describe(ours).message == "could not connect to the provider (connection refused)"
    assert (describe(proxy).kind, describe(proxy).permanent) == ("server", False)


def test_a_reset_before_any_reply_is_retryable():
    exc = wrapped(httpx.ReadError(""))
    exc.__context__.__cause__.__cause__ = ConnectionResetError(104, "Connection reset by peer")
    failure = describe(exc)
    assert (failure.kind, failure.permanent) == ("connection", False)
    assert failure.message == "the connection to the provider was reset"


def test_a_body_cut_off_is_malformed():
    cut = httpx.ReadError(
        "Response payload is not completed: <ContentLengthError: 400, message='Not enough data to satisfy "
        "content length header (received 40 of 944 bytes).'>. ConnectionResetError(104, 'Connection reset by peer')"
    )
    failure = describe(wrapped(cut))
    assert failure.kind == "malformed" and not failure.permanent
    assert failure.message == "the connection broke in the middle of the reply (40 of 944 bytes arrived)"


def test_a_body_that_is_not_utf8_is_malformed():
    litellm = load_litellm()
    text = "'utf-8' codec can't decode byte 0xe9 in position 153: invalid continuation byte"
    exc = litellm.InternalServerError(
        message=f"litellm.InternalServerError: InternalServerError: OpenAIException - {text}",
        llm_provider="openai",
        model="m",
        response=http_response(500),
    )
    exc.__context__ = UnicodeDecodeError("utf-8", b"caf\xe9", 3, 4, "invalid continuation byte")
    assert classify(exc) == "malformed"
    assert clean_message(exc, "malformed") == "the reply was not valid UTF-8"


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (ClassifiedError("malformed", "the reply was empty"), "malformed"),
        (TimeoutError(), "timeout"),
        (
            wrapped(json.JSONDecodeError("Expecting value", "x", 0), "Expecting value: line 1 column 1 (char 0)"),
            "malformed",
        ),
        (ConnectionResetError(104, "reset"), "connection"),
        (RuntimeError("something odd"), "server"),
    ],
    ids=["ours", "timeout", "json", "bare-os-error", "unknown"],
)
def test_classify(exc, kind):
    assert classify(exc) == kind


@pytest.mark.parametrize(
    ("cls", "status", "kind", "message"),
    [
        (
            "AuthenticationError",
            401,
            "auth",
            "the provider rejected the key (401): Incorrect API key provided: sk-abc***xyz",
        ),
        ("NotFoundError", 404, "not_found", "model not found (404): The model `m` does not exist"),
        (
            "BadRequestError",
            400,
            "bad_request",
            "the provider rejected the request (400): The model `m` does not exist",
        ),
        ("InternalServerError", 500, "server", "the provider failed (500): The model `m` does not exist"),
    ],
)
def test_http_failures_get_one_sentence_with_the_providers_words(cls, status, kind, message):
    litellm = load_litellm()
    words = {
        401: "Incorrect API key provided: sk-abc***xyz. You can find your API key at https://platform.openai.com/account/api-keys.",
    }.get(status, "The model `m` does not exist")
    exc = getattr(litellm, cls)(
        message=f"litellm.{cls}: {cls}: OpenAIException - {words}",
        llm_provider="openai",
        model="m",
        response=http_response(status),
    )
    failure = describe(exc)
    assert (failure.kind, failure.message) == (kind, message)
    assert failure.permanent == (kind in {"auth", "not_found", "bad_request"})


def test_a_403_is_access_denied():
    litellm = load_litellm()
    exc = litellm.APIError(
        status_code=403,
        message="litellm.APIError: APIError: OpenAIException - Country, region, or territory not supported",
        llm_provider="openai",
        model="m",
    )
    assert (
        clean_message(exc, classify(exc))
        == "the provider denied access (403): Country, region, or territory not supported"
    )


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ("litellm.InternalServerError: InternalServerError: OpenAIException - kaput", "kaput"),
        ("litellm.NotFoundError: DemoException - unknown demo persona 'x'", "unknown demo persona 'x'"),
        (
            "litellm.BadRequestError: OpenAIException - bad param\nReceived Model Group=m\nAvailable Model Group Fallbacks=None",
            "bad param",
        ),
        (
            'litellm.APIConnectionError: AnthropicException - {"type": "error", "error": {"message": "invalid x-api-key"}}',
            "invalid x-api-key",
        ),
        ("OpenAIException - {'error': {'message': 'quota exceeded', 'code': 429}}", "quota exceeded"),
        (
            "litellm.InternalServerError: OpenAIException - litellm.APIError: LiteLLM: no 'choices' here",
            "no 'choices' here",
        ),
        ("  many   spaces\n and lines  ", "many spaces and lines"),
        ("Value must be < 2.", "Value must be < 2"),
    ],
)
def test_clean_words_keeps_only_the_providers_words(raw, words):
    assert clean_words(raw) == words


@pytest.mark.parametrize(
    "raw",
    [
        "litellm.BadGatewayError: BadGatewayError: OpenAIException - Error code: 502",
        "Cannot connect to host 127.0.0.1:9 ssl:<ssl.SSLContext object at 0x7f16a2b3c4d0> [Connect call failed]",
        "<html><body><h1>502 Bad Gateway</h1></body></html>",
        "OpenAIException - ",
    ],
)
def test_clean_words_drops_what_is_not_the_providers_words(raw):
    assert clean_words(raw) is None


def test_clean_words_cuts_a_long_message():
    words = clean_words("OpenAIException - " + "word " * 200)
    assert words is not None and len(words) <= 201 and words.endswith("…")
