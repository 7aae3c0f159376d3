"""Evals kept in the store: written as they run, read back the same, an interrupted one kept
as far as it got and resumed without running again what it had; the judge's calls kept."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from panel_cli.config import Panel
from panel_cli.errors import UserError
from panel_cli.eval.datasets import Dataset, EvalItem
from panel_cli.eval.grading import Grade
from panel_cli.eval.results import EvalResult, ItemResult, Spent
from panel_cli.eval.runner import eval_settings, plan_eval, resumption, run_eval
from panel_cli.eval.storage import EvalRecording, stored_result
from panel_cli.store.evals import EvalReader, EvalWriter
from panel_cli.store.reader import TranscriptReader
from panel_cli.store.subscriber import TranscriptStore
from tests.fakes.openai_server import hang, reply
from tests.helpers import eventually

OPTIONS = ["red", "green", "blue", "grey"]


def data(n: int) -> Dataset:
    items = [EvalItem(id=f"q{i}", question=f"Colour {i}?", answer=OPTIONS[i % 4], options=OPTIONS) for i in range(n)]
    return Dataset(source="colours.jsonl", items=items, sha256="abc123")


def jury(p: float = 0.7, n: int = 3) -> Panel:
    return Panel.model_validate(
        {"name": "jury", "members": [{"name": f"v{i}", "model": f"demo/oracle@{p}"} for i in range(1, n + 1)]}
    )


async def kept_eval(db: Path, plan: Any, eval_id: str, **options: Any) -> EvalResult:
    store = await TranscriptStore.open(db)
    try:
        with EvalWriter.open(db, eval_id) as writer:
            return await run_eval(
                plan,
                store=store,
                secrets=[],
                eval_id=eval_id,
                seed=3,
                recorder=EvalRecording(writer),
                settings=eval_settings(plan, []),
                **options,
            )
    finally:
        await store.close()


def comparable(result: EvalResult) -> dict[str, Any]:
    """Everything but the order items were graded in, which the store keeps by time."""
    dumped = result.model_dump(mode="json")
    dumped["items"] = sorted(dumped["items"], key=lambda item: (item["system"], item["question_id"]))
    return dumped


async def test_an_eval_reads_back_as_it_was_reported(tmp_path):
    db = tmp_path / "runs.db"
    plan = plan_eval(jury(), data(6), protocols="confer,vote", baseline=None, grader="judge:v2")
    result = await kept_eval(db, plan, "e1")
    with EvalReader.open(db) as reader:
        (row,) = reader.list_evals()
        stored = reader.get("e")
    assert (row.id, row.status, row.questions, row.items, row.dataset_sha256) == ("e1", "finished", 6, 18, "abc123")
    assert row.correct == sum(item.correct for item in result.items)
    assert comparable(stored_result(stored)) == comparable(result)
    # The judge's every call is kept with what it was asked and answered (an item without a
    # final answer is graded wrong without asking).
    with sqlite3.connect(db) as connection:
        calls = connection.execute("SELECT member, prompt, reply FROM eval_judge_calls").fetchall()
    connection.close()
    answered = [item for item in stored_result(stored).items if item.final_answer is not None]
    assert len(calls) == len(answered) > 0
    assert all(
        member == "v2" and "Reference answer:" in prompt and "verdict" in reply for member, prompt, reply in calls
    )
    assert all(item.judge_call is not None for item in answered)


async def test_an_interrupted_eval_keeps_its_grades_and_resumes_only_the_rest(tmp_path):
    """Cancelled after a few items: kept as interrupted with those items; resumed, it runs the
    others only (counted by runs in the store) and ends with the same grades as one that was
    never stopped, since each question's beliefs are drawn from the seed and its id."""
    db = tmp_path / "runs.db"
    plan = plan_eval(jury(), data(12), protocols="vote", baseline=None, grader=None)
    graded: list[str] = []
    stop = asyncio.Event()

    class Watch:
        def start(self, system: str, total: int) -> None: ...

        def advance(self, result: Any) -> None:
            graded.append(result.question_id)
            if len(graded) == 5:
                stop.set()

    task = asyncio.create_task(kept_eval(db, plan, "e2", progress=Watch(), concurrency=1))
    await stop.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with EvalReader.open(db) as reader:
        stored = reader.get("e2")
    assert stored.row.status == "interrupted"
    kept = stored_result(stored)
    assert len(kept.items) == 5
    with TranscriptReader.open(db) as reader:
        runs_before = len(reader.list_runs(limit=-1))

    resumed = await kept_eval(db, plan, "e2", done=kept.items)
    with TranscriptReader.open(db) as reader:
        runs_after = len(reader.list_runs(limit=-1))
    assert runs_after - runs_before == 24 - 5
    whole = await run_eval(plan, store=None, secrets=[], eval_id="e3", seed=3)
    assert sorted((i.system, i.question_id, i.correct) for i in resumed.items) == sorted(
        (i.system, i.question_id, i.correct) for i in whole.items
    )
    with EvalReader.open(db) as reader:
        assert reader.get("e2").row.status == "finished"


