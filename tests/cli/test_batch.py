"""`panel batch` in-process against the fake server: one run per question, the concurrency cap
and the endpoint limits as the server sees them, resuming (the server counts the calls), per
question options, shards that split a batch and come together again, and the mistakes a
person can make, each one sentence."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from pathlib import Path

import pytest
from rich.progress import Progress
from typer.testing import Result

from panel_cli.batch.progress import TimeLeft, TimeLeftColumn, time_left
from panel_cli.config import load_panel
from panel_cli.errors import UserError
from panel_cli.llm.litellm_setup import load_litellm
from panel_cli.protocols.ensemble.engine import ensemble
from panel_cli.runs.execute import run_panel
from panel_cli.runs.prepare import PreparedRun
from panel_cli.store.reader import TranscriptReader
from panel_cli.store.subscriber import TranscriptStore
from tests.batch.panels import answer, batch_panel, write_questions
from tests.fakes.openai_server import FakeOpenAIServer, after, hang, responder
from tests.helpers import cli, cli_json

HANG_GUARD = 120.0  # seconds: a stuck test fails instead of hanging; never a measurement


def batch(*args: str) -> Result:
    return cli("batch", *args, columns=None)


def run_json(*args: str, code: int = 0) -> dict:
    return cli_json("batch", *args, code=code, columns=None)


def results(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def files(tmp_path: Path, fake_server: FakeOpenAIServer) -> dict[str, Path]:
    fake_server.default(responder(answer))
    return {
        "panel": batch_panel(tmp_path / "panel.yaml", fake_server),
        "questions": write_questions(tmp_path / "q.jsonl", range(1, 6)),
        "db": tmp_path / "runs.db",
        "out": tmp_path / "out.jsonl",
    }


def common(files: dict[str, Path]) -> list[str]:
    return [
        str(files["panel"]),
        "--questions",
        str(files["questions"]),
        "--db",
        str(files["db"]),
        "--output",
        str(files["out"]),
    ]


def test_every_question_runs_once_into_one_batch_and_one_line_each(files, fake_server):
    summary = run_json(*common(files))

    assert len(fake_server.requests) == 5
    lines = results(files["out"])
    assert [line["id"] for line in lines] == ["q1", "q2", "q3", "q4", "q5"], "the results are in question order"
    assert [line["final_answer"] for line in lines] == ["A1", "A2", "A3", "A4", "A5"]
    assert all(line["reached_answer"] and line["calls"] == 1 and line["tokens"] == 30 for line in lines)
    assert set(lines[0]) == {
        "id",
        "question",
        "run_id",
        "final_answer",
        "reached_answer",
        "failure_reason",
        "calls",
        "tokens",
        "cost",
        "cost_basis",
        "duration_s",
    }
    assert re.fullmatch(r"b[0-9a-f]{11}", summary["batch_id"])
    assert {
        key: summary[key] for key in ("questions", "skipped", "ran", "answered", "no_answer", "calls", "tokens")
    } == {
        "questions": 5,
        "skipped": 0,
        "ran": 5,
        "answered": 5,
        "no_answer": 0,
        "calls": 5,
        "tokens": 150,
    }
    with TranscriptReader.open(files["db"]) as reader:
        runs = reader.batch_runs(summary["batch_id"])
    assert sorted(run.id for run in runs) == sorted(line["run_id"] for line in lines)
    assert sorted(run.tags["question"] for run in runs) == ["q1", "q2", "q3", "q4", "q5"]
    assert all(run.tags["batch"] == summary["batch_id"] and run.status == "finished" for run in runs)


def test_progress_is_plain_lines_on_stderr_and_quiet_prints_nothing(files):
    outcome = batch(*common(files))
    assert outcome.exit_code == 0 and outcome.stdout == ""
    lines = outcome.stderr.splitlines()
    assert re.fullmatch(r"panel: batch b[0-9a-f]{11}: 5 questions, 4 at a time, results to .*out\.jsonl\.", lines[0])
    finished = [
        re.fullmatch(r"panel: \[(\d)/5\] question (q\d): answered \(run [0-9a-f]{12}, \d+\.\d\ds, —\)", line)
        for line in lines[1:6]
    ]
    assert all(finished), lines
    assert [match.group(1) for match in finished] == ["1", "2", "3", "4", "5"]
    assert sorted(match.group(2) for match in finished) == ["q1", "q2", "q3", "q4", "q5"]
    assert re.fullmatch(
        r"panel: batch b[0-9a-f]{11}: 5 of 5 answered; this time calls 5 · 150 tokens · cost —; results in .*", lines[6]
    )
    quiet = batch(*common(files), "--quiet")
    assert quiet.exit_code == 0 and quiet.stdout == "" and quiet.stderr == ""


@pytest.mark.parametrize(
    ("concurrency", "defaults", "seen"), [("3", "{retries: 0}", 3), ("4", "{retries: 0, concurrency: 1}", 1)]
)
def test_the_server_never_sees_more_runs_at_once_than_allowed(tmp_path, fake_server, concurrency, defaults, seen):
    """--concurrency caps the runs in flight; the panel's per-endpoint limit holds across them all."""
    # The first request is held until as many as may be are in flight, so they overlap for sure.
    fake_server.script(
        "m0", after(lambda: fake_server.in_flight >= seen, responder(answer)), responder(answer, latency=0.2)
    )
    panel = batch_panel(tmp_path / "panel.yaml", fake_server, defaults=defaults)
    questions = write_questions(tmp_path / "q.jsonl", range(8))
    run_json(
        str(panel), "--questions", str(questions), "--concurrency", concurrency, "--output", str(tmp_path / "out.jsonl")
    )
    assert len(fake_server.requests) == 8
    assert fake_server.max_in_flight == seen


