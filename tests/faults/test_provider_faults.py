"""Each way a provider can fail, one row per fault, end to end: the fake server, litellm's
real code path, the gateway. What a row asserts is what a person or a protocol relies on:
the kind, how many requests were made, the sentence shown, and that nothing raises."""

from __future__ import annotations

import asyncio
import json
import random
import re
import sqlite3
import warnings
from collections.abc import Callable
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from panel_cli.config import Defaults, Member
from panel_cli.events import BaseEvent
from panel_cli.llm.budget import Budget
from panel_cli.llm.gateway import Gateway
from panel_cli.llm.key_hosts import endpoint_of, key_source
from panel_cli.llm.litellm_setup import load_litellm
from panel_cli.llm.result import CallResult
from panel_cli.protocols.confer.engine import confer
from panel_cli.protocols.delphi.engine import delphi
from panel_cli.protocols.ensemble.engine import ensemble
from panel_cli.protocols.orchestrate.engine import orchestrate
from panel_cli.protocols.supervise.engine import supervise
from panel_cli.protocols.vote.engine import vote
from tests.fakes.openai_server import (
    RecordedRequest,
    Step,
    after,
    error,
    hang,
    invalid_utf8,
    malformed,
    malformed_json,
    refused_url,
    reply,
    reset_mid_body,
    responder,
)
from tests.helpers import cli, member
from tests.protocols.conftest import make_panel, prompt_of, task_of, vote_json
from tests.protocols.test_supervise_engine import supervised_panel, worker
from tests.protocols.test_vote_engine import ballot, vote_panel

HELLO = [{"role": "user", "content": "hello"}]


class NoWait(random.Random):
    """Backoff that never sleeps, so a retry row costs no time."""

    def uniform(self, a: float, b: float) -> float:
        return a


class Recorder:
    def __init__(self) -> None:
        self.events: list[Any] = []

    async def __call__(self, event: BaseEvent) -> None:
        self.events.append(event)

    def of(self, kind: str) -> list[Any]:
        return [event for event in self.events if event.type == kind]


async def ask(gateway: Gateway, who: Member, **kwargs: Any) -> CallResult:
    return await gateway.call(who, HELLO, stage="answer", **kwargs)


@pytest.fixture
async def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
async def gateway(recorder: Recorder):
    gw = Gateway(recorder, defaults=Defaults(retries=2), rng=NoWait())
    yield gw
    await gw.aclose()


def assert_clean(message: str | None) -> None:
    assert message
    for bad in ("0x", "<", "Exception -", "litellm", "Error:", "\n"):
        assert bad not in message, f"{bad!r} in {message!r}"


# -- rows that already worked and must keep working --------------------------------------


async def test_500_then_success_is_retried(fake_server, gateway):
    fake_server.script("m", error(500, "kaput"), reply("fine"))
    result = await ask(gateway, member(fake_server))
    assert result.ok and result.text == "fine" and result.attempts == 2
    assert len(fake_server.requests_for("m")) == 2


async def test_a_hang_is_a_timeout_and_is_not_retried(fake_server, gateway, recorder):
    fake_server.script("m", hang())
    result = await ask(gateway, member(fake_server, timeout=0.3))
    assert (result.ok, result.error_kind, result.attempts) == (False, "timeout", 1)
    assert result.error == "no reply within 0.3s"
    assert len(fake_server.requests_for("m")) == 1
    assert "m" not in gateway.excluded


@pytest.mark.parametrize(
    ("step", "message"),
    [(reply(""), "the reply was empty"), (malformed(""), "the reply was not valid JSON")],
    ids=["empty-content", "empty-body"],
)
async def test_an_empty_reply_is_malformed_and_not_retried(fake_server, gateway, step, message):
    fake_server.script("m", step)
    result = await ask(gateway, member(fake_server))
    assert (result.error_kind, result.error, result.attempts) == ("malformed", message, 1)
    assert len(fake_server.requests_for("m")) == 1


# -- 1. a Retry-After we cannot read ------------------------------------------------------


