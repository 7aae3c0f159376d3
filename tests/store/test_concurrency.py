"""Eight processes writing one new database at once lose no run and no event.

Each process is the store alone (TranscriptStore and EventBus, no CLI and no litellm), so the
test pays eight Python starts, not eight `panel` starts. They all wait for one word on stdin
before writing, so their writes overlap from the first event on, creating the file included."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from panel_cli.store.connection import _use_wal
from panel_cli.store.reader import TranscriptReader

ROOT = Path(__file__).resolve().parents[2]
WRITERS = 8
ROUNDS = 6  # vote rounds per run, of 8 events and 2 calls each

WRITER = """
import asyncio, sys
from panel_cli.events import EventBus
from panel_cli.store.subscriber import TranscriptStore
from tests.store.sample_runs import ENDINGS, answer_calls, run_started, vote_round

run_id, path, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])

async def main() -> None:
    print("ready", flush=True)
    sys.stdin.readline()
    async with await TranscriptStore.open(path) as store:
        bus = EventBus(run_id, [store])
        await bus.emit(run_started(question=f"Question of {run_id}?"))
        for event in answer_calls(run_id):
            await bus.emit(event)
        for number in range(rounds):
            for event in vote_round(f"{run_id}-{number}"):
                await bus.emit(event)
        await bus.emit(ENDINGS["finished"])

asyncio.run(main())
"""


@pytest.mark.subprocess
def test_eight_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, f"run{number}", str(path), str(ROUNDS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for number in range(WRITERS)
    ]
    for writer in writers:
        assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
    for writer in writers:
        assert writer.stdin is not None
        writer.stdin.write("go\n")
        writer.stdin.flush()
    outcomes = [writer.communicate(timeout=120) for writer in writers]
    assert [writer.returncode for writer in writers] == [0] * WRITERS, [stderr for _, stderr in outcomes]

    events_per_run = 1 + 5 + ROUNDS * 8 + 1
    calls_per_run = 2 + ROUNDS * 2
    with TranscriptReader.open(path) as reader:
        runs = reader.list_runs(limit=-1)
        assert sorted(run.id for run in runs) == [f"run{number}" for number in range(WRITERS)]
        for run in runs:
            events = reader.run_events(run.id)
            assert [event["seq"] for event in events] == list(range(1, events_per_run + 1))
            assert (run.status, run.calls, len(reader.run_calls(run.id))) == ("finished", calls_per_run, calls_per_run)
            assert events[0]["question"] == f"Question of {run.id}?"


class LockedTwice:
    """A new file another panel is switching to WAL: the first two asks find it locked, and
    SQLite says so at once rather than waiting (as it does where waiting could deadlock)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def execute(self, sql: str) -> sqlite3.Cursor:
        self.asked.append(sql)
        if len(self.asked) <= 2:
            busy = sqlite3.OperationalError("database is locked")
            busy.sqlite_errorname = "SQLITE_BUSY"  # type: ignore[attr-defined]
            raise busy
        return sqlite3.connect(":memory:").execute("SELECT 'wal'")


def test_the_switch_to_wal_is_asked_again_while_the_new_file_is_locked() -> None:
    racing = LockedTwice()
    _use_wal(racing)  # type: ignore[arg-type]
    assert racing.asked == ["PRAGMA journal_mode"] * 3  # the third ask finds the file in WAL already
