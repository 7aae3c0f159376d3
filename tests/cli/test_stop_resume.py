"""A run asked under `stop: decided` and interrupted mid-wave resumes with the calls it had made,
asks only the members it was waiting on, never asks those the run straight through never asked,
and ends as that run ends: vote in its first and its second wave, confer in its vote."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from panel_cli.protocols.confer.stopping import answer_key
from tests.fakes.openai_server import FakeOpenAIServer, RecordedRequest, hang, reply, responder
from tests.helpers import cli_json, interrupted_run, write_panel
from tests.protocols.conftest import fenced_texts, task_of, vote_json

NAMES = ["a", "b", "c", "d", "e"]
CHOICES = {"a": "P", "b": "P", "c": "P", "d": "M", "e": "M"}


def ballot(choice: str) -> str:
    return json.dumps({"choice": choice, "ranking": [choice], "confidence": 80, "reason": "because"})


def voting(server: FakeOpenAIServer, folder: Path, choices: dict[str, str] = CHOICES) -> Path:
    for name, choice in choices.items():
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


def test_a_vote_stopped_in_its_second_wave_asks_only_that_wave_again(
    fake_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """P, M, P: one more P settles it, so d alone is the second wave. Interrupted while d is
    asked, the resume reuses a, b and c, asks d, and never asks e, as the run asked straight through."""
    panel = voting(fake_server, tmp_path, {"a": "P", "b": "M", "c": "P", "d": "P", "e": "M"})
    db = tmp_path / "runs.db"
    whole = cli_json("vote", str(panel), "--db", str(db))
    assert (whole["winner"], whole["calls"], whole["stopping"]["stages"][0]["waves"]) == ("P", 4, 2)

    fake_server.requests.clear()
    fake_server.script("d", hang())
    old_id = asyncio.run(interrupted_run(panel, db, lambda done: done == 3 and len(fake_server.requests) == 4))
    assert sorted(request.model for request in fake_server.requests) == ["a", "b", "c", "d"]
    fake_server.requests.clear()
    fake_server.script("d", reply(ballot("P")))
    result = cli_json("resume", old_id, "--db", str(db))

    assert [request.model for request in fake_server.requests] == ["d"]
    assert result["calls_by_status"]["reused"] == 3 and result["calls"] == 4
    assert (result["winner"], result["stopping"]) == (whole["winner"], whole["stopping"])


OPTIONS = ["alpha", "bravo", "charlie", "delta"]
BELIEFS = {"ann": "alpha", "bob": "bravo", "cy": "alpha", "dee": "alpha", "eve": "bravo"}


def answer_then_vote(request: RecordedRequest) -> str:
    """Each member answers its belief and votes, at 80, for the first answer shown that gives it."""
    belief = BELIEFS[request.model.removesuffix("-model")]
    if task_of(request) != "confer.vote":
        return f"{belief.capitalize()}\n\nmy reasons"
    shown = fenced_texts(request, "Answer")
    label = next(label for label, text in shown.items() if answer_key(text, OPTIONS) == belief)
    return vote_json(label, 80, shown[label])


def test_a_confer_stopped_in_its_vote_resumes_where_it_was(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    """alpha, bravo, alpha, then dee's alpha settles the answers (eve is never asked); in the
    vote ann and cy first, then dee. Interrupted while dee votes, the resume reuses the six
    calls made, asks dee's vote alone, and ends as the run straight through did."""
    fake_server.default(responder(answer_then_vote))
    panel = write_panel(
        tmp_path / "confer.yaml",
        fake_server,
        list(BELIEFS),
        "protocol: confer",
        "question: Which?",
        f"options: [{', '.join(OPTIONS)}]",
        "stop: decided",
        "defaults: {retries: 0}",
        model="openai/{name}-model",
    )
    db = tmp_path / "runs.db"
    whole = cli_json("confer", str(panel), "--db", str(db))
    assert (whole["winner"], whole["calls"], whole["stopping"]["saved_calls"]) == ("ann", 7, 2)

    fake_server.requests.clear()
    fake_server.script("dee-model", responder(answer_then_vote), hang())
    old_id = asyncio.run(interrupted_run(panel, db, lambda done: done == 6 and len(fake_server.requests) == 7))
    assert "eve-model" not in {request.model for request in fake_server.requests}
    fake_server.requests.clear()
    fake_server.script("dee-model", responder(answer_then_vote))
    result = cli_json("resume", old_id, "--db", str(db))

    assert [(request.model, task_of(request)) for request in fake_server.requests] == [("dee-model", "confer.vote")]
    assert result["calls_by_status"]["reused"] == 6 and result["calls"] == 7
    same = ("winner", "final_answer", "converged", "stopping")
    assert {key: result[key] for key in same} == {key: whole[key] for key in same}