@pytest.mark.parametrize("value", ["soon", "0x10", "1,5", "Mon, 99 Foo 2024 25:61:00 GMT", "inf", "nan", "-5"])
async def test_a_malformed_retry_after_falls_back_to_backoff(fake_server, gateway, value):
    fake_server.script("flaky", error(429, "slow down", retry_after=value), reply("flaky answer"))
    fake_server.script("a", reply("a answer"))
    fake_server.script("b", reply("b answer"))
    results = await asyncio.gather(*(ask(gateway, member(fake_server, name)) for name in ("flaky", "a", "b")))
    assert [(r.ok, r.text, r.attempts) for r in results] == [
        (True, "flaky answer", 2),
        (True, "a answer", 1),
        (True, "b answer", 1),
    ]
    assert len(fake_server.requests_for("flaky")) == 2


# -- 2. waits are bounded -------------------------------------------------------------------


@pytest.mark.parametrize("retry_after", [3600, "Wed, 21 Oct 2099 07:28:00 GMT"], ids=["seconds", "date"])
async def test_a_retry_after_beyond_the_cap_fails_now(fake_server, gateway, retry_after):
    fake_server.script("m", error(429, "slow down", retry_after=retry_after), reply("too late"))
    result = await ask(gateway, member(fake_server))
    assert (result.error_kind, result.attempts) == ("rate_limited", 1)
    assert re.fullmatch(r"rate limited; the provider asked to wait \d+s, longer than this call may take", result.error)
    assert len(fake_server.requests_for("m")) == 1


async def test_a_retry_after_beyond_the_call_budget_fails_now(fake_server, gateway):
    # Per-call timeout 5 s and 2 retries: the call may take 15 s in all, so a wait of 20 s
    # (under the 60 s cap) cannot fit. (The timeout leaves the one request room on a loaded machine.)
    fake_server.script("m", error(429, "slow down", retry_after=20), reply("too late"))
    result = await ask(gateway, member(fake_server, timeout=5))
    assert (result.error_kind, result.attempts) == ("rate_limited", 1)
    assert result.error == "rate limited; the provider asked to wait 20s, longer than this call may take"


async def test_the_huge_retry_after_with_a_short_timeout_fails_now(fake_server, gateway):
    fake_server.script("m", error(429, "slow down", retry_after=3600))
    result = await ask(gateway, member(fake_server, timeout=5))
    assert (result.error_kind, result.attempts) == ("rate_limited", 1)
    assert result.error == "rate limited; the provider asked to wait 3600s, longer than this call may take"


async def test_retries_stop_at_the_call_budget(fake_server, gateway):
    # Per-call timeout 1.5 s and 3 retries: a budget of 6 s from the call's first request, and
    # every reply asks for a wait of 2.5 s. Two waits fit when requests are quick (ending near
    # 2.5 s and 5 s), fewer when a loaded machine makes them slow, a third never: the budget,
    # not the retry count, ends the call. The rules are checked on the request times the fake
    # server records (time.monotonic, the event loop's clock too), not on a count.
    fake_server.script("m", error(429, "slow down", retry_after=2.5))
    loop = asyncio.get_running_loop()
    started = loop.time()
    result = await ask(gateway, member(fake_server, timeout=1.5, retries=3))
    ended = loop.time()
    sent = [request.received_at for request in fake_server.requests_for("m")]

    assert len(sent) <= result.attempts < 4  # one more if the budget ran out before a request went
    # Every retry waited as long as the provider asked,
    assert all(later - earlier >= 2.5 for earlier, later in zip(sent, sent[1:], strict=False))
    # and every wait taken ended inside the budget (a wait starts after its request arrived;
    # the budget starts before the first request arrives).
    assert all(arrived + 2.5 < sent[0] + 6.0 for arrived in sent[:-1])
    # The call ends refusing a wait that would end outside the budget (refused by `ended`; the
    # budget ends no sooner than `started` + 6), or, on a slow machine, with its last attempt
    # timed out, cut to what was left of the budget.
    assert result.error_kind in ("rate_limited", "timeout")
    if result.error_kind == "rate_limited":
        assert result.error == "rate limited; the provider asked to wait 2.5s, longer than this call may take"
        assert ended + 2.5 >= started + 6.0


