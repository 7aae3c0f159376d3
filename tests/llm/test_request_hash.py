"""The request hash (what decides a reply, never the key) and the gateway's answered-call
cache that `panel resume` relies on: a request answered before makes no request at all."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import pytest
from pydantic import BaseModel

from panel_cli.config import Defaults, Member
from panel_cli.events import CallFinished
from panel_cli.llm.brief import RequestBrief, quote
from panel_cli.llm.gateway import Gateway
from panel_cli.llm.request_hash import identity, request_hash
from panel_cli.tasks import Task
from tests.fakes.openai_server import reply
from tests.helpers import member

BASE = {
    "model": "openai/gpt-4o",
    "messages": [{"role": "user", "content": "Tea or coffee?"}],
    "temperature": 0.2,
    "max_tokens": 256,
    "api_base": "http://127.0.0.1:9/v1",
}
CONTEXT = [{"role": "system", "content": "Be brief."}]
ANSWERS = {"A": "Tea, for the calm.", "B": "Coffee, for the focus.", "C": "Water."}
VOTE = RequestBrief(task=Task.CONFER_VOTE, question="Tea or coffee?", quoted=quote(ANSWERS), own="A")


def digest(request: dict = BASE, **changes) -> str:
    """The hash of a confer vote of member `m1`, with `changes` to its identity."""
    fields = {"member": "m1", "stage": "vote", "round": 1, "about": None, "context": CONTEXT, "brief": VOTE}
    return request_hash(request, **{**fields, **changes})


class Verdict(BaseModel):
    choice: str


class OtherVerdict(BaseModel):
    choice: str
    confidence: int


def test_the_same_identity_always_hashes_alike():
    """The canonical form (sorted keys, no spacing, every text as its SHA-256) must not drift
    between processes or releases, or a resume would match nothing its earlier run stored."""
    same = RequestBrief(task=Task.CONFER_VOTE, question="Tea or coffee?", quoted=quote(dict(ANSWERS)), own="A")
    assert digest() == digest(json.loads(json.dumps(BASE)), brief=same, context=[dict(CONTEXT[0])])
    assert digest(dict(reversed(list(BASE.items())))) == digest()
    text = hashlib.sha256(b"hi").hexdigest()
    canonical = f'{{"call":["m","answer",null,null],"context":[["user","{text}"]],"model":"m"}}'.encode()
    assert (
        request_hash({"model": "m"}, member="m", stage="answer", context=[{"role": "user", "content": "hi"}])
        == hashlib.sha256(canonical).hexdigest()
    )


def test_the_messages_sent_are_not_read_the_identity_is():
    """The brief stands for the prompt the engine built from it: the expanded prompt (which
    quotes every answer) is never serialised."""
    assert digest({**BASE, "messages": [{"role": "user", "content": "x" * 100_000}]}) == digest()


def test_the_key_and_the_transport_settings_are_not_part_of_it():
    keyed = {**BASE, "api_key": "fake-test-0123456789abcdef", "max_retries": 0}
    assert digest(keyed) == digest({**BASE, "api_key": "fake-other-key-9876543210"}) == digest()


def test_a_field_set_to_none_is_the_same_request_as_one_left_out():
    assert digest({**BASE, "seed": None, "response_format": None, "tools": None}) == digest()


@pytest.mark.parametrize(
    "change",
    [
        {"request": {**BASE, "model": "openai/gpt-4o-mini"}},
        {"request": {**BASE, "api_base": "http://127.0.0.1:10/v1"}},
        {"request": {**BASE, "temperature": 0.3}},
        {"request": {**BASE, "max_tokens": 257}},
        {"request": {**BASE, "seed": 7}},
        {"request": {**BASE, "response_format": Verdict}},
        {"request": {**BASE, "tools": [{"type": "function", "function": {"name": "lookup"}}]}},
        {"member": "m2"},
        {"stage": "answer"},
        {"round": 2},
        {"about": "A"},
        {"context": [{"role": "system", "content": "Be thorough."}]},
        {"context": []},
        {"context": [*CONTEXT, {"role": "user", "content": "Earlier question"}]},
        {"brief": None},
        {"brief": VOTE.model_copy(update={"own": "B"})},
        {"brief": VOTE.model_copy(update={"question": "Tea or coffee? "})},
        {"brief": VOTE.model_copy(update={"task": Task.ANSWER})},
        {"brief": VOTE.model_copy(update={"quoted": quote({**ANSWERS, "B": "Coffee, for the focus!"})})},
        {"brief": VOTE.model_copy(update={"quoted": quote({"A": ANSWERS["A"], "B": ANSWERS["B"]})})},
        {"brief": VOTE.model_copy(update={"quoted": quote({"A": ANSWERS["B"], "B": ANSWERS["A"], "C": "Water."})})},
        {"brief": VOTE.model_copy(update={"options": ("tea", "coffee")})},
    ],
)
def test_everything_that_identifies_the_request_changes_the_hash(change):
    request = change.pop("request", BASE)
    assert digest(request, **change) != digest()


def test_a_schema_hashes_as_the_json_schema_it_stands_for():
    assert digest({**BASE, "response_format": Verdict}) == digest({**BASE, "response_format": Verdict})
    assert digest({**BASE, "response_format": Verdict}) != digest({**BASE, "response_format": OtherVerdict})


def test_text_that_is_not_valid_unicode_still_hashes():
    broken = RequestBrief(question="half a pair: \ud800", quoted=quote({"A": "\udfff"}))
    assert len(digest(brief=broken, context=[{"role": "user", "content": "\ud800"}])) == 64


def test_what_is_serialised_does_not_grow_with_the_texts_quoted():
    """A vote prompt quotes every answer of the round; hashing it whole made a round's hashing
    grow with the square of the panel. The identity holds each text's digest instead, so its
    size is the same for answers of 10 characters and of 100,000."""

    def size(length: int) -> int:
        answers = {chr(ord("A") + i): str(i) * length for i in range(16)}
        brief = RequestBrief(task=Task.CONFER_VOTE, question="q" * length, quoted=quote(answers), own="A")
        context = [{"role": "system", "content": "s" * length}]
        prompt = [{"role": "user", "content": "\n".join(answers.values())}]
        return len(identity({**BASE, "messages": prompt}, member="m1", stage="vote", context=context, brief=brief))

    assert size(10) == size(100_000)


# The gateway ------------------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.events: list = []

    async def __call__(self, event) -> None:
        self.events.append(event)


@dataclass
class Stored:
    """The fields the gateway reads of a stored call (`CallRecord` has them)."""

    response: str | None
    truncated: bool = False
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None


async def first_call(server, who: Member, schema: type[BaseModel] | None = None) -> CallFinished:
    recorder = Recorder()
    gateway = Gateway(recorder, defaults=Defaults(retries=0))
    try:
        await gateway.call(who, [{"role": "user", "content": "Tea or coffee?"}], stage="answer", schema=schema)
    finally:
        await gateway.aclose()
    finished = [event for event in recorder.events if isinstance(event, CallFinished)]
    assert len(finished) == 1
    return finished[0]


async def test_each_finished_call_carries_its_request_hash_and_never_the_key(fake_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "fake-test-secret-0123456789")
    fake_server.script("m", reply("coffee"))
    event = await first_call(fake_server, member(fake_server, system="Be brief.", temperature=0.2))
    assert event.request_hash is not None and not event.reused
    assert fake_server.requests[0].headers["authorization"] == "Bearer fake-test-secret-0123456789"
    expected = request_hash(
        {"model": "openai/m", "api_base": fake_server.url, "temperature": 0.2},
        member="m",
        stage="answer",
        context=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Tea or coffee?"}],
    )
    assert event.request_hash == expected


async def test_an_answered_request_is_taken_from_the_store_without_a_request(fake_server):
    fake_server.script("m", reply('{"choice": "coffee"}', prompt_tokens=30, completion_tokens=5))
    who = member(fake_server)
    earlier = await first_call(fake_server, who, schema=Verdict)
    assert len(fake_server.requests) == 1 and earlier.tokens_in == 30

    recorder = Recorder()
    stored = Stored(earlier.text, tokens_in=earlier.tokens_in, tokens_out=earlier.tokens_out, cost=earlier.cost)
    gateway = Gateway(recorder, defaults=Defaults(retries=0), answered={earlier.request_hash: [stored]})
    try:
        result = await gateway.call(
            who, [{"role": "user", "content": "Tea or coffee?"}], stage="answer", schema=Verdict
        )
        other = await gateway.call(who, [{"role": "user", "content": "Tea, then?"}], stage="answer")
    finally:
        await gateway.aclose()

    assert len(fake_server.requests) == 2, "only the request nobody answered before is made"
    assert fake_server.requests[1].messages[-1]["content"] == "Tea, then?"
    assert result.ok and result.reused and result.parsed == {"choice": "coffee"}
    assert (result.tokens_in, result.tokens_out, result.cost, result.attempts) == (30, 5, None, 0), "as first paid"
    assert not other.reused and other.tokens_in == 30
    assert [event.type for event in recorder.events] == [
        "call_started",
        "call_finished",
        "call_started",
        "call_finished",
    ]
    reused = recorder.events[1]
    assert reused.reused and reused.request_hash == earlier.request_hash and reused.text == earlier.text
    assert reused.messages == earlier.messages and (reused.tokens_in, reused.tokens_out, reused.cost) == (30, 5, None)


async def test_each_stored_reply_answers_one_request_only(fake_server):
    """Asked the same thing three times, with two replies stored (and a call without one): the
    two are used in order, then the third is a real request, so identical requests keep
    getting their own samples."""
    fake_server.script("m", reply("fresh"))
    who = member(fake_server)
    digest = request_hash(
        {"model": "openai/m", "api_base": fake_server.url},
        member="m",
        stage="answer",
        context=[{"role": "user", "content": "Again?"}],
    )
    gateway = Gateway(
        Recorder(), defaults=Defaults(retries=0), answered={digest: [Stored(None), Stored("first"), Stored("second")]}
    )
    try:
        results = [await gateway.call(who, [{"role": "user", "content": "Again?"}], stage="answer") for _ in range(3)]
    finally:
        await gateway.aclose()
    assert [(result.text, result.reused) for result in results] == [("first", True), ("second", True), ("fresh", False)]
    assert len(fake_server.requests) == 1


async def test_a_reused_truncated_reply_stays_marked_and_warned(fake_server):
    recorder = Recorder()
    who = member(fake_server)
    digest = request_hash(
        {"model": "openai/m", "api_base": fake_server.url},
        member="m",
        stage="answer",
        context=[{"role": "user", "content": "Long?"}],
    )
    gateway = Gateway(recorder, defaults=Defaults(retries=0), answered={digest: [Stored("x" * 1000, truncated=True)]})
    try:
        result = await gateway.call(who, [{"role": "user", "content": "Long?"}], stage="answer")
    finally:
        await gateway.aclose()
    assert fake_server.requests == []
    assert result.reused and result.truncated
    assert [event.type for event in recorder.events] == ["call_started", "call_finished", "warning"]
