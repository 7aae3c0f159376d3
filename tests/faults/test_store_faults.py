"""A transcript file that is damaged, not a database, or write-protected: one sentence and
exit code 2, never a traceback; and history still reads what it is allowed to read.

A file that fails in the middle of a run (deleted, made unwritable, the disk full) does not
end the run: the answer is printed, the failure is one sentence and exit code 1, and the
run is marked failed where its row can still be written. Each is made to happen when the
fake server receives the first vote, so the answers of the stage before are on disk."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import typer

from panel_cli.cli.history import history_app
from panel_cli.errors import UserError
from panel_cli.events import EventBus
from panel_cli.store import connection
from panel_cli.store.reader import TranscriptReader
from panel_cli.store.subscriber import StoreFailure, TranscriptStore
from tests.fakes.openai_server import FakeOpenAIServer, RecordedRequest, responder
from tests.helpers import cli, panel_process
from tests.protocols.conftest import task_of, vote_json
from tests.store.sample_runs import confer_run, record, run_started

app = typer.Typer()
app.add_typer(history_app, name="history")


def history(*args: str) -> str:
    result = cli("history", *args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def history_error(*args: str) -> str:
    with pytest.raises(UserError) as caught:
        cli("history", *args, catch_exceptions=False)
    assert caught.value.exit_code == 2
    return caught.value.message


async def open_error(path: Path) -> str:
    with pytest.raises(UserError) as caught:
        await TranscriptStore.open(path)
    assert caught.value.exit_code == 2
    return caught.value.message


@contextmanager
def write_protected(*paths: Path) -> Iterator[None]:
    """Make `paths` unwritable for this process. Modes do it for a user; root ignores them, so
    there the files are made immutable (`chattr +i`), which stops root too; the test is
    skipped when neither works."""
    modes = {path: path.stat().st_mode for path in paths}
    immutable: list[Path] = []
    try:
        for path in paths:
            path.chmod(0o555 if path.is_dir() else 0o444)
        if any(os.access(path, os.W_OK) for path in paths):
            chattr = shutil.which("chattr")
            for path in paths:
                if chattr is None or subprocess.run([chattr, "+i", str(path)], capture_output=True).returncode:
                    pytest.skip("cannot write-protect a file from this user (root without chattr +i)")
                immutable.append(path)
        if any(os.access(path, os.W_OK) for path in paths):
            pytest.skip("cannot write-protect a file from this user")
        yield
    finally:
        for path in immutable:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        for path, mode in modes.items():
            path.chmod(mode)


async def finished_store(folder: Path) -> Path:
    folder.mkdir()
    path = folder / "panel.db"
    await record(path, "run-1", confer_run("run-1"))
    return path


def test_random_bytes_are_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    path.write_bytes(random.Random(7).randbytes(16384))
    expected = f"{path} is not a panel transcript database (it is not an SQLite file)."
    assert history_error("list", "--db", str(path)) == expected
    assert history_error("show", "x", "--db", str(path)) == expected


async def test_random_bytes_are_refused_by_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    path.write_bytes(random.Random(7).randbytes(16384))
    assert await open_error(path) == f"{path} is not a panel transcript database (it is not an SQLite file)."


async def test_a_truncated_database_is_damaged(tmp_path: Path) -> None:
    path = await finished_store(tmp_path / "store")
    data = path.read_bytes()
    assert len(data) > 3 * 4096
    path.write_bytes(data[: len(data) // 2])
    expected = (
        f"The transcript database {path} is damaged (database disk image is malformed); move it aside,"
        " or pick another file with --db or PANEL_DB."
    )
    assert history_error("list", "--db", str(path)) == expected
    assert history_error("show", "run-1", "--db", str(path)) == expected
    assert await open_error(path) == expected


@pytest.mark.subprocess
async def test_a_damaged_database_exits_2_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    path = await finished_store(tmp_path / "store")
    path.write_bytes(path.read_bytes()[:8192])
    result = panel_process("history", "list", "--db", str(path))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith(f"panel: The transcript database {path} is damaged (")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


async def test_a_folder_is_not_a_database(tmp_path: Path) -> None:
    expected = f"{tmp_path} is a folder; the transcript database must be a file (give one with --db or PANEL_DB)."
    assert await open_error(tmp_path) == expected
    with pytest.raises(UserError, match="is a folder"):
        TranscriptReader.open(tmp_path)


@contextmanager
def held_fifo(path: Path) -> Iterator[Path]:
    """A named pipe at `path`, held open at both ends: an open of it for reading returns at
    once instead of waiting for a writer, so the test fails rather than hangs without the fix."""
    os.mkfifo(path)
    held = os.open(path, os.O_RDWR)
    try:
        yield path
    finally:
        os.close(held)


async def test_a_pipe_or_a_device_is_not_a_database(tmp_path: Path) -> None:
    """`history list --db FIFO` waited for a writer for ever, Ctrl-C and SIGTERM unheard, and
    `--db /dev/null` read as an empty store, or failed a run with SQLite's own words."""
    with held_fifo(tmp_path / "pipe.db") as pipe:
        for path in (pipe, Path("/dev/null")):
            expected = (
                f"{path} is not a regular file (a pipe, a device or a socket); the transcript database must be"
                " a file (give one with --db or PANEL_DB)."
            )
            assert await open_error(path) == expected
            with pytest.raises(UserError) as caught:
                TranscriptReader.open(path)
            assert caught.value.message == expected