async def interrupted_run(files: dict[str, Path], server: FakeOpenAIServer, batch_id: str, number: int) -> None:
    """A run of question `number` in the batch, cancelled mid-call, as Ctrl-C leaves it."""
    panel = load_panel(files["panel"])
    asked = len(server.requests)
    async with await TranscriptStore.open(files["db"]) as store:
        task = asyncio.create_task(
            run_panel(
                PreparedRun(engine=ensemble, panel=panel, question=f"What is Q{number}?", warnings=(), secrets=()),
                store=store,
                tags={"batch": batch_id, "question": f"q{number}"},
            )
        )
        deadline = time.monotonic() + HANG_GUARD
        while len(server.requests) == asked:
            assert time.monotonic() < deadline and not task.done()
            await asyncio.sleep(0.01)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def test_a_batch_id_is_as_long_as_a_run_id(files):
    """`b` and 11 hex digits, random or drawn for a slice: the 12 characters of a run's id."""
    whole = run_json(*common(files))["batch_id"]
    files["db"] = files["db"].with_name("sliced.db")
    sliced = run_json(*common(files), "--shard", "1/2")["batch_id"]
    with TranscriptReader.open(files["db"]) as reader:
        run_ids = {run.id for run in reader.batch_runs(sliced)}
    assert run_ids and {len(run_id) for run_id in run_ids} == {12}
    assert re.fullmatch(r"b[0-9a-f]{11}", whole) and re.fullmatch(r"b[0-9a-f]{11}", sliced)


def test_a_batch_with_an_id_of_the_old_length_resumes(files, fake_server):
    """Batches started before ids grew to 12 characters (`b` and 10 hex digits) go on by their id."""
    old_id = "b0123456789"
    fake_server.script("m0", hang(), responder(answer))
    asyncio.run(interrupted_run(files, fake_server, old_id, 3))
    asked = len(fake_server.requests)
    write_questions(files["questions"], [3])

    summary = run_json(*common(files), "--resume", old_id)

    assert summary["batch_id"] == old_id and summary["ran"] == 1 and summary["answered"] == 1
    assert [answer(request) for request in fake_server.requests[asked:]] == ["A3"]
    with TranscriptReader.open(files["db"]) as reader:
        assert sorted(run.status for run in reader.batch_runs(old_id)) == ["finished", "resumed"]


