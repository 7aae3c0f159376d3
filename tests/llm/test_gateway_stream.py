"""The gateway's streamed calls against the fake server's server-sent events, through
litellm's real code path: which calls stream, that a streamed call ends exactly as the same
call unstreamed, the deadline and the retries mid-stream, and the text-so-far events."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from panel_cli.config import Defaults, Member
from panel_cli.events import CallTextGrew, EventBus, shown_so_far
from panel_cli.llm.gateway import Gateway
from panel_cli.llm.stream import Piece, TextGrowth, read_pieces
from panel_cli.llm.tool_calls import ToolSet
from panel_cli.untrusted import without_controls
from tests.fakes.openai_server import error, hang, malformed, malformed_json, reply, reply_json, reset_mid_body
from tests.helpers import eventually, member

LONG = "The quick brown fox jumps over the lazy dog, then naps in the sun for an hour."


class Recorder:
    def __init__(self) -> None:
        self.events: list = []

    async def __call__(self, event) -> None:
        self.events.append(event)


class Follower(Recorder):
    """A subscriber that draws text as it grows, as the live view does."""

    follows_text = True


async def call(gateway: Gateway, who: Member, **kwargs):
    return await gateway.call(who, [{"role": "user", "content": "hello"}], stage="answer", **kwargs)


def make_gateway(emit, *, stream: bool = True, **defaults) -> Gateway:
    return Gateway(emit, defaults=Defaults(**({"retries": 0} | defaults)), stream=stream)


def grew(events: list) -> list[str]:
    return [event.text for event in events if isinstance(event, CallTextGrew)]


async def test_a_streamed_call_ends_exactly_as_the_same_call_unstreamed(fake_server):
    fake_server.script("m", reply(LONG, prompt_tokens=12, completion_tokens=17, chunk_chars=5))
    results = []
    for stream in (True, False):
        recorder = Recorder()
        gateway = make_gateway(recorder, stream=stream)
        results.append((await call(gateway, member(fake_server)), recorder.events[-1]))
        await gateway.aclose()
    (streamed, streamed_event), (plain, plain_event) = results
    assert [request.streamed for request in fake_server.requests] == [True, False]
    assert fake_server.requests[0].body["stream_options"] == {"include_usage": True}
    assert streamed.text == plain.text == LONG
    assert (streamed.tokens_in, streamed.tokens_out) == (plain.tokens_in, plain.tokens_out) == (12, 17)
    assert streamed_event.request_hash == plain_event.request_hash
    assert streamed_event.type == "call_finished" and streamed_event.text == LONG


async def test_text_grows_in_order_first_piece_at_once(fake_server):
    fake_server.script("m", reply(LONG, chunk_chars=4, spacing=0.03))
    recorder = Recorder()
    gateway = make_gateway(recorder)
    result = await call(gateway, member(fake_server))
    await gateway.aclose()
    texts = grew(recorder.events)
    assert texts[0] == LONG[:4]
    assert all(LONG.startswith(text) for text in texts)
    assert [len(text) for text in texts] == sorted({len(text) for text in texts})
    # Throttled: 21 pieces 30 ms apart (0.6 s) are reported about every 100 ms, not 21 times;
    # and more than once, unless the machine stalled the reader for half a second.
    assert 2 <= len(texts) < -(-len(LONG) // 4)
    assert [event.type for event in recorder.events][0] == "call_started"
    assert recorder.events[-1].type == "call_finished" and result.text == LONG


async def test_a_structured_call_does_not_stream(fake_server):
    class Pick(BaseModel):
        choice: str

    fake_server.script("m", reply_json({"choice": "A"}))
    recorder = Recorder()
    gateway = make_gateway(recorder)
    result = await call(gateway, member(fake_server), schema=Pick)
    await gateway.aclose()
    assert result.parsed == {"choice": "A"}
    assert [request.streamed for request in fake_server.requests] == [False]
    assert grew(recorder.events) == []


async def test_a_call_that_may_use_tools_does_not_stream(fake_server):
    fake_server.script("m", reply("no tool needed"))
    recorder = Recorder()
    gateway = make_gateway(recorder)
    spec = {
        "type": "function",
        "function": {"name": "look", "description": "look", "parameters": {"type": "object", "properties": {}}},
    }
    gateway.equip(toolbox=object(), offered={"m": ToolSet(specs=[spec], routes={})})  # type: ignore[arg-type]
    result = await call(gateway, member(fake_server), tools=True)
    await gateway.aclose()
    assert result.text == "no tool needed"
    assert [request.streamed for request in fake_server.requests] == [False]


async def test_without_the_stream_flag_nothing_streams(fake_server):
    recorder = Recorder()
    gateway = make_gateway(recorder, stream=False)
    await call(gateway, member(fake_server))
    await gateway.aclose()
    assert [request.streamed for request in fake_server.requests] == [False]
    assert grew(recorder.events) == []


async def test_the_deadline_holds_mid_stream(fake_server):
    # 21 pieces 0.2 s apart: the first one well inside the 2 s timeout, the last well past it.
    fake_server.script("m", reply(LONG, chunk_chars=4, spacing=0.2))
    recorder = Recorder()
    gateway = make_gateway(recorder)
    result = await call(gateway, member(fake_server, timeout=2.0))
    await gateway.aclose()
    assert not result.ok and result.error_kind == "timeout"
    assert result.error == "no reply within 2.0s"
    assert grew(recorder.events)[0] == LONG[:4]
    assert recorder.events[-1].type == "call_failed"
    stream = fake_server.streams[0]
    assert stream.first_token_at is not None and not stream.finished
    # The gateway hung up: the server sees it at its next piece.
    await eventually(lambda: fake_server.closed_early, "the server to see the hang-up")
    assert fake_server.closed_early == ["m"]


async def test_a_slow_first_token_times_out(fake_server):
    fake_server.script("m", reply("too late", latency=5.0))
    recorder = Recorder()
    gateway = make_gateway(recorder, timeout=0.4)
    result = await call(gateway, member(fake_server))
    await gateway.aclose()
    assert (result.error_kind, result.error) == ("timeout", "no reply within 0.4s")
    assert grew(recorder.events) == []


async def test_a_connection_lost_mid_stream_fails_as_it_does_unstreamed(fake_server):
    fake_server.script("m", reset_mid_body(), reply("never asked"))
    recorder = Recorder()
    gateway = make_gateway(recorder, retries=1)
    result = await call(gateway, member(fake_server))
    await gateway.aclose()
    assert (result.error_kind, result.error, result.attempts) == (
        "malformed",
        "the connection broke in the middle of the reply",
        1,
    )
    assert grew(recorder.events) == ["this rep"]
    assert recorder.events[-1].type == "call_failed"


async def test_an_error_before_the_stream_is_retried_and_the_retry_streams(fake_server):
    fake_server.script("m", error(503, "overloaded"), reply("back"))
    recorder = Recorder()
    gateway = make_gateway(recorder, retries=1)
    result = await call(gateway, member(fake_server))
    await gateway.aclose()
    assert result.ok and result.text == "back" and result.attempts == 2
    assert grew(recorder.events) == ["back"]
    assert [request.streamed for request in fake_server.requests] == [True, True]


async def test_a_hanging_stream_times_out(fake_server):
    fake_server.script("m", hang())
    gateway = make_gateway(Recorder())
    result = await call(gateway, member(fake_server, timeout=0.3))
    await gateway.aclose()
    assert result.error_kind == "timeout"


async def test_an_empty_stream_is_malformed(fake_server):
    fake_server.script("m", reply("   "))
    gateway = make_gateway(Recorder())
    result = await call(gateway, member(fake_server))
    await gateway.aclose()
    assert (result.error_kind, result.error) == ("malformed", "the reply was empty")


async def test_the_size_cap_holds_and_the_tokens_are_counted_whole(fake_server):
    fake_server.script("m", reply("x" * 5000, chunk_chars=70, completion_tokens=1250))
    recorder = Recorder()
    gateway = make_gateway(recorder, max_response_chars=1000)
    result = await call(gateway, member(fake_server))
    await gateway.aclose()
    assert result.truncated and result.text == "x" * 1000 and result.tokens_out == 1250
    assert all(len(text) <= 1001 for text in grew(recorder.events))
    await eventually(lambda: fake_server.streams[0].finished, "the server to send the stream to its end")


async def test_growth_goes_only_to_subscribers_that_follow_text_and_takes_no_seq(fake_server):
    fake_server.script("m", reply(LONG, chunk_chars=10, spacing=0.03))
    store, view = Recorder(), Follower()
    bus = EventBus("run1", [store, view])
    gateway = make_gateway(bus.emit)
    await call(gateway, member(fake_server))
    await gateway.aclose()
    assert [event.type for event in store.events] == ["call_started", "call_finished"]
    assert [event.seq for event in store.events] == [1, 2]
    growth = [event for event in view.events if isinstance(event, CallTextGrew)]
    assert growth and all(event.seq == 1 and event.run_id == "run1" for event in growth)


async def test_a_secret_split_across_pieces_never_reaches_a_follower(fake_server):
    secret = "fake-test-0123456789abcdef"
    text = f"Here is the key {secret} as requested."
    # The first piece ends inside the secret; pieces come 0.5 s apart, so each is reported
    # (the reports are at most one every 0.1 s).
    fake_server.script("m", reply(text, chunk_chars=24, spacing=0.5))
    store, view = Recorder(), Follower()
    bus = EventBus("run1", [store, view], secrets=[secret])
    gateway = make_gateway(bus.emit)
    await call(gateway, member(fake_server))
    await gateway.aclose()
    shown = grew(view.events)
    assert len(shown) >= 2
    assert shown[0] == "Here is the key "
    for text_so_far in shown:
        assert "fake-test-key" not in text_so_far and "0123" not in text_so_far
    assert "[redacted]" in shown[-1]
    assert store.events[-1].text == "Here is the key [redacted] as requested."


def test_shown_so_far_holds_back_the_start_of_a_secret():
    secrets = ["abcdef12"]
    assert shown_so_far("key: abc", secrets) == "key: "
    assert shown_so_far("key: abcdef12 and", secrets) == "key: [redacted] and"
    assert shown_so_far("key: abx", secrets) == "key: abx"
    assert shown_so_far("plain", []) == "plain"


async def test_text_growth_reports_the_first_text_at_once_then_at_most_every_interval():
    recorder = Recorder()
    growth = TextGrowth(recorder, {"call_id": "c", "member": "m", "model": "x", "stage": "answer"}, interval=60)
    for text in ("a", "ab", "abc"):
        if growth.due():
            await growth.report(text)
    growth.restart()
    assert growth.due()
    assert grew(recorder.events) == ["a"]


@pytest.mark.parametrize("chunk_chars", [1, 3, 1000])
async def test_any_piece_size_gives_the_same_text(fake_server, chunk_chars):
    fake_server.script("m", reply(LONG, chunk_chars=chunk_chars))
    gateway = make_gateway(Recorder())
    result = await call(gateway, member(fake_server))
    await gateway.aclose()
    assert result.text == LONG


async def test_a_call_cancelled_mid_stream_reports_it_and_hangs_up(fake_server):
    fake_server.script("m", reply(LONG, chunk_chars=4, spacing=0.2))
    recorder = Recorder()
    gateway = make_gateway(recorder)
    task = asyncio.create_task(call(gateway, member(fake_server)))
    await eventually(lambda: grew(recorder.events), "the first words")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await gateway.aclose()
    assert recorder.events[-1].type == "call_failed" and recorder.events[-1].kind == "cancelled"
    await eventually(lambda: fake_server.closed_early, "the server to see the hang-up")
    assert fake_server.closed_early == ["m"]


async def pieces_of(texts: list[str]):
    for text in texts:
        yield Piece(text)


@pytest.mark.parametrize(
    "texts",
    [
        ["plain ", "words ", "only"],
        ["before \x1b", "[2J after ", "and more"],  # a sequence split across two pieces
        ["a line\r", "\nthen \x1b]52;c;", "clip\x07 end", " tail"],
        ["\x9b", "31m red", " and plain"],
    ],
)
async def test_each_text_so_far_is_cleaned_as_the_whole_text_would_be(texts):
    """Cleaned from where a control may begin only, the text shown is the one `without_controls`
    makes of everything so far, at every report."""
    recorder = Recorder()
    growth = TextGrowth(recorder, {"call_id": "c", "member": "m", "model": "x", "stage": "answer"}, interval=0)
    reply = await read_pieces(pieces_of(texts), growth, cap=1000)

    assert grew(recorder.events) == [without_controls("".join(texts[: index + 1])) for index in range(len(texts))]
    assert reply.text == without_controls("".join(texts))


async def test_an_endpoint_that_answers_a_stream_with_one_whole_reply_still_answers(fake_server):
    """A server that cannot stream answers `stream: true` with the whole completion as plain
    JSON: the call reads it whole and ends exactly as it would have streamed, its text shown
    at once. It reads what litellm's stream keeps of the reply (the provider's headers in
    `_hidden_params`, the unread response in `completion_stream.response`): a litellm release
    that moves either fails this test."""
    fake_server.streaming = False
    fake_server.script("m", reply(LONG, prompt_tokens=12, completion_tokens=17))
    recorder = Recorder()
    gateway = make_gateway(recorder)
    result = await call(gateway, member(fake_server))
    await gateway.aclose()
    assert [request.streamed for request in fake_server.requests] == [True] and fake_server.streams == []
    assert (result.ok, result.text, result.tokens_in, result.tokens_out) == (True, LONG, 12, 17)
    assert grew(recorder.events) == [LONG]
    assert recorder.events[-1].type == "call_finished" and recorder.events[-1].text == LONG


async def test_a_whole_reply_to_a_stream_is_cut_and_counted_as_a_streamed_one(fake_server):
    fake_server.streaming = False
    fake_server.script("m", reply("x" * 5000, completion_tokens=1250))
    gateway = make_gateway(Recorder(), max_response_chars=1000)
    result = await call(gateway, member(fake_server))
    await gateway.aclose()
    assert result.truncated and result.text == "x" * 1000 and result.tokens_out == 1250


@pytest.mark.parametrize(
    ("step", "problem"),
    [
        (reply("   "), "the reply was empty"),
        (malformed("not json at all"), "its body was not JSON"),
        (malformed_json(), "its body held no reply"),
    ],
)
async def test_a_whole_reply_that_cannot_be_used_says_the_endpoint_did_not_stream(fake_server, step, problem):
    fake_server.streaming = False
    fake_server.script("m", step)
    gateway = make_gateway(Recorder())
    result = await call(gateway, member(fake_server))
    await gateway.aclose()
    assert (result.error_kind, result.error) == (
        "malformed",
        f"the endpoint did not stream (it answered with application/json) and {problem}; "
        "set `stream: false` on this member, or run with --no-stream",
    )


async def test_a_member_with_stream_false_is_never_asked_for_a_stream(fake_server):
    recorder = Recorder()
    gateway = make_gateway(recorder)
    result = await call(gateway, member(fake_server, stream=False))
    await gateway.aclose()
    assert result.ok and [request.streamed for request in fake_server.requests] == [False]
    assert grew(recorder.events) == []