@pytest.mark.subprocess
async def test_the_writer_refuses_a_write_protected_file_before_the_run(tmp_path: Path) -> None:
    path = await finished_store(tmp_path / "store")
    with write_protected(path):
        message = await open_error(path)
        assert message.startswith(f"The transcript database {path} is write-protected (")
        assert message.endswith("); make it writable, or pick another file with --db or PANEL_DB.")
        assert "run-1" in history("list", "--db", str(path))  # reading needs no write access


@pytest.mark.subprocess
async def test_the_writer_refuses_a_read_only_folder(tmp_path: Path) -> None:
    path = await finished_store(tmp_path / "store")
    with write_protected(path.parent):
        message = await open_error(path)
    assert message.startswith(f"Cannot write to the transcript database {path} (")
    assert message.endswith("); make the file and its folder writable, or pick another file with --db or PANEL_DB.")


@pytest.mark.subprocess
def test_history_reads_a_read_only_folder_and_file(tmp_path: Path) -> None:
    """No -wal or -shm file can be created there, and none is needed to read. (Not async:
    `history show` runs an event loop of its own.)"""
    path = asyncio.run(finished_store(tmp_path / "store"))
    with write_protected(path, path.parent):
        listed = history("list", "--db", str(path))
        shown = history("show", "run-1", "--db", str(path))
        assert sorted(file.name for file in path.parent.iterdir()) == ["panel.db"]
    assert "run-1" in listed and "finished" in listed
    assert "Which database should we use for the audit log?" in shown and "4 calls" in shown


@pytest.mark.subprocess
async def test_history_reads_a_read_only_folder_a_writer_left_a_wal_in(tmp_path: Path) -> None:
    """A -wal without its -shm in a read-only folder cannot be opened; the main file still can."""
    path = await finished_store(tmp_path / "store")
    copy = tmp_path / "copy"
    copy.mkdir()
    async with await TranscriptStore.open(path) as store:
        await EventBus("run-2", [store]).emit(run_started())
        shutil.copy(path, copy / "panel.db")
        shutil.copy(f"{path}-wal", copy / "panel.db-wal")
    assert sorted(file.name for file in copy.iterdir()) == ["panel.db", "panel.db-wal"]
    with write_protected(copy):
        listed = history("list", "--db", str(copy / "panel.db"))
    assert "run-1" in listed


# -- failures in the middle of a run --------------------------------------------------------

ANSWER = "Use PostgreSQL."
RUN_ID = r"[0-9a-f]{12}"


