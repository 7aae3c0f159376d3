"""Helpers to run an engine against the fake server through the real gateway."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from panel_cli.config import Panel
from panel_cli.events import BaseEvent, EventBus
from panel_cli.llm.gateway import Gateway
from panel_cli.runs.execute import run_engine
from panel_cli.runs.outcome import RunEnvelope
from tests.fakes.openai_server import RecordedRequest
from tests.helpers import make_panel  # noqa: F401  (the protocol and fault tests import it from here)


def prompt_of(request: RecordedRequest) -> str:
    return str(request.messages[-1]["content"])


def task_of(request: RecordedRequest) -> str:
    found = re.findall(r"\[panel-task: ([a-z.]+)\]", prompt_of(request))
    return found[-1] if found else ""


def block_labels(request: RecordedRequest) -> list[str]:
    """The labels of the answers fenced in a vote prompt, in order."""
    return list(fenced_texts(request, "Answer"))


def fenced_texts(request: RecordedRequest, noun: str) -> dict[str, str]:
    """label -> text of every `noun` fenced in the request's prompt, as the model reads them."""
    pattern = rf"^=== {noun} (.+?) \[([0-9a-f]{{8}})\] ===\n(.*?)\n=== end of {noun} \1 \[\2\] ===$"
    return {label: text for label, _, text in re.findall(pattern, prompt_of(request), re.MULTILINE | re.DOTALL)}


def vote_json(label: str, confidence: float, revised: str, rationale: str = "because") -> str:
    return json.dumps(
        {"chosen_label": label, "revised_answer": revised, "confidence": confidence, "rationale": rationale}
    )


class Recorder:
    """Every event of a run, and the run's envelope once it ends."""

    def __init__(self) -> None:
        self.events: list[BaseEvent] = []
        self.envelope: RunEnvelope | None = None

    async def __call__(self, event: BaseEvent) -> None:
        self.events.append(event)

    def of(self, kind: str) -> list[Any]:
        return [event for event in self.events if event.type == kind]


async def run_recorded(
    engine: Any, panel: Panel, question: str = "What is best?", **gateway_args: Any
) -> tuple[Any, Recorder]:
    """Run `engine` on `panel` through a gateway of its own (`gateway_args`: a budget, …);
    its result, and every event with the envelope."""
    recorder = Recorder()
    bus = EventBus("test-run", [recorder])
    gateway = Gateway(bus.emit, defaults=panel.defaults, concurrency=panel.concurrency, **gateway_args)
    try:
        outcome = await run_engine(engine, panel, question, gateway, bus)
    finally:
        await gateway.aclose()
    recorder.envelope = outcome.envelope
    return outcome.result, recorder


@pytest.fixture
def run_protocol() -> Callable[..., Any]:
    return run_recorded