# -- 3. a reply too large -------------------------------------------------------------------


async def test_a_huge_reply_is_cut_before_anyone_sees_it(fake_server, recorder):
    fake_server.script("m", reply("x" * 1_000_000))
    gw = Gateway(recorder, defaults=Defaults(max_response_chars=5_000), rng=NoWait())
    try:
        result = await ask(gw, member(fake_server))
    finally:
        await gw.aclose()
    assert result.ok and result.truncated and len(result.text) == 5_000
    (finished,) = recorder.of("call_finished")
    assert finished.truncated and len(finished.text) <= 5_000
    (warning,) = recorder.of("warning")
    assert (warning.member, warning.message) == ("m", "its reply was cut at 5,000 characters")


async def test_a_reply_within_the_cap_is_whole(fake_server, recorder):
    fake_server.script("m", reply("y" * 5_000))
    gw = Gateway(recorder, defaults=Defaults(max_response_chars=5_000))
    try:
        result = await ask(gw, member(fake_server))
    finally:
        await gw.aclose()
    assert result.ok and not result.truncated and len(result.text) == 5_000
    assert not recorder.of("warning") and not recorder.of("call_finished")[0].truncated


# -- 4. a body broken in transit is malformed, and asked once --------------------------------


async def test_a_connection_reset_mid_body_is_malformed_and_not_retried(fake_server, gateway, recorder):
    fake_server.script("m", reset_mid_body(), reply("never asked"))
    result = await ask(gateway, member(fake_server))
    assert (result.error_kind, result.attempts) == ("malformed", 1)
    assert re.fullmatch(r"the connection broke in the middle of the reply \(40 of \d+ bytes arrived\)", result.error)
    assert len(fake_server.requests_for("m")) == 1
    (failed,) = recorder.of("call_failed")
    assert "ClientPayloadError" in failed.detail and "m" not in gateway.excluded


async def test_a_body_that_is_not_utf8_is_malformed_and_not_retried(fake_server, gateway):
    fake_server.script("m", invalid_utf8(), reply("never asked"))
    result = await ask(gateway, member(fake_server))
    assert (result.error_kind, result.error, result.attempts) == ("malformed", "the reply was not valid UTF-8", 1)
    assert len(fake_server.requests_for("m")) == 1


# -- 5. one clean sentence per kind; the raw text goes to the detail -------------------------


def sent_by(who: Member) -> str:
    """What a refused key or request adds: who called where, with the key of which variable."""
    return f" ({who.name} called {endpoint_of(who)} with {key_source(who)})"


@pytest.mark.parametrize(
    ("step", "kind", "message"),
    [
        (
            error(429, "Rate limit reached for requests"),
            "rate_limited",
            "rate limited (429): Rate limit reached for requests",
        ),
        (
            error(
                401,
                "Incorrect API key provided: sk-abc***xyz. You can find your API key at https://platform.openai.com/account/api-keys.",
            ),
            "auth",
            "the provider rejected the key (401): Incorrect API key provided: sk-abc***xyz",
        ),
        (
            error(403, "Country, region, or territory not supported"),
            "auth",
            "the provider denied access (403): Country, region, or territory not supported",
        ),
        (
            error(404, "The model `m` does not exist or you do not have access to it."),
            "not_found",
            "model not found (404): The model `m` does not exist or you do not have access to it",
        ),
        (
            error(400, "Invalid 'temperature': decimal above maximum value"),
            "bad_request",
            "the provider rejected the request (400): Invalid 'temperature': decimal above maximum value",
        ),
        (
            error(500, "The server had an error while processing your request. Sorry about that!"),
            "server",
            "the provider failed (500): The server had an error while processing your request",
        ),
        (
            malformed("<html><body><h1>502 Bad Gateway</h1></body></html>", status=502),
            "server",
            "the provider failed (502)",
        ),
        (malformed(), "malformed", "the reply was not valid JSON"),
        (malformed_json(), "malformed", "the reply had no choices"),
    ],
    ids=["429", "401", "403", "404", "400", "500", "502-html", "not-json", "no-choices"],
)
async def test_each_kind_has_one_clean_sentence(fake_server, recorder, step, kind, message):
    fake_server.script("m", step)
    if kind in ("auth", "bad_request"):
        message += sent_by(member(fake_server))
    gw = Gateway(recorder, defaults=Defaults(retries=0))
    try:
        result = await ask(gw, member(fake_server))
    finally:
        await gw.aclose()
    assert (result.error_kind, result.error) == (kind, message)
    assert_clean(result.error)
    (failed,) = recorder.of("call_failed")
    assert failed.message == message
    assert "OpenAIException" in failed.detail