def confer_panel(folder: Path, server: FakeOpenAIServer) -> Path:
    members = "".join(f"  - name: {name}\n    model: openai/{name}\n    api_base: {server.url}\n" for name in "ab")
    path = folder / "panel.yaml"
    path.write_text(f"name: faults\nquestion: Which database?\nmax_rounds: 1\nmembers:\n{members}")
    return path


def at_first_vote(server: FakeOpenAIServer, fault: Callable[[], None], *, rationale: str = "because") -> None:
    """Both members answer, then vote for A; the first vote request does `fault` first."""
    done = threading.Lock()

    def answer(request: RecordedRequest) -> str:
        if task_of(request) != "confer.vote":
            return ANSWER
        if done.acquire(blocking=False):
            fault()
        return vote_json("A", 90, ANSWER, rationale)

    server.default(responder(answer))


def last_line(stderr: str) -> str:
    """What panel says last, after its plain progress (stderr is not a terminal)."""
    return stderr.splitlines()[-1]


def stored(db: Path) -> tuple[list[tuple[str, str]], list[tuple[str, str | None]]]:
    """(status, error) of each run, and (stage, error_kind) of each call, as the file holds them."""
    with sqlite3.connect(db) as con:
        runs = con.execute("SELECT status, error FROM runs").fetchall()
        calls = con.execute("SELECT stage, error_kind FROM calls ORDER BY seq").fetchall()
    con.close()
    return runs, calls


@pytest.mark.subprocess
def test_the_file_deleted_mid_run_is_a_warning_the_answer_printed_and_exit_1(fake_server, tmp_path):
    """A subprocess: the file goes from under the process, which SQLite would never notice
    (it goes on writing the file it has open, which nobody can read any more)."""
    db = tmp_path / "runs.db"
    at_first_vote(fake_server, db.unlink)
    result = panel_process("confer", str(confer_panel(tmp_path, fake_server)), "--db", str(db))
    assert result.returncode == 1, result.stderr
    assert result.stdout == f"{ANSWER}\n"
    assert re.fullmatch(
        rf"panel: The transcript database {re.escape(str(db))} was deleted or replaced while panel was writing it:"
        rf" run {RUN_ID} is not kept\.",
        last_line(result.stderr),
    ), result.stderr
    assert not db.exists()


@contextmanager
def immutable_later(*paths: Path) -> Iterator[Callable[[], None]]:
    """A fault that makes `paths` immutable (`chattr +i`, which stops root too), undone at the
    end; skips the test where that cannot be done. Only immutability stops a write through a
    file already open: a mode change does not."""
    chattr = shutil.which("chattr")
    probe = paths[0].parent / "probe"
    probe.touch()
    if chattr is None or subprocess.run([chattr, "+i", str(probe)], capture_output=True).returncode:
        pytest.skip("cannot make a file immutable here (chattr +i)")
    subprocess.run([chattr, "-i", str(probe)], check=True)
    made: list[Path] = []

    def fault() -> None:
        for path in paths:
            subprocess.run([chattr, "+i", str(path)], check=True)
            made.append(path)

    try:
        yield fault
    finally:
        for path in made:
            subprocess.run([chattr, "-i", str(path)], check=True)


@pytest.mark.subprocess
def test_the_file_made_unwritable_mid_run_is_a_warning_the_answer_printed_and_exit_1(fake_server, tmp_path):
    db = tmp_path / "runs.db"
    with immutable_later(db, Path(f"{db}-wal")) as fault:
        at_first_vote(fake_server, fault)
        outcome = cli("confer", str(confer_panel(tmp_path, fake_server)), "--db", str(db))
    assert outcome.exit_code == 1, outcome.output
    assert outcome.stdout == f"{ANSWER}\n"
    assert re.fullmatch(
        rf"panel: Could not write to the transcript database {re.escape(str(db))} \(disk I/O error\):"
        rf" run {RUN_ID} is not kept whole\.",
        last_line(outcome.stderr),
    ), outcome.stderr
    # Not even the run's row could be changed; the answers of the first stage are kept.
    runs, calls = stored(db)
    assert runs == [("running", None)]
    assert calls == [("answer", None), ("answer", None)]


