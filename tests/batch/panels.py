"""Panels and question files on the fake server, for the batch tests."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAIServer, RecordedRequest
from tests.helpers import write_panel


def answer(request: RecordedRequest) -> str:
    """`Q7` in the question -> `A7`, so each result can be matched to its question."""
    found = re.findall(r"\bQ(\d+)\b", request.messages[-1]["content"])
    return f"A{found[-1]}" if found else "no question number"


def batch_panel(
    path: Path,
    server: FakeOpenAIServer,
    *,
    members: int = 1,
    protocol: str = "ensemble",
    extra: str = "",
    defaults: str = "{retries: 0}",
) -> Path:
    """A panel file `batch` of members m0, m1, … (an ensemble races); `extra`: more top-level lines."""
    mode = "mode: race" if protocol == "ensemble" else ""
    fields = [f"protocol: {protocol}", mode, f"defaults: {defaults}", extra]
    return write_panel(path, server, [f"m{n}" for n in range(members)], *fields, name="batch")


def write_questions(path: Path, numbers: range | list[int]) -> Path:
    path.write_text("".join(json.dumps({"id": f"q{n}", "question": f"What is Q{n}?"}) + "\n" for n in numbers))
    return path