async def test_a_timeout_has_one_clean_sentence(fake_server, gateway, recorder):
    fake_server.script("m", hang())
    result = await ask(gateway, member(fake_server, timeout=0.2))
    assert (result.error_kind, result.error) == ("timeout", "no reply within 0.2s")
    assert_clean(recorder.of("call_failed")[0].message)


async def test_a_refused_connection_has_one_clean_sentence(gateway, recorder):
    with refused_url() as url:
        port = url.rsplit(":", 1)[1].split("/")[0]
        result = await ask(gateway, Member(name="down", model="openai/down", api_base=url))
    assert result.error_kind == "connection" and result.attempts == 3
    assert result.error == f"could not connect to 127.0.0.1:{port} (connection refused)"
    assert_clean(result.error)
    (failed,) = recorder.of("call_failed")
    assert "ConnectionRefusedError" in failed.detail


# -- 6. a member that fails for good is not called again -------------------------------------


@pytest.mark.parametrize(
    ("step", "kind", "reason"),
    [
        (error(401, "bad key"), "auth", "auth: the provider rejected the key (401): bad key"),
        (error(403, "no access"), "auth", "auth: the provider denied access (403): no access"),
        (error(404, "no such model"), "not_found", "not_found: model not found (404): no such model"),
        (error(400, "bad request"), "bad_request", "bad_request: the provider rejected the request (400): bad request"),
    ],
    ids=["401", "403", "404", "400"],
)
async def test_a_member_that_fails_for_good_is_skipped_afterwards(fake_server, gateway, recorder, step, kind, reason):
    fake_server.script("m", step, reply("never asked"))
    if kind in ("auth", "bad_request"):
        reason += sent_by(member(fake_server))
    first = await ask(gateway, member(fake_server), round=0)
    later = await ask(gateway, member(fake_server), round=1, about="Answer A")
    assert first.error_kind == kind and not first.skipped
    assert gateway.excluded == {"m": reason}
    assert len(fake_server.requests_for("m")) == 1
    assert (later.ok, later.skipped, later.error_kind, later.attempts) == (False, True, kind, 0)
    assert later.error == f"not called: failed for good earlier ({reason})"
    (warning,) = recorder.of("warning")
    assert (warning.member, warning.message) == ("m", f"failed for good ({reason}); it is not called again in this run")
    (skipped,) = recorder.of("member_skipped")
    assert (skipped.member, skipped.model, skipped.stage, skipped.round, skipped.about, skipped.reason) == (
        "m",
        "openai/m",
        "answer",
        1,
        "Answer A",
        reason,
    )
    assert [e.type for e in recorder.events].count("call_started") == 1


async def test_a_refused_member_is_skipped_afterwards(gateway, recorder):
    with refused_url() as url:
        down = Member(name="down", model="openai/down", api_base=url)
        await ask(gateway, down)
        later = await ask(gateway, down)
    assert later.skipped and later.error_kind == "connection"
    assert gateway.excluded["down"].startswith("connection: could not connect to 127.0.0.1:")
    assert len(recorder.of("call_failed")) == 1 and len(recorder.of("member_skipped")) == 1


async def test_concurrent_failures_warn_once(fake_server, gateway, recorder):
    fake_server.script("m", after(lambda: fake_server.max_in_flight >= 3, error(401, "bad key")))  # all three at once
    await asyncio.gather(*(ask(gateway, member(fake_server)) for _ in range(3)))
    assert len(recorder.of("call_failed")) == 3
    assert len(recorder.of("warning")) == 1 and list(gateway.excluded) == ["m"]


