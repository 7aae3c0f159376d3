"""What `panel history` asks of the reader: filters, full-text search, outcomes, ids by
prefix through the primary-key index, stale runs, statistics and answered calls."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from panel_cli.events import RunFinished
from panel_cli.store.connection import connect
from panel_cli.store.reader import TranscriptReader, prefix_successor, search_query
from panel_cli.store.records import outcome_of
from panel_cli.store.writer import RunWriter
from tests.store.protocol_runs import stored_run
from tests.store.sample_runs import ANSWER, ENDINGS, answer_calls, confer_run, record, run_started

DAY = 86400.0


def write_run(
    path: Path,
    run_id: str,
    *,
    started: float,
    protocol: str = "confer",
    question: str = "Which database?",
    answer: str | None = None,
    result: dict[str, Any] | None = None,
    pid: int | None = None,
    host: str | None = None,
    model: str = "openai/gpt-4o",
    cost: float | None = 0.5,
) -> None:
    """A run written at a chosen time by a chosen process, through the store's writer."""
    db = connect(path)
    writer = RunWriter(db, pid=pid, host=host)
    base = {"run_id": run_id}
    writer.write(
        {
            **base,
            "seq": 1,
            "ts": started,
            "type": "run_started",
            "protocol": protocol,
            "panel": "p",
            "question": question,
            "members": [{"name": "a", "model": model, "label": None}],
            "config": {},
        }
    )
    writer.write(
        {
            **base,
            "seq": 2,
            "ts": started + 1,
            "type": "call_finished",
            "call_id": f"{run_id}-1",
            "member": "a",
            "model": model,
            "stage": "answer",
            "round": 0,
            "about": None,
            "text": answer or "…",
            "truncated": False,
            "request_hash": f"hash-{run_id}",
            "reused": False,
            "tokens_in": 10,
            "tokens_out": 5,
            "cost": cost,
            "latency": 1.0,
            "attempts": 1,
        },
        [{"role": "user", "content": question}],
    )
    if answer is not None:
        writer.write(
            {
                **base,
                "seq": 3,
                "ts": started + 2,
                "type": "run_finished",
                "final_answer": answer,
                "reached_answer": True,
                "result": result or {},
            }
        )
    db.close()


def ids(runs: list[Any]) -> list[str]:
    return [run.id for run in runs]


