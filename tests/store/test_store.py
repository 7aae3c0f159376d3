from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

from panel_cli.errors import UserError
from panel_cli.events import EventBus, MemberSkipped, RunFinished, parse_event
from panel_cli.store.reader import TranscriptReader
from panel_cli.store.subscriber import TranscriptStore
from tests.store.sample_runs import ANSWER, ENDINGS, QUESTION, answer_calls, confer_run, record, run_started, vote_round


def run_row(path: Path, run_id: str) -> sqlite3.Row:
    """Read through a connection of its own, as another process would, with the view that
    puts each run's texts in place."""
    with sqlite3.connect(path) as db:
        db.row_factory = sqlite3.Row
        return db.execute("SELECT * FROM run_texts WHERE id = ?", (run_id,)).fetchone()


async def test_a_run_is_written_as_it_happens(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    async with await TranscriptStore.open(path) as store:
        bus = EventBus("r1", [store])
        await bus.emit(run_started())
        row = run_row(path, "r1")
        assert row["status"] == "running"
        assert row["question"] == QUESTION
        assert json.loads(row["config"]) == {"max_rounds": 3, "until_convergence": True}
        assert row["calls"] == 0 and row["finished_at"] is None

        for event in answer_calls("r1"):
            await bus.emit(event)
        await bus.emit(vote_round("r1")[0])  # the next stage begins once the answers are on disk
        row = run_row(path, "r1")
        assert row["status"] == "running"
        assert row["calls"] == 2
        with TranscriptReader.open(path) as reader:
            assert [event["seq"] for event in reader.run_events("r1")] == [1, 2, 3, 4, 5, 6, 7]
            assert reader.list_runs()[0].status == "running"


async def test_events_are_stored_in_sequence_and_replayable(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    events = confer_run("r1")
    await record(path, "r1", events)
    with TranscriptReader.open(path) as reader:
        stored = reader.run_events("r1")
    assert [event["seq"] for event in stored] == list(range(1, len(events) + 1))
    assert [event["type"] for event in stored] == [event.type for event in events]  # type: ignore[attr-defined]
    assert all("messages" not in event for event in stored)
    replayed = [parse_event(event) for event in stored]
    assert replayed[0].run_id == "r1"
    assert isinstance(replayed[-1], RunFinished) and replayed[-1].final_answer == ANSWER


async def test_calls_keep_messages_responses_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    await record(path, "r1", confer_run("r1"))
    with TranscriptReader.open(path) as reader:
        calls = reader.run_calls("r1")
    assert [(call.member, call.stage, call.round) for call in calls] == [
        ("gpt", "answer", 0),
        ("claude", "answer", 0),
        ("gpt", "vote", 1),
        ("claude", "vote", 1),
    ]
    first, failed = calls[0], calls[3]
    assert first.messages == [{"role": "user", "content": QUESTION}]
    assert first.response == "PostgreSQL."
    assert (first.tokens_in, first.tokens_out, first.cost, first.latency) == (100, 20, 0.002, 1.5)
    assert failed.response is None and failed.cost is None
    assert (failed.error_kind, failed.error, failed.attempts) == ("timeout", "timed out after 300s", 3)
    assert failed.messages[0]["content"].startswith("Answer A")


async def test_finished_run_has_its_answer_and_totals(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    await record(path, "r1", confer_run("r1"))
    with TranscriptReader.open(path) as reader:
        run = reader.get_run("r1")
    assert run.status == "finished"
    assert run.final_answer == ANSWER
    assert run.result == {"winner": "gpt", "converged": False}
    assert run.calls == 4
    assert run.tokens == 100 + 20 + 90 + 30 + 200 + 40
    assert run.cost == pytest.approx(0.005)  # the known costs; claude's are unknown
    assert [member.name for member in run.members] == ["gpt", "claude"]
    assert run.finished_at is not None and run.finished_at >= run.started_at


async def test_cost_stays_unknown_when_no_call_reports_one(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    await record(path, "r1", [run_started(), *answer_calls("r1", cost_gpt=None, cost_claude=None), ENDINGS["finished"]])
    assert run_row(path, "r1")["cost"] is None
    with TranscriptReader.open(path) as reader:
        run = reader.get_run("r1")
    assert run.cost is None and run.tokens == 240


@pytest.mark.parametrize("status", ["finished", "no_answer", "failed", "interrupted"])
async def test_each_ending_sets_the_status(tmp_path: Path, status: str) -> None:
    path = tmp_path / "panel.db"
    await record(path, "r1", [run_started(), *answer_calls("r1"), ENDINGS[status]])
    with TranscriptReader.open(path) as reader:
        run = reader.get_run("r1")
    assert run.status == status
    assert run.finished_at is not None
    assert run.calls == 2
    assert run.error == ("Every member failed." if status == "failed" else None)
    assert (run.final_answer is not None) == (status == "finished")


async def test_list_runs_newest_first_with_a_status_filter(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    await record(path, "old", confer_run("old"))
    await record(path, "mid", confer_run("mid", ENDINGS["failed"]))
    await record(path, "new", [run_started()])
    with TranscriptReader.open(path) as reader:
        assert [run.id for run in reader.list_runs()] == ["new", "mid", "old"]
        assert [run.id for run in reader.list_runs(limit=2)] == ["new", "mid"]
        assert [run.id for run in reader.list_runs(status="failed")] == ["mid"]
        assert reader.list_runs()[0].status == "running"


async def test_get_run_by_unique_prefix(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    for run_id in ("abc123", "abd456", "xyz789"):
        await record(path, run_id, [run_started()])
    with TranscriptReader.open(path) as reader:
        assert reader.get_run("abc").id == "abc123"
        assert reader.get_run("xyz789").id == "xyz789"
        with pytest.raises(UserError, match=r"The id 'ab' matches several runs \((abc123, abd456|abd456, abc123)\)"):
            reader.get_run("ab")
        with pytest.raises(UserError, match="No run has the id 'nope'"):
            reader.get_run("nope")
        # A prefix is matched literally, not as a LIKE pattern.
        with pytest.raises(UserError, match="No run has the id 'a_c'"):
            reader.get_run("a_c")


async def test_short_id_is_the_shortest_unique_prefix(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    ids = ("01JD8X3K4Z7Q9W2E", "01JD8X3K4ZAB0000", "01JD8X3K4ZAB1111", "zzzzzzzzzzzz")
    for run_id in ids:
        await record(path, run_id, [run_started()])
    with TranscriptReader.open(path) as reader:
        short = [reader.short_id(run_id) for run_id in ids]
        assert short == ["01JD8X3K4Z7", "01JD8X3K4ZAB0", "01JD8X3K4ZAB1", "zzzzzzzz"]
        assert [reader.get_run(prefix).id for prefix in short] == list(ids)
        assert reader.short_id("short", min_length=8) == "short"


async def test_concurrent_emits_each_commit_whole(tmp_path: Path) -> None:
    """Calls in a stage finish together; each event's rows must still land as one."""
    path = tmp_path / "panel.db"
    async with await TranscriptStore.open(path) as store:
        bus = EventBus("r1", [store])
        await bus.emit(run_started())
        await asyncio.gather(*(bus.emit(event) for event in vote_round("r1")))
    with TranscriptReader.open(path) as reader:
        assert len(reader.run_events("r1")) == 1 + len(vote_round("r1"))
        assert reader.get_run("r1").calls == 2


async def test_calls_keep_the_raw_detail_and_truncation(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    raw = '{"error": "context_length_exceeded"}'
    await record(path, "r1", [run_started(), *answer_calls("r1", truncated=True), *vote_round("r1", detail=raw)])
    with TranscriptReader.open(path) as reader:
        calls = reader.run_calls("r1")
    assert [call.truncated for call in calls] == [True, False, False, False]
    assert [call.detail for call in calls] == [None, None, None, raw]
    with sqlite3.connect(path) as db:
        stored = db.execute("SELECT truncated, detail FROM calls ORDER BY ts, seq").fetchall()
    assert stored == [(1, None), (0, None), (0, None), (None, raw)]  # a failed call has no reply to cut


async def test_a_skipped_member_is_an_event_and_not_a_call(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    skipped = MemberSkipped(
        member="claude", model="anthropic/claude", stage="vote", round=1, reason="its key was refused"
    )
    await record(path, "r1", [run_started(), *answer_calls("r1"), skipped, ENDINGS["finished"]])
    with TranscriptReader.open(path) as reader:
        events = reader.run_events("r1")
        assert len(reader.run_calls("r1")) == 2
        assert reader.get_run("r1").calls == 2
    assert [event for event in events if event["type"] == "member_skipped"] == [
        {**skipped.model_dump(mode="json"), "run_id": "r1", "seq": 7, "ts": events[6]["ts"]}
    ]


async def test_reading_writes_nothing(tmp_path: Path) -> None:
    """The reader opens the file read-only and creates no -wal or -shm file beside it, so it
    works in a folder nobody may write, and leaves no file behind another user cannot open."""
    folder = tmp_path / "store"
    path = folder / "panel.db"
    await record(path, "r1", confer_run("r1"))
    before = sorted(file.name for file in folder.iterdir())
    assert before == ["panel.db"]
    mtime = path.stat().st_mtime_ns

    with TranscriptReader.open(path) as reader:
        assert [run.id for run in reader.list_runs()] == ["r1"]
        assert reader.get_run("r1").status == "finished"
        assert len(reader.run_calls("r1")) == 4
        assert reader.run_events("r1")
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            reader._db.execute("DELETE FROM runs")
        assert sorted(file.name for file in folder.iterdir()) == before

    assert sorted(file.name for file in folder.iterdir()) == before
    assert path.stat().st_mtime_ns == mtime
