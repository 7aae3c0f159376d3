"""The gateway's two hooks into litellm's private internals (`panel_cli.llm.litellm_setup`), seen
engaging in a real call against the fake server, and not outside one: a litellm release that
moves either hook makes calls quietly slower and nothing else, so only these tests catch it.

1. litellm's per-call cost calculation (`Logging.response_cost_calculator`, patched at class
   level) answers nothing inside a gateway call: litellm's own figure, `_hidden_params
   ["response_cost"]`, stays empty there, and is filled for a direct call.
2. litellm's success logging is skipped for a gateway call (`litellm._internal_context.
   internal_sub_call`): a success callback hears the direct calls and never the gateway's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from panel_cli.config import Defaults, Member
from panel_cli.llm.gateway import Gateway
from panel_cli.llm.litellm_setup import load_litellm
from tests.fakes.openai_server import FakeOpenAIServer, reply

QUESTION = [{"role": "user", "content": "Tea or coffee?"}]
HANG_GUARD = 30.0  # seconds: a stuck test fails instead of hanging; never a measurement


async def _ignore(event: Any) -> None:
    return None


async def gateway_call(server: FakeOpenAIServer, model: str) -> Any:
    gateway = Gateway(_ignore, defaults=Defaults(retries=0))
    try:
        return await gateway.call(Member(name="m", model=f"openai/{model}", api_base=server.url), QUESTION, stage="a")
    finally:
        await gateway.aclose()


async def direct_call(litellm: ModuleType, server: FakeOpenAIServer, model: str) -> Any:
    """The same request straight to litellm, as any other caller in the process makes it."""
    return await litellm.acompletion(
        model=f"openai/{model}", api_base=server.url, api_key="fake-test-key", messages=QUESTION, max_retries=0
    )


@pytest.fixture
def litellm(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """litellm as the gateway loads it, its callback lists restored after the test."""
    module = load_litellm()
    for name, value in list(vars(module).items()):
        if "callback" in name and isinstance(value, list):
            monkeypatch.setattr(module, name, list(value))
    yield module


async def test_litellms_cost_calculation_is_skipped_inside_a_gateway_call_only(
    litellm: ModuleType, fake_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_server.default(reply("coffee", prompt_tokens=1000, completion_tokens=1000))
    seen: list[Any] = []
    acompletion = litellm.acompletion

    async def keep(**request: Any) -> Any:
        response = await acompletion(**request)
        seen.append(response)
        return response

    monkeypatch.setattr(litellm, "acompletion", keep)
    result = await gateway_call(fake_server, "gpt-4o")
    (inside,) = seen
    assert result.ok and result.cost is not None and result.cost > 0, "the gateway prices the call itself"
    assert inside._hidden_params.get("response_cost") is None, "litellm's calculator ran inside a gateway call"

    outside = await direct_call(litellm, fake_server, "gpt-4o")
    assert outside._hidden_params["response_cost"] == pytest.approx(result.cost), "and only there"


async def test_litellms_success_logging_is_skipped_for_a_gateway_call_only(
    litellm: ModuleType, fake_server: FakeOpenAIServer
) -> None:
    from litellm.integrations.custom_logger import CustomLogger

    class Heard(CustomLogger):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.models: list[str] = []
            self.arrived = asyncio.Event()

        async def async_log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
            self.models.append(str(kwargs.get("model")))
            self.arrived.set()

        async def heard(self, model: str) -> None:
            while model not in self.models:
                self.arrived.clear()
                await asyncio.wait_for(self.arrived.wait(), HANG_GUARD)

    fake_server.default(reply("coffee"))
    heard = Heard()
    litellm.callbacks = [heard]
    await direct_call(litellm, fake_server, "before")
    await heard.heard("before")
    result = await gateway_call(fake_server, "inside")
    await direct_call(litellm, fake_server, "after")
    await heard.heard("after")

    assert result.ok and [request.model for request in fake_server.requests] == ["before", "inside", "after"]
    # The gateway's call was logged before `after` if it was logged at all: litellm queues the
    # success log of each call as it returns, and `after` started once `inside` had returned.
    # (A call of an earlier test may still be logged meanwhile: only these three count.)
    ours = [model for model in heard.models if model in ("before", "inside", "after")]
    assert ours == ["before", "after"], "litellm logged the gateway's own call"