@pytest.mark.parametrize(
    ("step", "fields"),
    [(error(500, "kaput"), {}), (error(429, "slow"), {}), (hang(), {"timeout": 0.2}), (reset_mid_body(), {})],
    ids=["500", "429", "timeout", "reset"],
)
async def test_a_passing_failure_does_not_exclude(fake_server, recorder, step: Step, fields):
    fake_server.script("m", step, reply("back again"))
    gw = Gateway(recorder, defaults=Defaults(retries=0), rng=NoWait())
    try:
        first = await ask(gw, member(fake_server, **fields))
        second = await ask(gw, member(fake_server))  # the same member; its reply need not beat 0.2 s
    finally:
        await gw.aclose()
    assert not first.ok and second.ok and second.text == "back again"
    assert gw.excluded == {} and not recorder.of("member_skipped")


async def test_confer_asks_a_rejected_member_once(fake_server, run_protocol):
    def answer(request):
        return vote_json("A", 80, "revised") if task_of(request) == "confer.vote" else "an answer"

    fake_server.script("ann-model", responder(answer))
    fake_server.script("bob-model", responder(answer))
    fake_server.script("bad-model", error(401, "Incorrect API key provided"))
    panel = make_panel(fake_server, ["ann", "bob", "bad"], max_rounds=3, until_convergence=False)
    result, events = await run_protocol(confer, panel)
    assert len(result.rounds) == 3
    assert len(fake_server.requests_for("bad-model")) == 1
    assert len(fake_server.requests_for("ann-model")) == len(fake_server.requests_for("bob-model")) == 4
    skipped = events.of("member_skipped")
    assert [(e.member, e.round) for e in skipped] == [("bad", 1), ("bad", 2), ("bad", 3)]
    bad = next(each for each in panel.members if each.name == "bad")
    reason = f"auth: the provider rejected the key (401): Incorrect API key provided{sent_by(bad)}"
    assert {e.reason for e in skipped} == {reason}
    warnings = [e for e in events.of("warning") if e.member == "bad"]
    assert [w.message for w in warnings] == [f"failed for good ({reason}); it is not called again in this run"]


# -- 7. a structured reply nested deeper than any object we ask for -----------------------

# 10 KB of brackets inside an object: json.loads recurses once per level and gives up far
# sooner than this.
DEEP = '{"answer": ' + "[" * 5000 + "]" * 5000 + "}"


def deep_on(task: str, otherwise: Callable[[RecordedRequest], str]) -> Step:
    """A member that replies DEEP whenever it is asked for `task`."""
    return responder(lambda request: DEEP if task_of(request) == task else otherwise(request))


def warned(events: Any, member: str) -> list[str]:
    return [w.message for w in events.of("warning") if w.member == member]


async def test_a_deep_confer_vote_is_that_voters_malformed_vote(fake_server, run_protocol):
    fake_server.script("ann-model", responder(lambda r: vote_json("A", 80, "") if task_of(r) == "confer.vote" else "a"))
    fake_server.script("bob-model", deep_on("confer.vote", lambda r: "b"))
    result, events = await run_protocol(confer, make_panel(fake_server, ["ann", "bob"], max_rounds=1))
    bob = next(vote for vote in result.rounds[0].votes if vote.voter == "bob")
    assert bob.fallback and result.final_answer == "a"
    assert warned(events, "bob") == [
        "gave no usable vote (the reply's JSON is nested deeper than 64 levels); it keeps its own answer at confidence 50"
    ]


async def test_a_deep_ballot_is_read_as_text_and_abstains(fake_server, run_protocol):
    fake_server.default(reply(ballot("MySQL")))
    fake_server.script("evil-model", reply(DEEP))
    result, events = await run_protocol(vote, vote_panel(fake_server, ["ann", "evil"]))
    assert result.winner == "MySQL" and result.abstained == ["evil"]
    assert "named no option; recorded as an abstention" in warned(events, "evil")