def test_a_long_question_id_is_never_cut_in_the_progress_lines(files):
    long_id = "customer-support/billing/2024-q3/" + "refund-dispute-" * 6 + "0042"
    files["questions"].write_text(json.dumps({"id": long_id, "question": "What is Q1?"}) + "\n")
    outcome = batch(*common(files))
    assert outcome.exit_code == 0, outcome.output
    assert f"question {long_id}: answered" in outcome.stderr


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_time_left_holds_steady_when_runs_end_in_waves():
    """20 questions, 4 at a time, every run 5 s: four end together, then none for 5 s. A rate
    over the questions done read 4 s left after the first four and 29 s after the fifth; the
    mean length of a run gives the time left as it is, and counts down in between."""
    clock = Clock()
    left = TimeLeft(concurrency=4, clock=clock)
    assert left.seconds() is None, "nothing to go by before a question ends"
    shown = []
    for done in range(1, 21):
        clock.now = 5.0 * ((done - 1) // 4 + 1) + 0.01 * ((done - 1) % 4)  # each wave's four a moment apart
        left.finished(5.0, 20 - done)
        shown.append(left.seconds())
    # after each wave: exactly the waves left
    assert [shown[done - 1] for done in (4, 8, 12, 16, 20)] == [20.0, 15.0, 10.0, 5.0, 0.0]
    # the first of a wave never reads more than one run's length above the wave before it
    assert all(shown[done - 1] - shown[done - 2] <= 5.0 for done in range(2, 21))
    assert all(later <= earlier for earlier, later in zip(shown[3::4], shown[7::4], strict=False))

    clock.now = 5.0 * 4 + 2.5
    partial = TimeLeft(concurrency=4, clock=clock)
    partial.finished(5.0, 16)
    clock.now += 2.5
    assert partial.seconds() == 17.5, "between ends it counts down"
    clock.now += 60
    assert partial.seconds() == 0.0, "never below zero"


def test_the_bar_shows_the_time_left_as_rich_writes_it():
    clock = Clock()
    left = TimeLeft(concurrency=2, clock=clock)
    column = TimeLeftColumn(left)
    progress = Progress()  # never started: no drawing, no thread
    progress.add_task("batch", total=9)
    (task,) = progress.tasks  # the column reads the batch's time left, not the task's speed
    assert column.render(task).plain == "-:--:--"
    left.finished(40.0, 9)  # 9 left, two at a time, 40 s each: 180 s
    assert column.render(task).plain == "0:03:00"
    clock.now = 179.4
    assert column.render(task).plain == "0:00:01"


def test_time_left_is_the_runs_left_in_waves_of_the_mean_run():
    assert time_left([], 10, 4) is None
    assert time_left([4.0, 6.0], 0, 4) == 0.0
    assert time_left([4.0, 6.0], 8, 4) == 10.0  # two waves of 5 s
    assert time_left([4.0, 6.0], 3, 4) == 5.0  # fewer left than run at once: one wave
    assert time_left([3.0], 5, 1) == 15.0


def test_resume_runs_only_the_questions_without_a_finished_run(files, fake_server, tmp_path):
    write_questions(files["questions"], [1, 2])
    batch_id = run_json(*common(files))["batch_id"]
    fake_server.script("m0", hang(), responder(answer))
    asyncio.run(interrupted_run(files, fake_server, batch_id, 3))
    asked = len(fake_server.requests)

    write_questions(files["questions"], [1, 2, 3, 4])
    summary = run_json(*common(files), "--resume", batch_id)

    new = fake_server.requests[asked:]
    assert sorted(answer(request) for request in new) == ["A3", "A4"], "q1 and q2 finished: not asked again"
    assert (
        summary["skipped"] == 2 and summary["ran"] == 2 and summary["answered"] == 4 and summary["batch_id"] == batch_id
    )
    assert [(line["id"], line["final_answer"]) for line in results(files["out"])] == [
        ("q1", "A1"),
        ("q2", "A2"),
        ("q3", "A3"),
        ("q4", "A4"),
    ]
    with TranscriptReader.open(files["db"]) as reader:
        statuses = sorted((run.tags["question"], run.status) for run in reader.batch_runs(batch_id))
    assert statuses == [
        ("q1", "finished"),
        ("q2", "finished"),
        ("q3", "finished"),
        ("q3", "resumed"),
        ("q4", "finished"),
    ]

    again = run_json(*common(files), "--resume", batch_id)
    assert len(fake_server.requests) == asked + 2 and again["ran"] == 0 and again["skipped"] == 4
    assert len(results(files["out"])) == 4, "a resume with nothing left writes every result again, for free"


def test_shards_split_a_batch_and_import_brings_it_together(files, fake_server, tmp_path):
    write_questions(files["questions"], range(1, 8))
    ids, lines = set(), []
    for index in (1, 2, 3):
        out, db = tmp_path / f"out{index}.jsonl", tmp_path / f"shard{index}.db"
        summary = run_json(
            str(files["panel"]),
            "--questions",
            str(files["questions"]),
            "--shard",
            f"{index}/3",
            "--db",
            str(db),
            "--output",
            str(out),
        )
        ids.add(summary["batch_id"])
        lines += results(out)
    assert len(ids) == 1, "every slice of one batch has the batch's id"
    assert sorted(line["id"] for line in lines) == sorted(f"q{n}" for n in range(1, 8)), (
        "each question in exactly one slice"
    )
    assert len(fake_server.requests) == 7

    for index in (2, 3):
        outcome = cli(
            "history", "import", str(tmp_path / f"shard{index}.db"), "--db", str(tmp_path / "shard1.db"), columns=None
        )
        assert outcome.exit_code == 0, outcome.output
    (batch_id,) = ids
    merged = run_json(
        str(files["panel"]),
        "--questions",
        str(files["questions"]),
        "--resume",
        batch_id,
        "--db",
        str(tmp_path / "shard1.db"),
        "--output",
        str(files["out"]),
    )
    assert merged["skipped"] == 7 and merged["ran"] == 0 and len(fake_server.requests) == 7
    assert [line["id"] for line in results(files["out"])] == [f"q{n}" for n in range(1, 8)]


def test_a_slice_started_again_says_to_resume_it(files):
    summary = run_json(*common(files), "--shard", "1/2")
    outcome = batch(*common(files), "--shard", "1/2")
    assert isinstance(outcome.exception, UserError)
    batch_id = summary["batch_id"]
    assert (
        outcome.exception.message
        == f"Batch {batch_id} already has runs in {files['db']}; continue it with --resume {batch_id}."
    )


def test_each_question_votes_on_its_own_options(tmp_path, fake_server):
    fake_server.default(responder(lambda request: "Coffee"))
    panel = batch_panel(
        tmp_path / "vote.yaml", fake_server, members=3, protocol="vote", extra="options: [Coffee, Water]\n"
    )
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        '{"id": 1, "question": "Morning?", "options": ["Tea", "Coffee"]}\n'
        '{"id": 2, "question": "Evening?"}\n'
        '{"id": 3, "question": "Night?", "options": ["Milk", "Juice"]}\n'
    )
    out = tmp_path / "out.jsonl"
    summary = run_json(str(panel), "--questions", str(questions), "--output", str(out), code=1)

    lines = {line["id"]: line for line in results(out)}
    assert lines[1]["final_answer"] == "Coffee" and lines[2]["final_answer"] == "Coffee"
    assert lines[3]["reached_answer"] is False and lines[3]["failure_reason"]
    assert summary["answered"] == 2 and summary["no_answer"] == 1
    prompts = {request.messages[-1]["content"] for request in fake_server.requests}
    assert any("- Tea\n- Coffee" in prompt for prompt in prompts) and any(
        "- Milk\n- Juice" in prompt for prompt in prompts
    )