def test_an_unknown_or_ambiguous_id_is_one_sentence(tmp_path):
    db = tmp_path / "runs.db"
    for eval_id in ("eab1", "eab2"):
        with EvalWriter.open(db, eval_id) as writer:
            writer.begin({"panel": "p", "dataset": "d", "seed": 0}, [])
            writer.end("finished")
    with EvalReader.open(db) as reader:
        with pytest.raises(UserError, match="No eval 'zz'"):
            reader.get("zz")
        with pytest.raises(UserError, match=r"'eab' begins more than one eval's id \(eab1, eab2\); give more of it."):
            reader.get("eab")
        assert reader.get("eab2").row.id == "eab2"


def test_reading_a_missing_file_finds_no_eval_and_creates_nothing(tmp_path):
    with EvalReader.open(tmp_path / "none.db") as reader:
        assert reader.list_evals() == []
    assert not (tmp_path / "none.db").exists()


async def test_a_resumed_eval_counts_every_call_it_paid_for_and_sums_its_wall_time(fake_server, tmp_path):
    """Stopped with a vote in flight (two certain oracles have voted, the third member's call
    hangs): that run is stored as interrupted and its item is not kept, but the calls it made
    are, in the vote's calls. Resumed, the vote's calls are that run's and the new run's, the
    baseline (not run again) keeps its first session's wall time, and the vote's time is both
    sessions'."""
    fake_server.script("real-model", hang())
    panel = Panel.model_validate(
        {
            "name": "mixed",
            "members": [
                {"name": "v1", "model": "demo/oracle@1"},
                {"name": "v2", "model": "demo/oracle@1"},
                {"name": "real", "model": "openai/real-model", "api_base": fake_server.url},
            ],
            "defaults": {"retries": 0},
        }
    )
    plan = plan_eval(panel, data(1), protocols="vote", baseline="v1", grader=None)
    db = tmp_path / "runs.db"
    task = asyncio.create_task(kept_eval(db, plan, "e5"))
    await eventually(lambda: fake_server.in_flight == 1 or task.done(), "the third ballot to be asked")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with EvalReader.open(db) as reader:
        first = stored_result(reader.get("e5"))
    with TranscriptReader.open(db) as reader:
        (interrupted,) = [run for run in reader.list_runs(limit=-1) if run.status == "interrupted"]
    assert [item.system for item in first.items] == ["baseline"]
    assert first.unkept["vote"].runs == 1 and first.unkept["vote"].calls == interrupted.calls == 3
    scores = {score.system: score for score in first.systems}
    assert (scores["vote"].calls, scores["vote"].unkept_runs, scores["vote"].questions) == (3, 1, 0)
    assert first.wall_times["vote"] > 0 and first.sessions == 1

    fake_server.script("real-model", reply('{"choice": "red", "ranking": ["red"], "confidence": 70, "reason": "r"}'))
    done, resumed = resumption(first)
    assert resumed.sessions == 2 and resumed.unkept["vote"] == first.unkept["vote"]
    second = await kept_eval(db, plan, "e5", done=done, resumed=resumed)
    scores = {score.system: score for score in second.systems}
    assert (scores["vote"].calls, scores["vote"].unkept_runs, scores["vote"].correct) == (6, 1, 1)
    assert second.wall_times["baseline"] == pytest.approx(first.wall_times["baseline"], abs=0.002)
    assert second.wall_times["vote"] > first.wall_times["vote"]
    with EvalReader.open(db) as reader:
        again = stored_result(reader.get("e5"))
    assert again.sessions == 2 and {s.system: s.calls for s in again.systems} == {"baseline": 1, "vote": 6}


def test_a_failed_item_run_again_on_resume_still_counts_what_it_cost():
    failed = ItemResult(
        system="vote",
        question_id="q0",
        run_id="r0",
        final_answer=None,
        grade=Grade(correct=False, method="option"),
        calls=2,
        tokens=40,
        cost=0.5,
        duration_s=1.0,
        error="RuntimeError: boom",
    )
    kept = failed.model_copy(update={"question_id": "q1", "error": None, "run_id": "r1"})
    stored = EvalResult(
        eval_id="e",
        dataset="d",
        questions=2,
        panel="p",
        baseline="b",
        grader="g",
        seed=0,
        concurrency=1,
        items=[failed, kept],
        wall_times={"vote": 2.5},
        unkept={"vote": Spent(runs=1, calls=1, tokens=None, cost=None)},
    )
    done, resumed = resumption(stored)
    assert done == [kept]
    assert resumed.unkept["vote"] == Spent(runs=2, calls=3, tokens=40, cost=0.5)
    assert (resumed.wall_times, resumed.sessions) == ({"vote": 2.5}, 2)
