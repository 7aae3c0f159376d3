"""`panel resume ID`: an interrupted run continues as a new run, and the fake server counts
no request for a call the old run got answered.

Panels are the starter demo panels with every persona moved onto the fake server
(`openai/<persona>`), which answers as the demo persona would (`demo_reply`), so every
protocol runs through litellm's real path with deterministic replies. A persona answers from
its call's brief, which never crosses HTTP: `BriefRelay` notes each brief the gateway is given
in this process, and the fake server looks it up by the request's prompt. A member scripted to
hang holds the run mid-stage; it is then interrupted (SIGINT to a real process for confer,
a cancelled task in-process for the others) and resumed in-process with Typer's CliRunner.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sqlite3
import typing
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path

import pytest
import yaml

from panel_cli.config import load_panel
from panel_cli.errors import UserError
from panel_cli.events import EventBus
from panel_cli.llm.brief import RequestBrief, plain
from panel_cli.llm.demo_replies import demo_reply
from panel_cli.llm.gateway import Gateway
from panel_cli.protocols.base import engine_of
from panel_cli.protocols.council.settings import CouncilSettings
from panel_cli.protocols.registry import names
from panel_cli.protocols.supervise.engine import correction_rounds
from panel_cli.runs.execute import run_engine
from panel_cli.runs.resume import stored_panel
from panel_cli.store.reader import TranscriptReader
from panel_cli.store.subscriber import TranscriptStore
from tests.fakes.openai_server import FakeOpenAIServer, RecordedRequest, hang, responder
from tests.helpers import (
    HANG_GUARD,
    cli,
    cli_json,
    eventually,
    interrupted_run,
    panel_process,
    start_panel,
    wait_until,
)

ROOT = Path(__file__).resolve().parents[2]


class BriefRelay:
    """The briefs of this process's gateway calls, by their last message, so the fake server
    can answer `openai/<persona>` as the persona would. A request of a run in another process
    (or of a test that does not relay) is answered as a plain question."""

    def __init__(self) -> None:
        self.briefs: list[tuple[str, RequestBrief]] = []

    def note(self, messages: list[dict[str, typing.Any]], brief: RequestBrief | None) -> None:
        if brief is not None and messages:
            self.briefs.append((str(messages[-1].get("content") or ""), brief))

    def reply(self, request: RecordedRequest) -> str:
        """The prompt the gateway sent holds the engine's own (JSON instructions may follow)."""
        sent = str(request.messages[-1].get("content") or "")
        found = [(prompt, brief) for prompt, brief in self.briefs if prompt and prompt in sent]
        brief = max(found, key=lambda pair: len(pair[0]))[1] if found else plain(request.messages)
        return demo_reply(request.model, brief)


RELAY = BriefRelay()
PERSONA = responder(RELAY.reply)


@pytest.fixture(autouse=True)
def relay_briefs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every gateway call of the test notes its brief with RELAY first."""
    RELAY.briefs.clear()
    call = Gateway.call

    async def noted(self: Gateway, member: typing.Any, messages: list[dict[str, typing.Any]], **kwargs: typing.Any):
        RELAY.note(messages, kwargs.get("brief"))
        return await call(self, member, messages, **kwargs)

    monkeypatch.setattr(Gateway, "call", noted)


PROTOCOLS = list(names())


def on_fake_server(protocol: str, server: FakeOpenAIServer, folder: Path) -> Path:
    """The protocol's starter demo panel, every `demo/<persona>` moved to `openai/<persona>` on the fake server."""
    data = yaml.safe_load(files("panel_cli").joinpath(f"starters/{protocol}.demo.yaml").read_text(encoding="utf-8"))

    def move(entry: object) -> object:
        if isinstance(entry, dict) and str(entry.get("model", "")).startswith("demo/"):
            return {**entry, "model": "openai/" + entry["model"][5:], "api_base": server.url}
        if isinstance(entry, list):
            return [move(item) for item in entry]
        return entry

    data = {key: move(value) for key, value in data.items()}
    path = folder / f"{protocol}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    server.default(PERSONA)
    return path


def key(request: RecordedRequest) -> str:
    return json.dumps([request.model, request.messages])


def answered_calls(db: Path, run_id: str) -> int:
    with TranscriptReader.open(db) as reader:
        return sum(call.response is not None for call in reader.run_calls(run_id))


def resume(db: Path, run_id: str) -> dict:
    return cli_json("resume", run_id, "--db", str(db))