async def test_a_deep_critic_verdict_is_asked_once_more_then_ends_the_loop(fake_server, run_protocol):
    fake_server.script("writer-model", worker("the announcement"))
    fake_server.script("boss-model", reply(DEEP))
    result, events = await run_protocol(supervise, supervised_panel(fake_server, {"writer": "Write it."}))
    (only,) = result.rounds
    assert (result.loop_end, only.review.attempts) == ("no_verdict", 2)
    assert only.review.problem == "the reply's JSON is nested deeper than 64 levels"
    assert result.final_answer == "the consolidated answer"


async def test_a_deep_plan_is_an_invalid_plan_and_the_planner_tries_again(fake_server, run_protocol):
    good = json.dumps({"subtasks": [{"task_id": "t1", "worker": "research", "title": "t", "description": "d"}]})
    plans = iter([DEEP, good])
    fake_server.script("boss-model", responder(lambda r: next(plans) if task_of(r) == "plan" else "The answer."))
    fake_server.script("research-model", reply("found it"))
    panel = make_panel(fake_server, ["boss", "research"], planner="boss", chairman="boss")
    result, _ = await run_protocol(orchestrate, panel)
    assert [(a.accepted, a.error) for a in result.plan_attempts] == [
        (False, "the reply's JSON is nested deeper than 64 levels"),
        (True, None),
    ]
    assert result.final_answer == "The answer."


async def test_a_deep_delphi_revision_counts_as_its_text(fake_server, run_protocol):
    def expert(request: RecordedRequest) -> str:
        task = task_of(request)
        return "the synthesis" if task == "delphi.synthesis" else DEEP if task == "delphi.contribution" else "first"

    fake_server.script("ann-model", responder(expert))
    fake_server.script("bob-model", responder(lambda r: "the synthesis" if task_of(r) == "delphi.synthesis" else "b"))
    panel = make_panel(fake_server, ["ann", "bob"], max_rounds=2, until_convergence=False)
    result, events = await run_protocol(delphi, panel)
    ann = next(c for c in result.rounds[1].contributions if c.expert == "ann")
    assert (ann.structured, ann.changed, ann.analysis) == (False, True, DEEP)
    assert result.final_answer == "the synthesis"
    assert any("nested deeper than 64 levels" in message for message in warned(events, "ann"))


async def test_a_deep_judge_score_leaves_that_response_out(fake_server, run_protocol):
    fake_server.script("ann-model", reply("ann answer"))
    fake_server.script("bob-model", reply("bob answer"))
    judge = responder(
        lambda r: (DEEP if "ann answer" in prompt_of(r) else '{"score": 70}') if task_of(r) == "judge" else "j"
    )
    fake_server.script("judge-model", judge)
    panel = make_panel(fake_server, ["ann", "bob", "judge"], mode="consensus", scorer="judge:judge")
    result, events = await run_protocol(ensemble, panel)
    assert result.scores == {"bob": 70.0, "judge": 70.0} and result.chosen == "bob"
    assert "the judge could not score ann's response (the reply's JSON is nested deeper than 64 levels)" in warned(
        events, "judge"
    )


# -- 8. usage a provider reports is a number from outside -------------------------------------


def completion(content: Any, usage: dict[str, Any] | None = None) -> Step:
    """A completion exactly as written, whatever its fields hold (the fake's own replies are
    always well-formed)."""
    body = {
        "id": "chatcmpl-raw",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": usage or {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30},
    }
    return malformed(json.dumps(body), status=200)