def test_list_runs_by_protocol_since_and_search(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    now = 1_750_000_000.0
    write_run(path, "old", started=now - 10 * DAY, question="Postgres or MySQL for billing?", answer="PostgreSQL.")
    write_run(
        path,
        "vote",
        started=now - 2 * DAY,
        protocol="vote",
        question="Ship on Friday?",
        answer="Postpone a week",
        result={"winner": "Postpone a week"},
    )
    write_run(path, "new", started=now - DAY, question="Which queue?", answer="Use a Postgres table as the queue.")
    write_run(path, "open", started=now, question="Is the audit-log design sound?")
    with TranscriptReader.open(path) as reader:
        assert ids(reader.list_runs()) == ["open", "new", "vote", "old"]
        assert ids(reader.list_runs(protocol="vote")) == ["vote"]
        assert ids(reader.list_runs(since=now - 3 * DAY)) == ["open", "new", "vote"]
        assert ids(reader.list_runs(search="postgresql")) == ["old"]  # any case; in the answer
        assert ids(reader.list_runs(search="Postgres")) == ["new", "old"]  # in a question or an answer
        assert ids(reader.list_runs(search="postgres queue")) == ["new"]  # every word
        assert ids(reader.list_runs(search="audit-log")) == ["open"]  # a phrase
        assert ids(reader.list_runs(search="friday", protocol="vote", since=now - 5 * DAY)) == ["vote"]
        assert ids(reader.list_runs(search="kafka")) == []
        for odd in ('"', "AND OR NOT", "*", "col:umn", "NEAR(a b)", "(", "^x", "  "):
            reader.list_runs(search=odd)  # never a syntax error
        assert ids(reader.list_runs(search="  ")) == ids(reader.list_runs())


def test_search_query_quotes_every_word() -> None:
    assert search_query('audit-log "quoted" OR') == '"audit-log" """quoted""" "OR"'
    assert search_query(" * ( ") is None


def test_the_outcome_is_the_winner_or_the_answers_first_line(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    write_run(path, "won", started=1.0, answer="Long text.", result={"winner": "claude"})
    write_run(path, "answered", started=2.0, answer="\n  **Use   PostgreSQL**, because it is boring.\n\nMore.")
    write_run(path, "open", started=3.0)
    with TranscriptReader.open(path) as reader:
        assert {run.id: run.outcome for run in reader.list_runs()} == {
            "won": "claude",
            "answered": "**Use PostgreSQL**, because it is boring.",
            "open": None,
        }
    assert outcome_of("x" * 200, None) == "x" * 79 + "…"
    assert outcome_of(None, {"winner": None}) is None


def test_get_run_by_prefix_is_a_range_of_the_primary_key_index(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    for number, run_id in enumerate(("abc123", "abd456", "ab", "b00000")):
        write_run(path, run_id, started=float(number))
    statements: list[str] = []
    with TranscriptReader.open(path) as reader:
        reader._db.set_trace_callback(statements.append)
        assert reader.get_run("abd").id == "abd456"
        assert reader.get_run("ab").id == "ab"  # an exact id wins over the runs it begins
        reader._db.set_trace_callback(None)
        (ranged,) = [sql for sql in statements if "id >=" in sql]
        plan = " / ".join(row[3] for row in reader._db.execute(f"EXPLAIN QUERY PLAN {ranged}"))
    # The run through the index; its ledger (calls of a real model, models of no price, calls by
    # status) through its calls' key.
    run, *ledger = plan.split(" / ")
    assert run == "SEARCH r USING INDEX sqlite_autoindex_runs_1 (id>? AND id<?)"
    assert [step for step in ledger if step.startswith("SEARCH")] == ["SEARCH c USING PRIMARY KEY (run_id=?)"] * 3


def test_prefix_successor() -> None:
    assert prefix_successor("abc") == "abd"
    assert prefix_successor("a\U0010ffff") == "b"
    assert prefix_successor("\U0010ffff") is None
    assert prefix_successor("a\ud7ff") == "a\ue000"


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def zombie_process() -> subprocess.Popen[bytes]:
    """A child that has exited and is not reaped yet: its pid still answers a signal."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    while Path(f"/proc/{child.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
        time.sleep(0.01)
    return child


@pytest.mark.subprocess
def test_a_running_run_whose_process_is_gone_is_stale(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    here = socket.gethostname()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    zombie = zombie_process()
    try:
        write_run(path, "alive", started=time.time() + 1, pid=sleeper.pid, host=here)
        write_run(path, "gone", started=2.0, pid=dead_pid(), host=here)
        write_run(path, "zombie", started=3.0, pid=zombie.pid, host=here)
        write_run(path, "reused", started=4.0, pid=sleeper.pid, host=here)  # long before that process began
        write_run(path, "elsewhere", started=5.0, pid=dead_pid(), host=f"not-{here}")
        write_run(path, "unknown", started=6.0)
        write_run(path, "done", started=7.0, pid=dead_pid(), host=here, answer="Yes.")
        with TranscriptReader.open(path) as reader:
            statuses = {run.id: run.status for run in reader.list_runs()}
            assert sorted(ids(reader.list_runs(status="stale"))) == ["gone", "reused", "zombie"]
            assert ids(reader.list_runs(status="running")) == ["alive", "unknown", "elsewhere"]
            assert ids(reader.list_runs(status="running", limit=1)) == ["alive"]
            assert (reader.count_runs("stale"), reader.count_runs("running"), reader.count_runs()) == (3, 3, 7)
            assert reader.get_run("gone").status == "stale"
    finally:
        sleeper.kill()
        sleeper.wait()
        zombie.wait()
    assert statuses == {
        "alive": "running",
        "gone": "stale",
        "zombie": "stale",
        "reused": "stale",
        "elsewhere": "running",
        "unknown": "running",
        "done": "finished",
    }


async def test_a_run_of_this_process_is_running(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    await record(path, "r1", [run_started()])
    with TranscriptReader.open(path) as reader:
        assert reader.get_run("r1").pid == os.getpid()
        assert ids(reader.list_runs(status="running")) == ["r1"]


def test_stats_by_model_protocol_and_month(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    january, february = 1_767_225_600.0, 1_769_904_000.0  # 2026-01-01 and 2026-02-01, UTC
    write_run(path, "a", started=january, model="openai/gpt-4o", cost=0.25, answer="x")
    write_run(path, "b", started=january + DAY, protocol="vote", model="anthropic/claude", cost=None, answer="y")
    write_run(path, "c", started=february, model="openai/gpt-4o", cost=0.5)
    with TranscriptReader.open(path) as reader:
        stats = reader.stats()
    unpriced = {"cost_basis": "partial", "unpriced": ["anthropic/claude"], "late": 0}
    assert stats.total.model_dump() == {"runs": 3, "calls": 3, "tokens": 45, "cost": 0.75, **unpriced}
    assert [row.model_dump() for row in stats.by_model] == [
        {"runs": 1, "calls": 1, "tokens": 15, "cost": None, "model": "anthropic/claude", "cost_basis": "unknown"}
        | {"unpriced": ["anthropic/claude"], "late": 0},
        {"runs": 2, "calls": 2, "tokens": 30, "cost": 0.75, "model": "openai/gpt-4o", "cost_basis": "known"}
        | {"unpriced": [], "late": 0},
    ]
    assert [(row.protocol, row.runs, row.cost, row.cost_basis) for row in stats.by_protocol] == [
        ("confer", 2, 0.75, "known"),
        ("vote", 1, None, "unknown"),
    ]
    assert [(row.month, row.runs, row.calls, row.tokens) for row in stats.by_month] == [
        ("2026-01", 2, 2, 30),
        ("2026-02", 1, 1, 15),
    ]


def test_stats_of_an_empty_store(tmp_path: Path) -> None:
    with TranscriptReader.open(tmp_path / "none.db") as reader:
        stats = reader.stats()
    assert stats.total.model_dump() == {
        "runs": 0,
        "calls": 0,
        "tokens": None,
        "cost": None,
        "cost_basis": "unknown",
        "unpriced": [],
        "late": 0,
    }
    assert (stats.by_model, stats.by_protocol, stats.by_month) == ([], [], [])


async def test_answered_calls_by_request_hash(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    first, second = (
        event.model_copy(update={"request_hash": f"h{n}"}) for n, event in enumerate(answer_calls("r1")[3:])
    )
    again = second.model_copy(update={"call_id": "r1-9", "text": "Again."})
    await record(path, "r1", [run_started(), *answer_calls("r1")[:3], first, second, again, *confer_run("r1")[6:]])
    with TranscriptReader.open(path) as reader:
        answered = reader.answered_calls("r1")
        (stored,) = [row for row in reader._db.execute("SELECT request_hash FROM calls WHERE id = 'r1-1'")]
    assert stored["request_hash"] == "h0"
    assert {key: [call.response for call in calls] for key, calls in answered.items()} == {
        "h0": ["PostgreSQL."],
        "h1": ["SQLite is enough.", "Again."],
    }


async def test_every_protocol_has_an_outcome_once_finished(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    for protocol in ("confer", "vote", "council"):
        await stored_run(path, protocol, protocol)
    with TranscriptReader.open(path) as reader:
        runs = {run.id: run for run in reader.list_runs()}
    assert runs["confer"].outcome in {"sage", "skeptic", "pragmatist", "engineer"}
    assert runs["vote"].outcome == reader_result(path, "vote")["winner"]
    assert runs["council"].outcome and runs["council"].outcome.startswith("[simulated]")


def reader_result(path: Path, run_id: str) -> dict[str, Any]:
    with TranscriptReader.open(path) as reader:
        return reader.get_run(run_id).result or {}


async def test_a_finished_run_is_found_by_its_answer(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    await record(path, "r1", confer_run("r1"))
    await record(path, "r2", [run_started(question="Which cache?"), ENDINGS["failed"]])
    await record(
        path, "r3", [run_started(question="Which message broker?"), RunFinished(final_answer="Kafka, or NATS.")]
    )
    with TranscriptReader.open(path) as reader:
        assert ids(reader.list_runs(search="row-level security")) == ["r1"]
        assert ids(reader.list_runs(search="nats")) == ["r3"]
        assert ids(reader.list_runs(search="cache")) == ["r2"]
    assert ANSWER.endswith("row-level security.")


def test_searching_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "store" / "panel.db"
    path.parent.mkdir()
    write_run(path, "r1", started=1.0, answer="Use SQLite.")
    before = path.read_bytes()
    with TranscriptReader.open(path) as reader:
        assert ids(reader.list_runs(search="sqlite")) == ["r1"]
    assert path.read_bytes() == before
    assert [file.name for file in path.parent.iterdir()] == ["panel.db"]
