"""How events reach the file: a call's events are queued and never wait for the disk; the
events that move a run on (its start, a stage, its end) wait until everything before them is
committed; what is queued meanwhile is one transaction. And each event is dumped to JSON and
scrubbed once, by the bus, for every subscriber."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from panel_cli.events import BaseEvent, CallFinished, EventBus, json_payload
from panel_cli.redact import REDACTED
from panel_cli.store.subscriber import StoreFailure, TranscriptStore
from panel_cli.store.writer import RunWriter
from tests.store.sample_runs import ENDINGS, answer_calls, run_started, vote_round

KEY = "fake-test-abcdefghijklmnop123"


def committed(path: Path) -> list[tuple[int, str]]:
    """(seq, type) of every event another connection can read."""
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT seq, type FROM events ORDER BY seq").fetchall()
    db.close()
    return rows


class Transactions:
    """Counts the events of each of the writer's transactions."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sizes: list[int] = []
        write_all = RunWriter.write_all

        def counted(writer: RunWriter, payloads: list[dict[str, Any]]) -> None:
            self.sizes.append(len(payloads))
            write_all(writer, payloads)

        monkeypatch.setattr(RunWriter, "write_all", counted)


async def test_a_calls_events_never_wait_and_the_next_stage_waits_for_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing yields to the event loop between the call events, so none is written before
    the next stage begins; that stage then waits for all of them, in one transaction."""
    transactions = Transactions(monkeypatch)
    path = tmp_path / "panel.db"
    async with await TranscriptStore.open(path) as store:
        bus = EventBus("r1", [store])
        await bus.emit(run_started())
        assert committed(path) == [(1, "run_started")]
        stage, *calls = answer_calls("r1")
        await bus.emit(stage)
        assert committed(path) == [(1, "run_started"), (2, "stage_started")]
        for event in calls:
            await bus.emit(event)
        assert len(committed(path)) == 2
        await bus.emit(vote_round("r1")[0])
        assert [seq for seq, _ in committed(path)] == list(range(1, len(calls) + 4))
        assert transactions.sizes == [1, 1, len(calls) + 1]


async def test_a_runs_end_is_on_disk_when_the_bus_hands_it_on(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    async with await TranscriptStore.open(path) as store:
        bus = EventBus("r1", [store])
        events = [run_started(), *answer_calls("r1"), ENDINGS["interrupted"]]
        for event in events:
            await bus.emit(event)
        assert committed(path)[-1] == (len(events), "run_interrupted")


class Seen:
    """A subscriber that keeps what it is handed."""

    def __init__(self) -> None:
        self.events: list[BaseEvent] = []

    async def __call__(self, event: BaseEvent) -> None:
        self.events.append(event)


async def test_the_bus_dumps_and_scrubs_each_event_once_for_every_subscriber(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dumps: list[str] = []
    model_dump = BaseEvent.model_dump

    def counted(event: BaseEvent, **kwargs: Any) -> dict[str, Any]:
        dumps.append(event.type)  # type: ignore[attr-defined]
        return model_dump(event, **kwargs)

    monkeypatch.setattr(BaseEvent, "model_dump", counted)
    seen = Seen()
    events = [run_started(question=f"Is {KEY} a key?"), *answer_calls("r1"), ENDINGS["finished"]]
    async with await TranscriptStore.open(tmp_path / "panel.db") as store:
        bus = EventBus("r1", [store, seen], secrets=[KEY])
        for event in events:
            await bus.emit(event)
    assert dumps == [event.type for event in events]  # type: ignore[attr-defined]
    assert seen.events[0].question == f"Is {REDACTED} a key?"  # type: ignore[attr-defined]
    assert json_payload(seen.events[0])["question"] == f"Is {REDACTED} a key?"


def test_a_subscriber_gets_the_secrets_the_bus_did_not_scrub_scrubbed_and_a_copy_is_dumped_anew() -> None:
    event = CallFinished(
        call_id="c", member="m", model="openai/m", stage="answer", text=f"{KEY} and hunter2hunter2", latency=1.0
    )
    assert json_payload(event, [KEY])["text"] == f"{REDACTED} and hunter2hunter2"
    copy = event.model_copy(update={"text": "changed"})
    assert json_payload(copy)["text"] == "changed"


async def test_after_a_failed_write_close_names_every_run_not_kept_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs share a store (a batch): a write fails (`OperationalError`, as SQLite raises
    for a full disk), both are marked failed, and a run begun afterwards is not written."""
    path = tmp_path / "panel.db"
    write_all = RunWriter.write_all

    def failing(writer: RunWriter, payloads: list[dict[str, Any]]) -> None:
        if any(payload["type"] == "stage_started" for payload in payloads):
            raise sqlite3.OperationalError("database or disk is full")
        write_all(writer, payloads)

    store = await TranscriptStore.open(path)
    first, second, third = EventBus("run-1", [store]), EventBus("run-2", [store]), EventBus("run-3", [store])
    await first.emit(run_started())
    await second.emit(run_started())
    monkeypatch.setattr(RunWriter, "write_all", failing)
    for event in answer_calls("run-1"):
        await first.emit(event)
    await third.emit(run_started())
    with pytest.raises(StoreFailure) as caught:
        await store.close()
    assert caught.value.exit_code == 1
    assert caught.value.message == (
        f"Could not write to the transcript database {path} (database or disk is full): runs run-1 and run-2 are"
        " kept up to that point, marked failed; run run-3 is not kept whole."
    )
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT id, status, error FROM runs ORDER BY id").fetchall()
    db.close()
    error = "the transcript database could not be written: database or disk is full"
    assert rows == [("run-1", "failed", error), ("run-2", "failed", error)]