@pytest.mark.parametrize(
    ("usage", "shown"),
    [
        (
            {"prompt_tokens": 10**30, "completion_tokens": 5, "total_tokens": 10**30 + 5},
            "prompt_tokens a 31-digit number",
        ),
        ({"prompt_tokens": -1_999_999_650, "completion_tokens": 5, "total_tokens": -1}, "prompt_tokens -1999999650"),
        ({"prompt_tokens": 10, "completion_tokens": 10**9 + 1, "total_tokens": 10}, "completion_tokens 1000000001"),
    ],
    ids=["huge", "negative", "past-a-billion"],
)
def test_usage_outside_its_range_is_unknown_and_the_run_is_stored(fake_server, tmp_path, usage, shown):
    fake_server.script("liar", completion("an answer", usage))
    fake_server.script("honest", completion("an answer"))
    file = tmp_path / "p.yaml"
    file.write_text(
        "question: q?\nprotocol: ensemble\nmembers:\n"
        f"  - {{name: liar, model: openai/liar, api_base: '{fake_server.url}'}}\n"
        f"  - {{name: honest, model: openai/honest, api_base: '{fake_server.url}'}}\n"
    )
    db = tmp_path / "runs.db"
    outcome = cli("ensemble", str(file), "--json", "--db", str(db), columns=None)
    assert outcome.exit_code == 0, outcome.output
    data = json.loads(outcome.stdout)
    assert data["tokens"] == 30, "the run counts the tokens it knows"
    message = (
        f"its provider reported usage outside 0 to 1,000,000,000 tokens ({shown}); its tokens and cost are unknown"
    )
    assert f"liar: {message}" in " ".join(data["warnings"]) or message in outcome.stderr
    rows = sqlite3.connect(db).execute("select member, tokens_in, tokens_out from calls order by member").fetchall()
    assert rows == [("honest", 10, 20), ("liar", None, None)]


async def test_negative_usage_cannot_give_the_budget_money_back(fake_server, recorder):
    """One endpoint reports a negative count. Counted, it would hand the budget $100 back and a
    $0.02 cap would admit every later call; discarded, its call is counted at its worst case
    ($0.01: 100 tokens at $0.0001), so only one honest call ($0.002 each) fits after it."""
    litellm = load_litellm()
    litellm.register_model(
        {
            "priced": {
                "input_cost_per_token": 0.0,
                "output_cost_per_token": 0.0001,
                "litellm_provider": "openai",
                "mode": "chat",
            }
        }
    )
    fake_server.script(
        "priced",
        completion("a lie", {"prompt_tokens": 10, "completion_tokens": -1_000_000, "total_tokens": 10}),
        completion("honest"),
    )
    budget = Budget(max_cost=0.02)
    gw = Gateway(recorder, defaults=Defaults(retries=0, max_tokens=100), budget=budget)
    priced = member(fake_server, "priced")
    try:
        lie = await ask(gw, priced)
        honest = [await ask(gw, priced) for _ in range(16)]
    finally:
        await gw.aclose()
        litellm.model_cost.pop("priced", None)
    assert (lie.ok, lie.tokens_in, lie.tokens_out, lie.cost) == (True, None, None, None)
    assert [result.ok for result in honest] == [True] + [False] * 15
    assert len(fake_server.requests_for("priced")) == 2
    assert budget.spent == pytest.approx(0.01 + 0.002)


async def test_a_stream_reporting_impossible_usage_is_unknown_too(fake_server, recorder):
    fake_server.script("m", reply("streamed answer", prompt_tokens=-5, completion_tokens=10**12))
    gw = Gateway(recorder, defaults=Defaults(retries=0), stream=True)
    try:
        result = await ask(gw, member(fake_server))
    finally:
        await gw.aclose()
    assert fake_server.requests_for("m")[0].streamed
    assert (result.ok, result.text, result.tokens_in, result.tokens_out) == (True, "streamed answer", None, None)
    (warning,) = recorder.of("warning")
    assert warning.member == "m" and "(prompt_tokens -5, completion_tokens a 13-digit number)" in warning.message


# -- 9. text that no writer accepts, and replies litellm refuses -----------------------------------


def test_a_lone_surrogate_in_a_reply_is_replaced_before_it_is_stored_or_shown(fake_server, tmp_path):
    fake_server.default(completion("caf\ud800e"))
    file = tmp_path / "p.yaml"
    file.write_text(f"question: q?\nmembers:\n  - {{name: a, model: openai/a, api_base: '{fake_server.url}'}}\n")
    db = tmp_path / "runs.db"
    outcome = cli("ensemble", str(file), "--json", "--db", str(db), columns=None)
    assert outcome.exit_code == 0, outcome.output
    data = json.loads(outcome.stdout)
    assert data["final_answer"].endswith("caf\ufffde")
    exported = cli("history", "export", data["run_id"], "--db", str(db), "--format", "md", columns=None)
    assert exported.exit_code == 0 and "caf\ufffde" in exported.stdout


