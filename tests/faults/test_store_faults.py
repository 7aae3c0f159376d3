"""A transcript file that is damaged, not a database, or write-protected: one sentence and
exit code 2, never a traceback; and history still reads what it is allowed to read."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import typer

from panel_cli.cli.history import history_app
from panel_cli.errors import UserError
from panel_cli.events import EventBus
from panel_cli.store.reader import TranscriptReader
from panel_cli.store.subscriber import TranscriptStore
from tests.helpers import cli, panel_process
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


async def test_the_writer_refuses_a_write_protected_file_before_the_run(tmp_path: Path) -> None:
    path = await finished_store(tmp_path / "store")
    with write_protected(path):
        message = await open_error(path)
        assert message.startswith(f"The transcript database {path} is write-protected (")
        assert message.endswith("); make it writable, or pick another file with --db or PANEL_DB.")
        assert "run-1" in history("list", "--db", str(path))  # reading needs no write access


async def test_the_writer_refuses_a_read_only_folder(tmp_path: Path) -> None:
    path = await finished_store(tmp_path / "store")
    with write_protected(path.parent):
        message = await open_error(path)
    assert message.startswith(f"Cannot write to the transcript database {path} (")
    assert message.endswith("); make the file and its folder writable, or pick another file with --db or PANEL_DB.")


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
