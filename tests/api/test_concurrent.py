"""Runs asked for at once in one process (a server's requests, `asyncio.gather` of `arun`s) share
litellm's HTTP clients, which belong to the process: the run that ends first must not close them
under a run still waiting for its replies."""

from __future__ import annotations

import asyncio

import pytest

import panel_cli
from tests.fakes.openai_server import after, reply_json
from tests.helpers import eventually, member

BALLOT = {"choice": "A", "ranking": ["A", "B"], "confidence": 70, "reason": "r"}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "fake-test-key")


async def test_a_run_that_ends_first_leaves_the_others_calls_alone(fake_server) -> None:
    first_done = asyncio.Event()
    fake_server.script("fast1", reply_json(BALLOT))
    fake_server.script("fast2", reply_json(BALLOT))
    # The slow run's replies are held until the fast run has ended and closed what it closes.
    fake_server.script("slow1", after(first_done.is_set, reply_json(BALLOT)))
    fake_server.script("slow2", after(first_done.is_set, reply_json(BALLOT)))

    def panel(*names: str) -> panel_cli.Panel:
        members = [member(fake_server, name) for name in names]
        return panel_cli.Panel(name="p", members=members, options=["A", "B"], defaults={"retries": 0})

    slow = asyncio.create_task(panel_cli.arun(panel("slow1", "slow2"), "A or B?", protocol="vote"))
    await eventually(lambda: len(fake_server.requests) == 2, "the slow run's two calls to be in flight")
    fast = await panel_cli.arun(panel("fast1", "fast2"), "A or B?", protocol="vote")
    first_done.set()
    late = await slow
    assert (fast.details["ballots_cast"], late.details["ballots_cast"]) == (2, 2)
    assert late.details["failed"] == [] and late.final_answer == "A"