def check_resumed(
    db: Path, old_id: str, result: dict, server: FakeOpenAIServer, before: int, hung: list[RecordedRequest]
) -> None:
    """The resumed run asked only what the old one left unanswered: it reused every answered
    call, once each, asked each hung request again byte for byte, and made no other request
    than for the calls it did not reuse."""
    reused = answered_calls(db, old_id)
    new = server.requests[before:]
    assert {key(request) for request in hung} <= {key(request) for request in new}
    assert result["calls"] == reused + len(new)
    with TranscriptReader.open(db) as reader:
        record = reader.get_run(result["run_id"])
        old_record = reader.get_run(old_id)
        events = reader.run_events(result["run_id"])
        calls = reader.run_calls(result["run_id"])
    assert record.status == "finished" and record.final_answer == result["final_answer"]
    assert record.config["resumed_from"] == old_id
    assert record.config["fence_tag"] == old_record.config["fence_tag"]
    finished = [event for event in events if event["type"] == "call_finished"]
    assert sum(event["reused"] for event in finished) == reused
    assert all(event["tokens_in"] for event in finished if event["reused"]), "a reused call keeps what it was paid"
    assert [events[0]["type"], events[-1]["type"]] == ["run_started", "run_finished"]
    assert len(calls) == result["calls"] == record.calls


def confer_stopped_by(signum: int, fake_server: FakeOpenAIServer, tmp_path: Path) -> tuple[Path, int]:
    """A confer run in its own process, stopped by `signum` once round 0 and three of the
    four round-1 votes are answered and stored (the fourth hangs): the database and the exit code."""
    panel_file = on_fake_server("confer", fake_server, tmp_path)
    fake_server.script("engineer", PERSONA, hang())  # answers round 0, hangs on its round-1 vote
    db = tmp_path / "runs.db"
    process = start_panel("confer", str(panel_file), "--db", str(db))
    try:
        wait_until(
            lambda: len(fake_server.requests) >= 8 and db.exists() and answered_calls_any(db) >= 7,
            "the run's round-1 votes",
            process=process,
        )
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=HANG_GUARD)
    finally:
        if process.poll() is None:
            process.kill()
    assert "Traceback" not in stderr
    return db, process.returncode