def test_a_vote_says_which_questions_take_the_panels_own_options(tmp_path, fake_server):
    """Not silently: a question without options is voted on the panel file's, said once at the start."""
    fake_server.default(responder(lambda request: "Coffee"))
    panel = batch_panel(
        tmp_path / "vote.yaml", fake_server, members=3, protocol="vote", extra="options: [Coffee, Water]\n"
    )
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text('{"question": "Morning?", "options": ["Tea", "Coffee"]}\n{"question": "Evening?"}\n')
    said = batch(str(panel), "--questions", str(mixed), "--output", str(tmp_path / "a.jsonl")).stderr
    assert said.splitlines()[0] == (
        f"panel: 1 of 2 questions give no options of their own: they are voted on {panel}'s options (Coffee, Water)."
    )
    bare = tmp_path / "bare.txt"
    bare.write_text("Morning?\nEvening?\n")
    said = batch(str(panel), "--questions", str(bare), "--output", str(tmp_path / "b.jsonl")).stderr
    assert said.splitlines()[0] == (
        f"panel: no question gives options of its own: each is voted on {panel}'s options (Coffee, Water)."
    )
    own = tmp_path / "own.jsonl"
    own.write_text('{"question": "Morning?", "options": ["Tea", "Coffee"]}\n')
    said = batch(str(panel), "--questions", str(own), "--output", str(tmp_path / "c.jsonl")).stderr
    assert "options of its own" not in said and "options of their own" not in said
    quiet = batch(str(panel), "--questions", str(bare), "--output", str(tmp_path / "d.jsonl"), "--quiet").stderr
    assert "options" not in quiet


