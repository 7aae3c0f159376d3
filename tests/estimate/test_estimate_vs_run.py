"""An estimate against the real run of the same panel on the fake server.

The calls a run makes fall between the estimate's low and high. The prompts of a run's first
stage are counted exactly as the estimate counts them: litellm's `token_counter` on the
messages the fake server received matches the estimate's count within TOLERANCE (a run
fences quoted texts with its own random tag, whose hex digits may split into a token or two
more or less than the estimate's). Every prompt of the run, counted the same way, adds up to
between the estimate's low and high.
"""

from __future__ import annotations

from typing import Any

import pytest

from panel_cli.config import Panel
from panel_cli.estimate.build import estimate_run
from panel_cli.estimate.models import Estimate
from panel_cli.events import EventBus
from panel_cli.llm.gateway import Gateway
from panel_cli.llm.litellm_setup import load_litellm
from panel_cli.protocols.confer.engine import confer
from panel_cli.protocols.council.engine import council
from panel_cli.protocols.supervise.engine import supervise
from panel_cli.runs.execute import run_engine
from panel_cli.runs.outcome import RunEnvelope
from tests.fakes.openai_server import FakeOpenAIServer, RecordedRequest, responder
from tests.protocols.conftest import task_of, vote_json

TOLERANCE = 0.02
QUESTION = "Which database should we use for the billing service?"


def fake_panel(server: FakeOpenAIServer, names: list[str], **fields: Any) -> Panel:
    members = [
        {"name": name, "model": f"openai/{name}-model", "api_base": server.url, "system": f"You are {name}."}
        for name in names
    ]
    return Panel.model_validate(
        {"name": "t", "members": members, "defaults": {"retries": 0, "max_tokens": 300}, **fields}
    )


def replies(request: RecordedRequest) -> str:
    """A short answer of the shape each task asks for."""
    task = task_of(request)
    if task == "confer.vote":
        return vote_json("A", 80, "PostgreSQL, for its transactions.")
    if task == "council.review":
        return "A is right, B is thin.\nFINAL RANKING: A, B, C"
    if task == "critic":
        return '{"verdict": "APPROVED", "feedback": {}}'
    return "PostgreSQL: transactions, mature tooling, and the team knows it."


async def run(engine: Any, panel: Panel) -> RunEnvelope:
    bus = EventBus("estimate-run", [])
    gateway = Gateway(bus.emit, defaults=panel.defaults)
    try:
        outcome = await run_engine(engine, panel, QUESTION, gateway, bus)
    finally:
        await gateway.aclose()
    return outcome.envelope


def counted(request: RecordedRequest) -> int:
    return int(load_litellm().token_counter(model=f"openai/{request.model}", messages=request.messages))


def assert_matches(estimate: Estimate, envelope: RunEnvelope, server: FakeOpenAIServer, first_stage: str) -> None:
    assert estimate.calls_low <= envelope.calls <= estimate.calls_high
    assert len(server.requests) == envelope.calls
    first = next(stage for stage in estimate.stages if stage.stage == first_stage)
    for line in first.calls:
        (request, *_) = server.requests_for(line.model.removeprefix("openai/"))
        assert line.prompt_tokens_low == pytest.approx(counted(request), rel=TOLERANCE)
        assert line.prompt_tokens_high == line.prompt_tokens_low  # a first stage quotes nothing
    total = sum(counted(request) for request in server.requests)
    assert estimate.prompt_tokens_high is not None
    assert estimate.prompt_tokens_low <= total <= estimate.prompt_tokens_high


async def test_confer(fake_server):
    fake_server.default(responder(replies))
    panel = fake_panel(fake_server, ["ann", "bob", "cy"], protocol="confer", max_rounds=3)
    estimate = estimate_run(panel, QUESTION)
    envelope = await run(confer, panel)
    # converged after two vote rounds (the first moved an answer); the fewest is one round
    assert (estimate.calls_low, envelope.calls, estimate.calls_high) == (6, 9, 12)
    assert_matches(estimate, envelope, fake_server, "answer")


async def test_council(fake_server):
    fake_server.default(responder(replies))
    panel = fake_panel(fake_server, ["ann", "bob", "cy"], protocol="council")
    estimate = estimate_run(panel, QUESTION)
    envelope = await run(council, panel)
    assert (estimate.calls_low, envelope.calls, estimate.calls_high) == (7, 7, 7)
    assert_matches(estimate, envelope, fake_server, "answer")


async def test_supervise(fake_server):
    fake_server.default(responder(replies))
    panel = fake_panel(fake_server, ["ann", "bob", "boss"], protocol="supervise", critic="boss", chairman="boss")
    panel = panel.model_copy(
        update={
            "members": [
                m.model_copy(update={"task": f"the {m.name} part"}) if m.name != "boss" else m for m in panel.members
            ]
        }
    )
    estimate = estimate_run(panel, QUESTION)
    envelope = await run(supervise, panel)
    assert (estimate.calls_low, envelope.calls, estimate.calls_high) == (
        4,
        4,
        13,
    )  # at most: 2 work, 3 critiques asked twice, 2 corrections each, 1 synthesis
    assert_matches(estimate, envelope, fake_server, "work")