@pytest.mark.subprocess
def test_confer_interrupted_by_sigint_resumes_without_paying_twice(
    fake_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    db, code = confer_stopped_by(signal.SIGINT, fake_server, tmp_path)
    assert code == 130
    with TranscriptReader.open(db) as reader:
        (old,) = reader.list_runs()
    assert old.status == "interrupted"
    hung = [request for request in fake_server.requests if request.model == "engineer"][1:]
    before = len(fake_server.requests)

    fake_server.script("engineer", PERSONA)
    result = resume(db, old.id[:8])

    check_resumed(db, old.id, result, fake_server, before, hung)
    assert answered_calls(db, old.id) == 7 and result["reached_answer"]
    shown = cli("history", "show", result["run_id"], "--db", str(db))
    assert shown.exit_code == 0, shown.output


@pytest.mark.subprocess
def test_a_crashed_run_resumes(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    """SIGKILL leaves the run `running` with its process gone: listed as stale, and resumable."""
    db, code = confer_stopped_by(signal.SIGKILL, fake_server, tmp_path)
    assert code == -signal.SIGKILL
    with TranscriptReader.open(db) as reader:
        (old,) = reader.list_runs()
    assert old.status == "stale"
    hung = fake_server.requests_for("engineer")[1:]
    before = len(fake_server.requests)

    fake_server.script("engineer", PERSONA)
    result = resume(db, old.id)

    check_resumed(db, old.id, result, fake_server, before, hung)
    assert answered_calls(db, old.id) == 7


def answered_calls_any(db: Path) -> int:
    """Answered calls so far in the one run a process is writing (0 before it has begun)."""
    with TranscriptReader.open(db) as reader:
        return sum(answered_calls(db, run.id) for run in reader.list_runs())


def test_council_with_a_drawn_shuffle_seed_resumes_in_the_same_orders(
    fake_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """The seed is drawn at the start and kept in the run's config, so the resumed reviewers
    see the answers in the same orders and their reviews hash alike."""
    panel_file = on_fake_server("council", fake_server, tmp_path)
    drawn = CouncilSettings.of(load_panel(panel_file))
    assert drawn.shuffle and drawn.seed is None
    fake_server.script("historian", PERSONA, hang())  # answers, then hangs on its review
    db = tmp_path / "runs.db"
    old_id = asyncio.run(interrupted_run(panel_file, db, lambda done: done == 7 and len(fake_server.requests) == 8))
    with TranscriptReader.open(db) as reader:
        seed = reader.get_run(old_id).config["seed"]
    assert isinstance(seed, int)
    hung = fake_server.requests_for("historian")[1:]
    before = len(fake_server.requests)

    fake_server.script("historian", PERSONA)
    result = resume(db, old_id)

    check_resumed(db, old_id, result, fake_server, before, hung)
    assert result["seed"] == seed and len(fake_server.requests) - before == 2  # the review, then the synthesis
    assert result["stage3_synthesis"]["chairman"] == "sage"


def test_confer_answering_in_turn_resumes_with_the_answers_already_made(
    fake_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """Each answer's request quotes the answers before it, and its hash covers them: the two
    answers made are reused, the hung third is asked again byte for byte (showing the same
    two), and the fourth answers after it."""
    panel_file = on_fake_server("confer", fake_server, tmp_path)
    panel_file.write_text(panel_file.read_text() + "answer_order: sequential\n")
    order = load_panel(panel_file).member_names
    fake_server.script(order[2], hang())
    db = tmp_path / "runs.db"
    old_id = asyncio.run(interrupted_run(panel_file, db, lambda done: done == 2 and len(fake_server.requests) == 3))
    assert [request.model for request in fake_server.requests] == order[:3], "one at a time, in member order"
    hung = fake_server.requests_for(order[2])
    before = len(fake_server.requests)

    fake_server.script(order[2], PERSONA)
    result = resume(db, old_id)

    check_resumed(db, old_id, result, fake_server, before, hung)
    assert answered_calls(db, old_id) == 2
    assert [request.model for request in fake_server.requests[before : before + 2]] == order[2:]
    assert prompt_answers(fake_server.requests[before + 1]) == 3
    assert result["reached_answer"] and list(result["initial_answers"]) == order


def prompt_answers(request: RecordedRequest) -> int:
    return str(request.messages[-1].get("content") or "").count("=== end of Answer ")


def test_vote_resumes_with_only_the_missing_ballot(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    panel_file = on_fake_server("vote", fake_server, tmp_path)
    fake_server.script("optimist", hang())
    db = tmp_path / "runs.db"
    old_id = asyncio.run(interrupted_run(panel_file, db, lambda done: done == 4 and len(fake_server.requests) == 5))
    hung = fake_server.requests_for("optimist")
    before = len(fake_server.requests)

    fake_server.script("optimist", PERSONA)
    result = resume(db, old_id)

    check_resumed(db, old_id, result, fake_server, before, hung)
    assert [request.model for request in fake_server.requests[before:]] == ["optimist"]
    assert result["total_votes"] == 5 and result["winner"] is not None


def test_orchestrate_resumes_after_its_plan_and_tasks(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    """The plan (structured output) and every subtask come from the store; only the
    synthesis, which hung, is asked again."""
    panel_file = on_fake_server("orchestrate", fake_server, tmp_path)
    fake_server.script("skeptic", hang())  # the chairman: the synthesis hangs
    db = tmp_path / "runs.db"
    # The synthesis is asked only once every subtask is done, and nothing after it.
    old_id = asyncio.run(
        interrupted_run(
            panel_file,
            db,
            lambda done: bool(fake_server.requests_for("skeptic")) and done == len(fake_server.requests) - 1,
        )
    )
    hung = fake_server.requests_for("skeptic")[-1:]
    before = len(fake_server.requests)

    fake_server.script("skeptic", PERSONA)
    result = resume(db, old_id)

    check_resumed(db, old_id, result, fake_server, before, hung)
    assert [request.model for request in fake_server.requests[before:]] == ["skeptic"]
    assert result["success"] and result["succeeded"] == len(result["plan"]) == answered_calls(db, old_id) - 1


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_protocol_replays_its_prompts_byte_for_byte(
    protocol: str, fake_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """A run marked interrupted after it answered everything resumes with no request at all:
    every prompt of every protocol (fence tags and drawn seeds included) comes out as before."""
    panel_file = on_fake_server(protocol, fake_server, tmp_path)
    db = tmp_path / "runs.db"
    first = cli_json("run", str(panel_file), "--db", str(db))
    before = len(fake_server.requests)
    with contextlib.closing(sqlite3.connect(db)) as con, con:
        con.execute("UPDATE runs SET status = 'interrupted' WHERE id = ?", (first["run_id"],))

    result = resume(db, first["run_id"])

    assert len(fake_server.requests) == before, [request.model for request in fake_server.requests[before:]]
    assert result["final_answer"] == first["final_answer"] and result["calls"] == first["calls"]
    assert result["calls_by_status"]["reused"] == result["calls"], "every call taken from the store"
    assert result["tokens"] == first["tokens"], "a reused call keeps what the first run paid"
    assert result["spent_anew"] == {"calls": 0, "tokens": None, "cost": None}


@pytest.mark.subprocess
def test_a_finished_run_cannot_be_resumed(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    first = cli_json("run", str(on_fake_server("vote", fake_server, tmp_path)), "--db", str(db))
    done = panel_process("resume", first["run_id"][:8], "--db", str(db))
    assert done.returncode == 2
    assert (
        done.stderr
        == f"panel: Run {first['run_id'][:8]} has already finished; only an interrupted or crashed run can be resumed.\n"
    )


def test_a_run_still_running_is_not_resumed(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    panel_file = on_fake_server("vote", fake_server, tmp_path)
    fake_server.default(hang())
    db = tmp_path / "runs.db"
    refused: list[BaseException | None] = []

    async def scenario() -> None:
        panel = load_panel(panel_file)
        store = await TranscriptStore.open(db)
        bus = EventBus("stillrunning", [store])
        gateway = Gateway(bus.emit, defaults=panel.defaults)
        task = asyncio.create_task(run_engine(engine_of("vote"), panel, panel.question or "", gateway, bus))
        try:
            await eventually(lambda: len(fake_server.requests) >= len(panel.members), "every member asked")
            refused.append(cli("resume", "stillrunning", "--db", str(db)).exception)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await gateway.aclose()
            await store.close()

    asyncio.run(scenario())
    assert isinstance(refused[0], UserError)
    assert (
        refused[0].message
        == "Run stillrun is still running in another panel process; resume it once that process has stopped."
    )


def test_a_run_whose_panel_held_a_secret_is_refused(
    fake_server: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store keeps an expanded `${VAR}` only as [redacted]: the panel cannot be rebuilt."""
    monkeypatch.setenv("PANEL_TEST_PERSONA_NOTE", "a note kept out of the store")
    panel_file = on_fake_server("vote", fake_server, tmp_path)
    data = yaml.safe_load(panel_file.read_text())
    data["members"][0]["system"] = "Remember ${PANEL_TEST_PERSONA_NOTE}."
    panel_file.write_text(yaml.safe_dump(data, sort_keys=False))
    db = tmp_path / "runs.db"
    first = cli_json("run", str(panel_file), "--db", str(db))
    with contextlib.closing(sqlite3.connect(db)) as con, con:
        con.execute("UPDATE runs SET status = 'interrupted' WHERE id = ?", (first["run_id"],))

    outcome = cli("resume", first["run_id"], "--db", str(db))
    assert isinstance(outcome.exception, UserError)
    assert outcome.exception.message == (
        f"Run {first['run_id'][:8]} cannot be resumed: its panel or question held a secret the store keeps only as"
        " [redacted]; run its panel file again instead."
    )


def test_the_panel_a_run_stores_is_the_panel_it_ran(tmp_path: Path) -> None:
    """Down to which fields were set: supervise's correction rounds default to 2 only while
    `max_rounds` is unset, and a stage limit set to `none` is no limit, not the default."""
    data = yaml.safe_load(files("panel_cli").joinpath("starters/supervise.demo.yaml").read_text(encoding="utf-8"))
    del data["max_rounds"]
    data["timeouts"] = {"task": "2m", "synthesis": "none"}
    panel_file = tmp_path / "supervise.yaml"
    panel_file.write_text(yaml.safe_dump(data, sort_keys=False))
    db = tmp_path / "runs.db"
    first = cli_json("run", str(panel_file), "--db", str(db))
    with TranscriptReader.open(db) as reader:
        record = reader.get_run(first["run_id"])

    panel = stored_panel(record, record.id[:8])

    ran = load_panel(panel_file)
    assert panel.model_fields_set == ran.model_fields_set | {"protocol"}
    assert correction_rounds(panel) == correction_rounds(ran) == 2
    assert panel.timeouts.get("synthesis", 60.0) is None and panel.timeouts.get("review", 60.0) == 60.0
    assert panel.model_dump() == ran.model_dump()


def test_every_protocol_has_its_engine() -> None:
    engines: dict[str, Callable[..., object]] = {protocol: engine_of(protocol) for protocol in PROTOCOLS}
    assert {protocol: engine.__name__ for protocol, engine in engines.items()} == {
        protocol: protocol for protocol in PROTOCOLS
    }
