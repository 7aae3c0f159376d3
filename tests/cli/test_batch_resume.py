"""`panel batch --resume` resumes a question whose run stopped, reusing every call that run got
answered (the fake server counts no repeat), and a claim keeps two invocations of one batch, or
a batch and a `panel resume` of one of its runs, from running the same questions at once.

The panel is the starter vote panel on the fake server (five ballots a question, as the demo
personas would cast them: `tests.cli.test_resume`). Runs are made "stopped" by marking finished
ones interrupted, with some of their calls removed when a run should have calls left to make.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

from panel_cli.errors import UserError
from panel_cli.store.claims import take_claims
from panel_cli.store.reader import TranscriptReader
from tests.cli.test_resume import on_fake_server, relay_briefs  # noqa: F401  (the fixture relays briefs here too)
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers import cli, cli_json

QUESTIONS = 6
BALLOTS = 5  # the starter vote panel's members, one call each


def batch_files(server: FakeOpenAIServer, folder: Path) -> list[str]:
    questions = folder / "q.jsonl"
    questions.write_text(
        "".join(
            json.dumps({"id": f"q{n}", "question": f"Which database for service {n}?"}) + "\n" for n in range(QUESTIONS)
        )
    )
    panel = on_fake_server("vote", server, folder)
    return [
        str(panel),
        "--questions",
        str(questions),
        "--db",
        str(folder / "runs.db"),
        "--output",
        str(folder / "out.jsonl"),
    ]


def stop(db: Path, run_ids: list[str], *, unanswered: dict[str, list[str]] | None = None) -> None:
    """Mark runs interrupted; `unanswered`: members whose calls of that run are taken away."""
    with contextlib.closing(sqlite3.connect(db)) as con, con:
        for run_id in run_ids:
            con.execute("UPDATE runs SET status = 'interrupted', ended_seq = NULL WHERE id = ?", (run_id,))
        for run_id, members in (unanswered or {}).items():
            for member in members:
                con.execute("DELETE FROM calls WHERE run_id = ? AND member = ?", (run_id, member))


def runs_by_question(db: Path, batch_id: str) -> dict[str, list[tuple[str, str]]]:
    """Each question's runs, oldest first, as (id, status)."""
    found: dict[str, list[tuple[str, str]]] = {}
    with TranscriptReader.open(db) as reader:
        for run in reader.batch_runs(batch_id):
            found.setdefault(run.tags["question"], []).append((run.id, run.status))
    return found


def test_resume_reuses_the_answered_calls_of_stopped_questions(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    args = batch_files(fake_server, tmp_path)
    db = tmp_path / "runs.db"
    first = cli_json("batch", *args, columns=None)
    assert len(fake_server.requests) == QUESTIONS * BALLOTS
    batch_id = first["batch_id"]
    runs = {key: found[0][0] for key, found in runs_by_question(db, batch_id).items()}
    answers = {
        line["id"]: line["final_answer"] for line in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())
    }
    # q0 and q1 stopped after every ballot was answered, q2 with two ballots left to cast.
    stop(db, [runs["q0"], runs["q1"], runs["q2"]], unanswered={runs["q2"]: ["optimist", "engineer"]})
    asked = len(fake_server.requests)

    outcome = cli("batch", *args, "--resume", batch_id, "--json", columns=None)

    assert outcome.exit_code == 0, outcome.output
    assert sorted(request.model for request in fake_server.requests[asked:]) == ["engineer", "optimist"]
    summary = json.loads(outcome.stdout)
    assert (summary["skipped"], summary["ran"], summary["answered"]) == (QUESTIONS - 3, 3, QUESTIONS)
    # The reused calls are among this invocation's, split out as a resumed run's are.
    reused = 3 * BALLOTS - 2
    assert summary["calls"] == reused + 2
    assert (summary["calls_by_status"]["reused"], summary["calls_by_status"]["answered"]) == (reused, 2)
    assert summary["spent_anew"]["calls"] == 2
    assert (
        f"3 resumed from their stopped runs ({3 * BALLOTS - 2} answered calls stored, reused where a request comes"
        " out as it did)" in outcome.stderr
    )
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [line["id"] for line in lines] == [f"q{n}" for n in range(QUESTIONS)]
    assert {line["id"]: line["final_answer"] for line in lines} == answers  # the same ballots, the same winners
    after = runs_by_question(db, batch_id)
    with TranscriptReader.open(db) as reader:
        for key in ("q0", "q1", "q2"):
            (old, old_status), (new, new_status) = after[key]
            assert (old, old_status, new_status) == (runs[key], "resumed", "finished")
            assert reader.get_run(old).resumed_by == new and reader.get_run(new).resumed_from == old
    assert all(len(after[f"q{n}"]) == 1 for n in range(3, QUESTIONS))

    again = cli_json("batch", *args, "--resume", batch_id, columns=None)
    assert again["ran"] == 0 and len(fake_server.requests) == asked + 2


def test_a_second_invocation_of_a_batch_is_refused_while_the_first_holds_it(
    fake_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    args = batch_files(fake_server, tmp_path)
    db = tmp_path / "runs.db"
    batch_id = cli_json("batch", *args, columns=None)["batch_id"]
    runs = {key: found[0][0] for key, found in runs_by_question(db, batch_id).items()}
    stop(db, [runs["q3"]], unanswered={runs["q3"]: ["sage"]})
    asked = len(fake_server.requests)

    (held,) = take_claims(db, [("batch", batch_id)])
    try:
        refused = cli("batch", *args, "--resume", batch_id, columns=None).exception
    finally:
        held.release()
    assert isinstance(refused, UserError)
    assert refused.message.startswith(f"Batch {batch_id} is already being run by panel process {held.pid} since ")

    (held,) = take_claims(db, [("run", runs["q3"])])  # a `panel resume` of the stopped run
    try:
        refused = cli("batch", *args, "--resume", batch_id, columns=None).exception
    finally:
        held.release()
    assert isinstance(refused, UserError)
    assert refused.message.startswith(f"Run {runs['q3']} is already being resumed by panel process {held.pid} since ")
    assert len(fake_server.requests) == asked

    assert cli_json("batch", *args, "--resume", batch_id, columns=None)["answered"] == QUESTIONS
    assert [request.model for request in fake_server.requests[asked:]] == ["sage"]
    with contextlib.closing(sqlite3.connect(db)) as con:
        assert con.execute("SELECT count(*) FROM claims").fetchone()[0] == 0


def test_a_batch_run_resumed_on_its_own_still_answers_its_question(
    fake_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """`panel resume` of a batch's stopped run keeps its tags: the batch counts the new run as
    its question's, and `--resume` asks nothing for it."""
    args = batch_files(fake_server, tmp_path)
    db = tmp_path / "runs.db"
    batch_id = cli_json("batch", *args, columns=None)["batch_id"]
    runs = {key: found[0][0] for key, found in runs_by_question(db, batch_id).items()}
    stop(db, [runs["q4"]], unanswered={runs["q4"]: ["skeptic"]})
    asked = len(fake_server.requests)

    resumed = cli_json("resume", runs["q4"], "--db", str(db))

    assert [request.model for request in fake_server.requests[asked:]] == ["skeptic"]
    assert runs_by_question(db, batch_id)["q4"] == [(runs["q4"], "resumed"), (resumed["run_id"], "finished")]
    summary = cli_json("batch", *args, "--resume", batch_id, columns=None)
    assert (summary["skipped"], summary["ran"]) == (QUESTIONS, 0) and len(fake_server.requests) == asked + 1