@pytest.mark.parametrize(
    ("protocol", "extra", "text", "message"),
    [
        (
            "ensemble",
            "",
            '{"question": "Why?"}\n{"question": "Which?", "options": ["A", "B"]}\n',
            "q.jsonl, line 2: options: only decide and vote panels take a question's options; {panel} runs ensemble.",
        ),
        (
            "vote",
            "",
            '{"question": "Which?", "options": ["A", "B"]}\n{"question": "Why?"}\n',
            "q.jsonl, line 2: options: this question has no options, and {panel} gives none for its vote; give every question its options.",
        ),
    ],
)
def test_options_where_they_cannot_go_are_refused_before_any_call(
    tmp_path, fake_server, protocol, extra, text, message
):
    panel = batch_panel(tmp_path / "panel.yaml", fake_server, protocol=protocol, extra=extra)
    (tmp_path / "q.jsonl").write_text(text)
    outcome = batch(str(panel), "--questions", str(tmp_path / "q.jsonl"), "--output", str(tmp_path / "out.jsonl"))
    assert isinstance(outcome.exception, UserError)
    assert outcome.exception.message == f"{tmp_path}/" + message.format(panel=panel)
    assert fake_server.requests == [] and not (tmp_path / "out.jsonl").exists()


def test_resuming_a_batch_that_is_not_there_is_one_sentence(files, fake_server):
    outcome = batch(*common(files), "--resume", "b0000000000")
    assert isinstance(outcome.exception, UserError)
    assert (
        outcome.exception.message
        == f"No batch has the id 'b0000000000' in {files['db']}; a batch's id is printed when it starts."
    )
    assert fake_server.requests == []


def test_a_cost_cap_over_an_unknown_price_stops_the_batch_before_any_run(tmp_path, fake_server):
    """The file's `defaults.max_cost` holds in a batch as in one run: over a model of unknown
    price it stops the batch at once, in one sentence, not each run."""
    panel = batch_panel(tmp_path / "panel.yaml", fake_server, defaults="{retries: 0, max_cost: 1}")
    questions = write_questions(tmp_path / "q.jsonl", range(1, 4))
    outcome = batch(
        str(panel),
        "--questions",
        str(questions),
        "--db",
        str(tmp_path / "runs.db"),
        "--output",
        str(tmp_path / "out.jsonl"),
    )
    assert isinstance(outcome.exception, UserError) and outcome.exception.exit_code == 2
    assert outcome.exception.message == (
        "defaults.max_cost cannot bound this run: 1 member has no known price ('m0' (openai/m0)); "
        "take max_cost out of the file's defaults to run them without a cap."
    )
    assert fake_server.requests == []


def test_the_files_cost_cap_holds_for_every_run_of_a_batch(tmp_path, fake_server):
    """Every run of the batch gets the file's cap: a call whose worst case ($0.10: 100 tokens at
    $0.001) passes the $0.05 cap is not made, so no question is sent and none is answered."""
    litellm = load_litellm()
    litellm.register_model(
        {
            "m0": {
                "input_cost_per_token": 0.0,
                "output_cost_per_token": 0.001,
                "litellm_provider": "openai",
                "mode": "chat",
            }
        }
    )
    try:
        fake_server.default(responder(answer))
        panel = batch_panel(
            tmp_path / "panel.yaml", fake_server, defaults="{retries: 0, max_tokens: 100, max_cost: 0.05}"
        )
        questions = write_questions(tmp_path / "q.jsonl", range(1, 4))
        out = tmp_path / "out.jsonl"
        outcome = batch(
            str(panel), "--questions", str(questions), "--db", str(tmp_path / "runs.db"), "--output", str(out)
        )
    finally:
        litellm.model_cost.pop("m0", None)
    assert fake_server.requests == []
    lines = results(out)
    assert len(lines) == 3 and not any(line["reached_answer"] for line in lines), outcome.output
    with TranscriptReader.open(tmp_path / "runs.db") as reader:
        kinds = [call.error_kind for run in reader.list_runs(limit=-1) for call in reader.run_calls(run.id)]
    assert kinds == ["budget"] * 3