@pytest.mark.parametrize("form", ["md", "html"])
def test_a_deep_reply_stored_as_an_answer_still_exports(fake_server, tmp_path, form):
    fake_server.default(reply(DEEP))
    file = tmp_path / "p.yaml"
    file.write_text(f"question: q?\nmembers:\n  - {{name: a, model: openai/a, api_base: '{fake_server.url}'}}\n")
    db = tmp_path / "runs.db"
    outcome = cli("ensemble", str(file), "--json", "--db", str(db), columns=None)
    assert outcome.exit_code == 0, outcome.output
    run_id = json.loads(outcome.stdout)["run_id"]
    target = tmp_path / f"run.{form}"
    exported = cli("history", "export", run_id, "--db", str(db), "-o", str(target), columns=None)
    assert exported.exit_code == 0, exported.output
    assert "[[[[" in target.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("step", "message"),
    [
        (completion([{"type": "text", "text": "hi"}]), "the reply's content was not text"),
        (completion(42), "the reply's content was not text"),
        (completion({"text": "hi"}), "the reply's content was not text"),
        (
            completion("hi", {"prompt_tokens": "ten", "completion_tokens": "5"}),
            "the reply's token counts were not whole numbers",
        ),
        (
            completion("hi", {"prompt_tokens": 1.5, "completion_tokens": 2}),
            "the reply's token counts were not whole numbers",
        ),
    ],
    ids=["list", "int", "object", "text-tokens", "float-tokens"],
)
async def test_a_reply_of_the_wrong_shape_is_malformed_without_a_word_on_stderr(fake_server, gateway, step, message):
    fake_server.script("m", step)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = await ask(gateway, member(fake_server))
    assert (result.ok, result.error_kind, result.error) == (False, "malformed", message)
    assert [str(w.message) for w in caught if "Pydantic serializer" in str(w.message)] == []


async def test_counts_given_as_text_are_read_without_a_word_on_stderr(fake_server, gateway):
    fake_server.script("m", completion("hi", {"prompt_tokens": "10", "completion_tokens": "5", "total_tokens": "15"}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = await ask(gateway, member(fake_server))
    assert (result.ok, result.tokens_in, result.tokens_out) == (True, 10, 5)
    assert [str(w.message) for w in caught if "Pydantic serializer" in str(w.message)] == []


# -- 10. a structured reply holding two answers is asked once more, within the call -----------------


class Pick(BaseModel):
    decisive: ClassVar[tuple[str, ...]] = ("pick",)

    pick: str


async def test_two_answers_are_asked_once_more_in_one_call(fake_server, gateway, recorder):
    fake_server.script("m", reply('{"pick": "a"} and {"pick": "b"}'), reply('{"pick": "b"}'))
    result = await ask(gateway, member(fake_server), schema=Pick)
    assert (result.ok, result.parsed, result.parse_error, result.attempts) == (True, {"pick": "b"}, None, 2)
    (started,) = recorder.of("call_started")
    (finished,) = recorder.of("call_finished")
    assert finished.messages[-2:] == [
        {"role": "assistant", "content": '{"pick": "a"} and {"pick": "b"}'},
        {
            "role": "user",
            "content": "Your reply could not be used: the reply holds two objects with different pick ('a' and 'b'). "
            "Reply again with only your own JSON object, once, and no other object.",
        },
    ]
    assert finished.tokens_in == 20 and finished.tokens_out == 40, "both requests are counted"


async def test_when_asking_once_more_fails_the_first_reply_stands_unusable(fake_server, gateway):
    fake_server.script("m", reply('{"pick": "a"} {"pick": "b"}'), error(400, "no more"))
    result = await ask(gateway, member(fake_server), schema=Pick)
    assert (result.ok, result.text, result.parsed) == (True, '{"pick": "a"} {"pick": "b"}', None)
    assert result.parse_error == (
        "the reply holds two objects with different pick ('a' and 'b'); asked once more, that request failed "
        "(the provider rejected the request (400): no more)"
    )
