"""Secrets: no key reaches the store, `--json`, plain progress, the live view or a warning,
including keys the name rule would miss (short keys, `${VAR}` values, an api_key_env).

One test per row of the fault suite; runs go through the CLI in-process, against the fake
server, exactly as a user's would.
"""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from panel_cli.events import (
    CallFinished,
    EventBus,
    MemberInfo,
    RunFinished,
    RunStarted,
    StageStarted,
    WarningRaised,
)
from panel_cli.view.live import LiveView
from tests.fakes.openai_server import FakeOpenAIServer, error, responder
from tests.helpers import cli, write_panel

KEY = "sk-live-Qw3rTy7Ui9Op1As5Df"


def secrets_panel(path: Path, server: FakeOpenAIServer, names: list[str], extra: str = "") -> Path:
    """`extra`: lines under every member."""
    fields = ("question: is it safe?", "max_rounds: 1")
    return write_panel(path, server, names, *fields, name="secrets", member_lines=extra)


def stored_bytes(folder: Path) -> bytes:
    return b"".join(path.read_bytes() for path in folder.glob("runs.db*"))


def echo_everything(request) -> str:
    """A model that repeats its key header and its whole prompt back."""
    return f"header {request.headers.get('authorization')}; prompt {json.dumps(request.messages)}"


def test_a_key_in_a_provider_error_or_an_answer_never_reaches_plain_progress(fake_server, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    fake_server.script("a", error(401, f"Incorrect API key provided: {KEY}."))
    fake_server.script("b", responder(echo_everything))
    fake_server.script("c", responder(echo_everything))
    file = secrets_panel(tmp_path / "p.yaml", fake_server, ["a", "b", "c"])
    outcome = cli("confer", str(file), "--db", str(tmp_path / "runs.db"), columns=None)
    assert outcome.exit_code == 0, outcome.output
    assert any(KEY in str(request.headers) for request in fake_server.requests), "the key was really sent"
    assert "[redacted]" in outcome.stderr, "the echoed key was scrubbed, not merely absent"
    assert KEY not in outcome.stdout and KEY not in outcome.stderr
    assert KEY.encode() not in stored_bytes(tmp_path)


def test_the_live_view_never_draws_a_key():
    out = io.StringIO()
    view = LiveView(Console(file=out, force_terminal=True, width=140, color_system=None))
    bus = EventBus("r1", [view], secrets=[KEY])

    async def run() -> None:
        await bus.emit(
            RunStarted(
                protocol="confer", panel="p", question=f"is {KEY} ok?", members=[MemberInfo(name="a", model="openai/a")]
            )
        )
        await bus.emit(StageStarted(stage="answer", round=0, members=["a"]))
        await bus.emit(
            CallFinished(
                call_id="1",
                member="a",
                model="openai/a",
                stage="answer",
                round=0,
                text=f"your key is {KEY}",
                latency=0.1,
            )
        )
        await bus.emit(WarningRaised(message=f"provider said {KEY}", member="a"))
        await bus.emit(RunFinished(final_answer=f"the key {KEY}", result={}))

    asyncio.run(run())
    view.close()
    drawn = out.getvalue()
    assert "[redacted]" in drawn and KEY not in drawn


@pytest.mark.parametrize("key", ["sk-1234", "abcd"])
def test_a_short_key_a_member_uses_is_redacted(key, fake_server, tmp_path, monkeypatch):
    """LiteLLM proxy's stock key is `sk-1234`: too short for the name rule, but a key in use."""
    monkeypatch.setenv("PROXY_TOKEN_FOR_PANEL", key)
    fake_server.default(responder(echo_everything))
    file = secrets_panel(tmp_path / "p.yaml", fake_server, ["a", "b"], extra="    api_key_env: PROXY_TOKEN_FOR_PANEL\n")
    outcome = cli("confer", str(file), "--json", "--db", str(tmp_path / "runs.db"), columns=None)
    assert outcome.exit_code == 0, outcome.output
    assert all(request.headers.get("authorization") == f"Bearer {key}" for request in fake_server.requests)
    assert f"Bearer {key}" not in outcome.stdout and "Bearer [redacted]" in outcome.stdout
    assert f"Bearer {key}".encode() not in stored_bytes(tmp_path)


def test_the_values_a_panel_file_expanded_are_redacted(fake_server, tmp_path, monkeypatch):
    """A `${VAR}` expanded into `system` is the user's secret whatever the variable's name."""
    persona = "You are agent Zorblax-7, clearance omega"
    monkeypatch.setenv("PANEL_PERSONA_TEXT", persona)
    fake_server.default(responder(echo_everything))
    file = secrets_panel(tmp_path / "p.yaml", fake_server, ["a", "b"], extra="    system: ${PANEL_PERSONA_TEXT}\n")
    outcome = cli("confer", str(file), "--json", "--db", str(tmp_path / "runs.db"), columns=None)
    assert outcome.exit_code == 0, outcome.output
    assert any(persona in json.dumps(request.messages) for request in fake_server.requests), "the model got it"
    assert persona not in outcome.stdout
    assert persona.encode() not in stored_bytes(tmp_path)
