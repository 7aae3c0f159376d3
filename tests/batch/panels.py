"""Panels and question files on the fake server, for the batch tests."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAIServer, RecordedRequest


def answer(request: RecordedRequest) -> str:
    """`Q7` in the question -> `A7`, so each result can be matched to its question."""
    found = re.findall(r"\bQ(\d+)\b", request.messages[-1]["content"])
    return f"A{found[-1]}" if found else "no question number"


def write_panel(
    path: Path,
    server: FakeOpenAIServer,
    *,
    members: int = 1,
    protocol: str = "ensemble",
    extra: str = "",
    defaults: str = "{retries: 0}",
) -> Path:
    entries = "".join(f"  - name: m{n}\n    model: openai/m{n}\n    api_base: {server.url}\n" for n in range(members))
    mode = "mode: race\n" if protocol == "ensemble" else ""
    path.write_text(f"name: batch\nprotocol: {protocol}\n{mode}defaults: {defaults}\n{extra}members:\n{entries}")
    return path


def write_questions(path: Path, numbers: range | list[int]) -> Path:
    path.write_text("".join(json.dumps({"id": f"q{n}", "question": f"What is Q{n}?"}) + "\n" for n in numbers))
    return path
