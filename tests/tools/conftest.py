"""Runs with tools: the fake OpenAI server as the models, the MCP fixture server as the tools."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from panel_cli.config import Panel
from panel_cli.llm.gateway import Gateway
from panel_cli.protocols.base import ProtocolResult
from panel_cli.tasks import Task, mark
from tests.fakes.openai_server import FakeOpenAIServer, RecordedRequest
from tests.protocols.conftest import run_recorded

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fakes" / "mcp_server.py"


def fixture_server(**fields: Any) -> dict[str, Any]:
    return {"command": [sys.executable, str(FIXTURE)], **fields}


def tool_panel(
    server: FakeOpenAIServer, names: list[str], *, uses: dict[str, list[str]] | None = None, **fields: Any
) -> Panel:
    """Members on the fake server, each using the servers `uses` gives it (default: every
    member uses `fix`, the fixture server; `tools=` replaces the servers)."""
    uses = uses if uses is not None else {name: ["fix"] for name in names}
    members = [
        {"name": name, "model": f"openai/{name}-model", "api_base": server.url, "tools": uses.get(name, [])}
        for name in names
    ]
    fields.setdefault("tools", {"fix": fixture_server()})
    fields.setdefault("defaults", {"retries": 0})
    return Panel.model_validate({"name": "t", "members": members, **fields})


def user_text(request: RecordedRequest) -> str:
    """Every user message of a request, joined."""
    return "\n\n".join(str(m.get("content") or "") for m in request.messages if m.get("role") == "user")


def tool_messages(request: RecordedRequest) -> list[str]:
    return [str(m.get("content") or "") for m in request.messages if m.get("role") == "tool"]


async def answer_once(panel: Panel, question: str, gateway: Gateway, emit: Any) -> ProtocolResult:
    """An engine of one free-text call by the first member: the loop under test, nothing else."""
    prompt = mark(f"Question:\n{question}", Task.ANSWER)
    reply = await gateway.call(
        panel.members[0], [{"role": "user", "content": prompt}], stage="answer", deadline=None, tools=True
    )
    return ProtocolResult(
        final_answer=reply.text if reply.ok else None,
        failure_reason=None if reply.ok else f"{reply.error_kind}: {reply.error}",
    )


@pytest.fixture
def run_with_tools() -> Callable[..., Any]:
    return run_recorded