LONG = " ".join(f"reason {n}" for n in range(4000))


def small_disk(db: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """The store's connections to `db` get room for 512 KiB more than the file holds when
    they open it (SQLite's `max_page_count`); the fault fills that room from another
    connection."""
    opened = connection.connect

    def with_little_room(path: Path) -> sqlite3.Connection:
        store = opened(path)
        pages = store.execute("PRAGMA page_count").fetchone()[0]
        store.execute(f"PRAGMA max_page_count = {pages + 64}")
        return store

    def fill_the_disk() -> None:
        with sqlite3.connect(db, timeout=30) as other:
            other.execute("CREATE TABLE filler (bytes BLOB)")
            other.execute("INSERT INTO filler VALUES (zeroblob(1000000))")
        other.close()

    monkeypatch.setattr(connection, "connect", with_little_room)
    return fill_the_disk


def test_a_full_disk_mid_run_is_a_warning_the_answer_printed_the_run_marked_failed_and_exit_1(
    fake_server, tmp_path, monkeypatch
):
    """The disk is SQLite's `max_page_count` on the store's connection: room for 512 KiB more
    than the file holds when the run opens it. At the first vote another writer fills that
    room, and the votes (each with a 40,000-character rationale) need pages there is no room
    for: SQLite refuses them as it refuses a full disk. The run's row is changed in place, so
    it can still be marked."""
    db = tmp_path / "runs.db"
    at_first_vote(fake_server, small_disk(db, monkeypatch), rationale=LONG)
    outcome = cli("confer", str(confer_panel(tmp_path, fake_server)), "--db", str(db))
    assert outcome.exit_code == 1, outcome.output
    assert outcome.stdout == f"{ANSWER}\n"
    assert re.fullmatch(
        rf"panel: Could not write to the transcript database {re.escape(str(db))} \(database or disk is full\):"
        rf" run {RUN_ID} is kept up to that point, marked failed\.",
        last_line(outcome.stderr),
    ), outcome.stderr
    runs, calls = stored(db)
    assert runs == [("failed", "the transcript database could not be written: database or disk is full")]
    assert calls == [("answer", None), ("answer", None)]


def test_a_full_disk_mid_batch_keeps_every_answer_in_the_results_and_names_the_runs_lost(
    fake_server, tmp_path, monkeypatch
):
    """Every run of a batch goes on, each line reaches the results file; the batch ends with
    the store's failure (exit 1), naming the run marked failed and those never written."""
    db, output = tmp_path / "runs.db", tmp_path / "results.jsonl"
    at_first_vote(fake_server, small_disk(db, monkeypatch), rationale=LONG)
    questions = tmp_path / "questions.txt"
    questions.write_text("First?\nSecond?\nThird?\n")
    outcome = cli(
        "batch",
        str(confer_panel(tmp_path, fake_server)),
        "--questions",
        str(questions),
        "--concurrency",
        "1",
        "--output",
        str(output),
        "--db",
        str(db),
        "--quiet",
    )
    assert outcome.exit_code == 1 and isinstance(outcome.exception, StoreFailure), outcome.output
    lines = [json.loads(line) for line in output.read_text().splitlines()]
    assert [(line["question"], line["final_answer"]) for line in lines] == [
        (question, ANSWER) for question in ("First?", "Second?", "Third?")
    ]
    first, *others = [line["run_id"] for line in lines]
    assert outcome.exception.message == (
        f"Could not write to the transcript database {db} (database or disk is full): run {first} is kept up to"
        f" that point, marked failed; runs {others[0]} and {others[1]} are not kept whole."
    )
    runs, _ = stored(db)
    assert runs == [("failed", "the transcript database could not be written: database or disk is full")]
