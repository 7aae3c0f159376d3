"""A run asked under `stop: decided` and interrupted mid-wave resumes with the ballots it had,
asks only the member it was waiting on, and stops where the uninterrupted run stops."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAIServer, hang, reply
from tests.helpers import cli_json, interrupted_run, write_panel

NAMES = ["a", "b", "c", "d", "e"]
CHOICES = {"a": "P", "b": "P", "c": "P", "d": "M", "e": "M"}


def ballot(choice: str) -> str:
    return json.dumps({"choice": choice, "ranking": [choice], "confidence": 80, "reason": "because"})


def voting(server: FakeOpenAIServer, folder: Path) -> Path:
    for name, choice in CHOICES.items():
        server.script(name, reply(ballot(choice)))
    return write_panel(
        folder / "vote.yaml",
        server,
        NAMES,
        "protocol: vote",
        "question: Which?",
        "options: [P, M]",
        "method: plurality",
        "stop: decided",
        "defaults: {retries: 0}",
    )


def test_a_stopped_vote_resumes_with_its_ballots_and_stops_where_it_would_have(
    fake_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    panel = voting(fake_server, tmp_path)
    db = tmp_path / "runs.db"
    whole = cli_json("vote", str(panel), "--db", str(db))
    assert (whole["winner"], whole["calls"], whole["stopping"]["saved_calls"]) == ("P", 3, 2)

    fake_server.requests.clear()
    fake_server.script("c", hang())
    old_id = asyncio.run(interrupted_run(panel, db, lambda done: done == 2 and len(fake_server.requests) == 3))
    fake_server.requests.clear()
    fake_server.script("c", reply(ballot("P")))
    result = cli_json("resume", old_id, "--db", str(db))

    assert [request.model for request in fake_server.requests] == ["c"]
    assert result["calls_by_status"]["reused"] == 2 and result["calls"] == 3
    assert (result["winner"], result["stopping"]) == (whole["winner"], whole["stopping"])
