"""Pytest fixtures for the fake OpenAI server, loaded for every test by tests/conftest.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.openai_server import FakeOpenAIServer


@pytest.fixture
def fake_server() -> Iterator[FakeOpenAIServer]:
    """A started fake server, fresh per test so scripts and records never leak; a crash
    inside the server fails the test instead of passing as a dropped connection."""
    with FakeOpenAIServer() as server:
        yield server
    assert not server.errors, f"fake server crashed: {server.errors!r}"
