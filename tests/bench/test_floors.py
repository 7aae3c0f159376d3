"""bench/floors.py's floor "litellm as panel sets it up" does the work panel's calls do: confer's
calls (the answers streamed, then vote prompts quoting every answer), each logged by litellm
exactly when it logs a gateway call of its kind (streamed or not): the floor's calls are in the
gateway's own context, which skips litellm's bookkeeping (tests/llm/test_litellm_hooks.py). A
floor doing more of it than panel's calls get would flatter panel's figures in bench/percall.py,
bench/overhead.py and bench/batch.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from bench.floors import PANEL_SETUP, VOTE_MARKER, bare_confer, litellm_floor
from panel_cli.config import Defaults, Member
from panel_cli.llm.gateway import Gateway
from tests.fakes.openai_server import FakeOpenAIServer, RecordedRequest, responder

HANG_GUARD = 30.0  # seconds: a stuck test fails instead of hanging; never a measurement
MEMBERS = 3
QUESTION = "Tea or coffee?"


def answer_or_vote(request: RecordedRequest) -> str:
    content = str(request.messages[-1]["content"])
    if VOTE_MARKER in content:
        return json.dumps({"chosen_label": "A", "revised_answer": f"{request.model} revised", "confidence": 80})
    return f"{request.model} answers"


@pytest.fixture
def litellm(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """litellm as the floor loads it, its callback lists restored after the test."""
    module = litellm_floor(PANEL_SETUP).litellm
    for name, value in list(vars(module).items()):
        if "callback" in name and isinstance(value, list):
            monkeypatch.setattr(module, name, list(value))
    yield module


async def _ignore(event: Any) -> None:
    return None


async def gateway_call(server: FakeOpenAIServer, model: str, *, stream: bool) -> None:
    gateway = Gateway(_ignore, defaults=Defaults(retries=0), stream=stream)
    try:
        member = Member(name="m", model=f"openai/{model}", api_base=server.url)
        assert (await gateway.call(member, [{"role": "user", "content": QUESTION}], stage="a")).ok
    finally:
        await gateway.aclose()


async def test_the_floor_as_panel_sets_it_up_makes_confers_calls_with_litellms_bookkeeping_as_for_panels(
    litellm: ModuleType, fake_server: FakeOpenAIServer
) -> None:
    from litellm.integrations.custom_logger import CustomLogger

    class Heard(CustomLogger):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[tuple[str, bool]] = []  # (model, streamed)
            self.arrived = asyncio.Event()

        async def async_log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
            self.calls.append((str(kwargs.get("model")), bool(kwargs.get("stream"))))
            self.arrived.set()

        async def heard(self, call: tuple[str, bool]) -> None:
            while call not in self.calls:
                self.arrived.clear()
                await asyncio.wait_for(self.arrived.wait(), HANG_GUARD)

    fake_server.default(responder(answer_or_vote))
    heard = Heard()
    litellm.callbacks = [heard]
    await gateway_call(fake_server, "gateway", stream=True)
    await gateway_call(fake_server, "gateway", stream=False)

    floor = litellm_floor(PANEL_SETUP)
    await bare_confer(
        floor, fake_server.url, "fake-test-key", members=MEMBERS, stages=2, question=QUESTION, stream=True
    )
    # Calls of each kind outside any context, which litellm logs: each is logged after every
    # earlier call of its kind that is logged at all, as litellm queues them in turn.
    for stream in (True, False):
        direct = await litellm.acompletion(
            model="openai/after",
            messages=[{"role": "user", "content": QUESTION}],
            api_base=fake_server.url,
            api_key="fake-test-key",
            stream=stream,
        )
        if stream:
            [chunk async for chunk in direct]
        await heard.heard(("after", stream))

    answers, prompts = fake_server.requests[2 : 2 + MEMBERS], fake_server.requests[2 + MEMBERS : 2 + 2 * MEMBERS]
    assert sorted(request.model for request in answers) == ["m0", "m1", "m2"]
    assert all(request.streamed for request in answers) and not any(request.streamed for request in prompts)
    for request in prompts:
        assert all(f"m{member} answers" in request.messages[-1]["content"] for member in range(MEMBERS))
    for stream in (True, False):
        logged = {model for model, streamed in heard.calls if streamed == stream}
        expected = {"m0", "m1", "m2"} if "gateway" in logged else set()
        assert logged & {"m0", "m1", "m2"} == expected, (
            f"litellm logs the floor's {'streamed' if stream else 'plain'} calls unlike the gateway's"
        )
