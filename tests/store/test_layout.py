"""How runs are laid out: each distinct text once, events that leave out what their row holds,
ISO-8601 times, readable with the plain sqlite3 module, and every run read back whole."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from panel_cli.events import EventBus, RunFailed, RunFinished, WarningRaised
from panel_cli.store.connection import connect
from panel_cli.store.reader import TranscriptReader
from panel_cli.store.rows import same
from panel_cli.store.subscriber import TranscriptStore
from panel_cli.store.texts import TEXT_MIN, Composer, Texts, decode, encode
from panel_cli.store.times import epoch, iso_time
from panel_cli.store.writer import RunWriter
from tests.store.protocol_runs import ENGINES, stored_run
from tests.store.sample_runs import ANSWER, confer_run, record, run_started

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$")


def rows(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
    with sqlite3.connect(path) as db:
        db.row_factory = sqlite3.Row
        found = db.execute(sql, params).fetchall()
    db.close()
    return found


def long_strings(value: Any) -> list[str]:
    """Strings a JSON column holds inline that should have been texts."""
    if isinstance(value, str):
        return [value] if len(value) >= TEXT_MIN else []
    if isinstance(value, dict):
        return [found for item in value.values() for found in long_strings(item)]
    if isinstance(value, list):
        return [found for item in value for found in long_strings(item)]
    return []


@pytest.mark.parametrize("protocol", list(ENGINES))
async def test_every_protocol_reads_back_exactly_as_it_was_emitted(tmp_path: Path, protocol: str) -> None:
    path = tmp_path / "panel.db"
    recorder = await stored_run(path, "r1", protocol)
    emitted = [{key: value for key, value in payload.items() if key != "messages"} for payload in recorder.payloads]
    finished = [payload for payload in recorder.payloads if payload["type"] in ("call_finished", "call_failed")]
    with TranscriptReader.open(path) as reader:
        assert reader.run_events("r1") == emitted
        calls = reader.run_calls("r1")
        run = reader.get_run("r1")
    assert [(call.id, call.messages, call.response) for call in calls] == [
        (payload["call_id"], payload["messages"], payload.get("text")) for payload in finished
    ]
    ended = emitted[-1]
    assert (run.final_answer, run.result, run.finished_at) == (ended["final_answer"], ended["result"], ended["ts"])
    assert run.config == emitted[0]["config"]
    # Every column of a run panel wrote reads back as the type its record says: nothing is damage.
    assert run.damage is None and run.status == "finished"
    with TranscriptReader.open(path) as reader:
        assert [summary.damage for summary in reader.list_runs()] == [None]


async def test_each_distinct_text_is_stored_once(tmp_path: Path) -> None:
    """No JSON column holds a long string; the events a row holds the fields of keep nothing;
    each answer is one text, however many prompts, blocks and results quote it."""
    path = tmp_path / "panel.db"
    recorder = await stored_run(path, "r1", "confer")
    for row in rows(path, "SELECT payload_json FROM events WHERE payload_json IS NOT NULL"):
        assert long_strings(json.loads(row["payload_json"])) == []
    for row in rows(path, "SELECT request_json FROM calls UNION ALL SELECT result_json FROM runs"):
        assert long_strings(json.loads(row[0])) == []
    kept = rows(path, "SELECT type, count(*) AS events, count(payload_json) AS kept FROM events GROUP BY type")
    compact = {
        row["type"]: row["kept"] for row in kept if row["type"] in ("run_finished", "call_started", "call_finished")
    }
    assert compact == {"run_finished": 0, "call_started": 0, "call_finished": 0}

    bodies = [row["body"] for row in rows(path, "SELECT body FROM texts WHERE body IS NOT NULL")]
    answers = {
        payload["text"]
        for payload in recorder.payloads
        if payload["type"] == "call_finished" and payload["stage"] == "answer"
    }
    assert len(answers) == 4
    for answer in answers:
        assert sum(answer in body for body in bodies) == 1
    prompts = {
        message["content"]
        for payload in recorder.payloads
        if payload["type"] == "call_finished" and payload["stage"] == "vote"
        for message in payload["messages"]
    }
    composed = rows(path, "SELECT count(*) FROM texts WHERE parts IS NOT NULL")[0][0]
    assert len(prompts) == composed == 4  # every member's vote prompt, kept as parts
    (final,) = rows(path, "SELECT final_answer_text, result_json FROM runs")
    assert f'"final_answer":{{"$text":{final["final_answer_text"]}}}' in final["result_json"]


async def test_times_are_iso_8601_utc_text_and_read_back_exactly(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    await record(path, "r1", confer_run("r1"))
    (run,) = rows(path, "SELECT started_at, finished_at FROM runs")
    stamps = [row[0] for row in rows(path, "SELECT ts FROM events UNION ALL SELECT ts FROM calls")]
    assert all(ISO.match(stamp) for stamp in [*run, *stamps])
    with TranscriptReader.open(path) as reader:
        events = reader.run_events("r1")
        summary = reader.get_run("r1")
    assert [iso_time(event["ts"]) for event in events] == [
        row[0] for row in rows(path, "SELECT ts FROM events ORDER BY seq")
    ]
    assert (summary.started_at, summary.finished_at) == (events[0]["ts"], events[-1]["ts"])


@pytest.mark.parametrize("ts", [0.0, 1.5, 1_700_000_000.25, 1_764_514_392.1234567, 4_102_444_800.000001])
def test_iso_time_keeps_the_float(ts: float) -> None:
    assert epoch(iso_time(ts)) == ts
    assert len(iso_time(ts)) == 30


def test_iso_times_sort_as_text_in_time_order() -> None:
    times = [1_700_000_000.5, 1_700_000_000.25, 1_700_000_000.125, 1_700_000_001.0, 1_699_999_999.999999]
    assert sorted(times, key=iso_time) == sorted(times)


async def test_the_views_read_with_plain_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    recorder = await stored_run(path, "r1", "confer")
    (run,) = rows(path, "SELECT * FROM run_texts")
    assert (run["question"], run["status"], ISO.match(run["started_at"]) is not None) == (
        recorder.payloads[0]["question"],
        "finished",
        True,
    )
    assert json.loads(run["config"]) == recorder.payloads[0]["config"]
    assert run["final_answer"] == recorder.payloads[-1]["final_answer"]
    calls = rows(path, "SELECT * FROM call_texts WHERE run_id = 'r1' ORDER BY ts")
    finished = [payload for payload in recorder.payloads if payload["type"] == "call_finished"]
    assert [call["response"] for call in calls] == [payload["text"] for payload in finished]
    answers = [json.loads(call["request"]) for call in calls if call["stage"] == "answer"]
    assert answers == [payload["messages"] for payload in finished if payload["stage"] == "answer"]
    (vote, *_) = [json.loads(call["request"]) for call in calls if call["stage"] == "vote"]
    assert set(vote[0]["content"]) == {"parts"}  # a composed prompt shows how it is made


async def test_strings_that_look_like_references_stay_data(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    tricky = {"$text": 1, "also": [{"$text": "x" * 100}, {"$esc": {"$text": 2}}], "$esc": "a"}
    events = [
        run_started(),
        WarningRaised(message="w" * 200),
        RunFinished(final_answer=ANSWER, result={"nested": tricky, "one": {"$text": 3}}),
    ]
    await record(path, "r1", events)
    with TranscriptReader.open(path) as reader:
        assert reader.get_run("r1").result == {"nested": tricky, "one": {"$text": 3}}
        assert reader.run_events("r1")[1]["message"] == "w" * 200


def test_a_field_is_the_same_only_with_the_same_json() -> None:
    """What an event keeps beside its row: a field the row gives back differently (another
    JSON type, another key order) stays in the event, so it reads back as it was emitted."""
    assert same("a long prompt", "a long prompt") and same(None, None) and same([1, {"a": 2}], [1, {"a": 2}])
    assert not same(1, 1.0) and not same(1, True) and not same(0, None) and not same("1", 1)
    assert not same({"a": 1, "b": 2}, {"b": 2, "a": 1})
    nan = float("nan")
    assert same(nan, float("nan")) and same(2.5, 2.5) and not same(2.5, 2.50001)


def test_encode_and_decode_are_inverse() -> None:
    stored: dict[int, str] = {}

    def put(text: str) -> int:
        stored[len(stored) + 1] = text
        return len(stored)

    value = {"a": "short", "b": "long " * 30, "c": [{"$text": 7}, {"$esc": 1}, {"$text": 7, "x": 1}], "d": None}
    encoded = encode(value, put)
    assert encoded["b"] == {"$text": 1} and encoded["c"][0] == {"$esc": {"$text": 7}}

    class Cache:
        def get(self, text_id: int) -> str:
            return stored[text_id]

    assert decode(encoded, Cache()) == value  # type: ignore[arg-type]


def composer_for(path: Path) -> tuple[sqlite3.Connection, Texts, Composer]:
    db = connect(path)
    texts = Texts(db)
    return db, texts, Composer(texts)


def body_of(db: sqlite3.Connection, text_id: int) -> sqlite3.Row:
    return db.execute("SELECT body, parts FROM texts WHERE id = ?", (text_id,)).fetchone()


def test_a_prompt_quoting_texts_of_the_run_is_kept_as_parts(tmp_path: Path) -> None:
    db, texts, composer = composer_for(tmp_path / "panel.db")
    answers = [f"Answer number {n}: " + "a thoughtful paragraph about storage. " * 20 for n in range(3)]
    ids = [texts.put(answer, composer=composer) for answer in answers]
    composer.commit()
    prompt = "Question:\nWhich?\n\n" + "\n".join(
        f"=== {n} ===\n{answer}\n=== end ===" for n, answer in enumerate(answers)
    )
    prompt_id = texts.put(prompt, composer=composer, compose=True)
    composer.commit()
    row = body_of(db, prompt_id)
    assert row["body"] is None
    assert [part for part in json.loads(row["parts"]) if isinstance(part, list)] == [[text_id] for text_id in ids]
    # Another prompt that differs in its middle only is sliced from the first.
    other = prompt.replace("=== 1 ===", "=== one ===")
    other_id = texts.put(other, composer=composer, compose=True)
    parts = json.loads(body_of(db, other_id)["parts"])
    assert parts[0][:2] == [prompt_id, 0] and parts[-1][0] == prompt_id and len(json.dumps(parts)) < 100
    db.close()


def test_a_prompt_quotes_texts_of_its_own_group_commit_as_it_quotes_committed_ones(tmp_path: Path) -> None:
    """A vote prompt is written in the same group commit as the answers it quotes: it is kept
    as the same parts as when they were committed first, and a text too short to be found
    again (`QUOTE_MIN`) is quoted in neither case."""
    answers = [f"Answer number {n}: " + "a thoughtful paragraph about storage. " * 20 for n in range(3)]
    short = "Use SQLite."
    prompt = "Question:\nWhich?\n\n" + "\n".join(f"=== {n} ===\n{text}" for n, text in enumerate([short, *answers]))
    found = []
    for commit_first in (True, False):
        db, texts, composer = composer_for(tmp_path / f"{commit_first}.db")
        ids = [texts.put(text, composer=composer) for text in [*answers, short]]
        if commit_first:
            composer.commit()
        parts = json.loads(body_of(db, texts.put(prompt, composer=composer, compose=True))["parts"])
        found.append([part for part in parts if isinstance(part, list)])
        assert found[-1] == [[text_id] for text_id in ids[:3]]
        db.close()
    assert found[0] == found[1]


def test_nothing_is_composed_from_a_text_whose_transaction_was_rolled_back(tmp_path: Path) -> None:
    db, texts, composer = composer_for(tmp_path / "panel.db")
    answer = "A line of an answer that is quoted.\n" * 40
    db.execute("BEGIN")
    texts.put(answer, composer=composer)
    db.execute("ROLLBACK")
    composer.rollback()
    prompt_id = texts.put("Question:\nWhich?\n\n" + answer + "tail\n", composer=composer, compose=True)
    assert body_of(db, prompt_id)["parts"] is None
    db.close()


def test_long_lines_every_run_repeats_are_texts_of_their_own(tmp_path: Path) -> None:
    db, texts, composer = composer_for(tmp_path / "panel.db")
    schema = (
        '{"properties": {"choice": {"type": "string"}}, "description": "'
        + "the ballot every voter returns " * 10
        + '"}'
    )
    first = texts.put(f"Question:\nOne?\n\nReply with JSON:\n{schema}\n" + "x\n" * 600, composer=composer, compose=True)
    composer.commit()
    second = texts.put(
        f"Question:\nTwo?\n\nReply with JSON:\n{schema}\n" + "y\n" * 600, composer=Composer(texts), compose=True
    )
    (schema_id,) = [row[0] for row in db.execute("SELECT id FROM texts WHERE body = ?", (schema,))]
    for prompt_id in (first, second):
        assert [schema_id] in json.loads(body_of(db, prompt_id)["parts"])
    db.close()


def test_a_field_the_row_cannot_give_back_stays_in_the_event(tmp_path: Path) -> None:
    """An engine may add a field the calls table has no column for, or a value of another
    type: the event keeps it, and reads back as it was."""
    path = tmp_path / "panel.db"
    db = connect(path)
    writer = RunWriter(db, pid=None, host=None)
    started = {**run_started().model_dump(mode="json"), "run_id": "r1", "seq": 1, "ts": 10.0}
    call = {
        "run_id": "r1",
        "seq": 2,
        "ts": 11.0,
        "type": "call_finished",
        "call_id": "c1",
        "member": "gpt",
        "model": "m",
        "stage": "answer",
        "round": 0,
        "about": None,
        "text": "Yes.",
        "truncated": False,
        "request_hash": "abc",
        "reused": False,
        "tokens_in": 1,
        "tokens_out": 2,
        "cost": 0.0,
        "latency": 1,
        "attempts": 1,
        "cached": True,
    }
    writer.write(started, None)
    writer.write(call, [{"role": "user", "content": "Q?", "name": "asker"}])
    db.close()
    assert json.loads(rows(path, "SELECT payload_json FROM events WHERE seq = 2")[0][0]) == {
        "latency": 1,
        "cached": True,
    }
    with TranscriptReader.open(path) as reader:
        assert reader.run_events("r1")[1] == call
        assert reader.run_calls("r1")[0].messages == [{"role": "user", "content": "Q?", "name": "asker"}]


async def test_a_run_that_ends_twice_keeps_both_endings(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    first = RunFinished(final_answer=ANSWER, result={"winner": "gpt", "notes": "n" * 100})
    await record(path, "r1", [run_started(), first, RunFailed(message="It failed afterwards.")])
    with TranscriptReader.open(path) as reader:
        events = reader.run_events("r1")
        run = reader.get_run("r1")
    assert {key: events[1][key] for key in ("final_answer", "reached_answer", "result")} == {
        "final_answer": ANSWER,
        "reached_answer": True,
        "result": {"winner": "gpt", "notes": "n" * 100},
    }
    assert events[2]["message"] == "It failed afterwards."
    assert (run.status, run.error, run.final_answer) == ("failed", "It failed afterwards.", ANSWER)


async def test_the_store_keeps_the_pid_and_host_of_its_process(tmp_path: Path) -> None:
    import os
    import socket

    path = tmp_path / "panel.db"
    async with await TranscriptStore.open(path) as store:
        await EventBus("r1", [store]).emit(run_started())
    with TranscriptReader.open(path) as reader:
        run = reader.get_run("r1")
    assert (run.pid, run.host, run.status) == (os.getpid(), socket.gethostname(), "running")
