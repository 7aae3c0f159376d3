"""`panel history delete` and `purge`: they ask first (unless --yes), say what they will delete,
delete exactly that, and leave every other run whole; a stale run, whose process is gone, can
go, a run still being written cannot."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import typer
from click.testing import Result

from panel_cli.cli.history import history_app
from panel_cli.errors import UserError
from tests.cli.test_history import DAY, days_ago, keep, keep_at
from tests.helpers import ROOT, cli, run_python
from tests.store.sample_runs import ENDINGS, answer_calls, confer_run, run_started

app = typer.Typer()
app.add_typer(history_app, name="history")


def history(*args: str, input: str | None = None) -> Result:
    return cli("history", *args, input=input, catch_exceptions=False)


def stored(path: Path) -> dict[str, tuple[str, int, int]]:
    """Every run left: id -> (status, its events, its calls), read back through `show --json`."""
    listed = json.loads(history("list", "--limit", "1000", "--json", "--db", str(path)).stdout)
    runs = {}
    for row in listed:
        detail = json.loads(history("show", row["run_id"], "--json", "--db", str(path)).stdout)
        runs[row["run_id"]] = (row["status"], len(detail["events"]), len(detail["call_records"]))
    return runs


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Two runs 40 days old (finished, interrupted), one 10 days old, one of today."""
    path = tmp_path / "runs.db"
    interrupted = [run_started(), *answer_calls("old-interrupted"), ENDINGS["interrupted"]]
    keep_at(path, "old-finished", confer_run("old-finished"), days_ago(40, len(confer_run("x"))))
    keep_at(path, "old-interrupted", interrupted, days_ago(40.5, len(interrupted)))
    keep_at(path, "tenday", confer_run("tenday"), days_ago(10, len(confer_run("x"))))
    keep(path, "today", confer_run("today"))
    return path


def test_delete_asks_first_and_no_keeps_the_run(db: Path) -> None:
    before = stored(db)
    result = history("delete", "tenday", "--db", str(db), input="n\n")
    assert result.exit_code == 1
    asked, prompt = result.stderr.splitlines()
    assert asked.startswith("Run tenday (confer, finished, ")
    assert asked.endswith("): Which database should we use for the audit log?")
    assert prompt.startswith("Delete it? [y/N]:") and prompt.endswith("Nothing deleted.")  # the answer echoes on stdout
    assert stored(db) == before


def test_no_answer_at_all_deletes_nothing(db: Path) -> None:
    before = stored(db)
    result = history("delete", "tenday", "--db", str(db), input="")
    assert result.exit_code == 1 and result.stderr.endswith("Delete it? [y/N]:\nNothing deleted.\n"), (
        "on a line of its own"
    )
    assert stored(db) == before


def test_delete_yes_at_the_prompt_deletes_that_run_alone(db: Path) -> None:
    before = stored(db)
    result = history("delete", "ten", "--db", str(db), input="y\n")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1].startswith("Deleted run tenday (confer, finished, ")
    after = stored(db)
    assert "tenday" not in after
    assert after == {run_id: kept for run_id, kept in before.items() if run_id != "tenday"}, "every other run whole"


def test_delete_with_yes_asks_nothing(db: Path) -> None:
    result = history("delete", "today", "--yes", "--db", str(db))
    assert result.exit_code == 0 and result.stderr == ""
    assert result.stdout.startswith("Deleted run today (confer, finished, ") and result.stdout.endswith(").\n")
    assert "today" not in stored(db)


def follow_up_of(parent: str, run_id: str, ending: str = "finished") -> list:
    """A run that follows `parent` up (`--continue`), ending as `ending` says."""
    started = run_started().model_copy(update={"config": {"parent_id": parent}})
    return [started, *answer_calls(run_id), ENDINGS[ending]]


def test_deleting_a_run_with_follow_ups_says_they_stay_and_asks(db: Path) -> None:
    keep(db, "child-1", follow_up_of("tenday", "child-1"))
    keep(db, "child-2", follow_up_of("tenday", "child-2", "interrupted"))
    keep(db, "grandchild", follow_up_of("child-1", "grandchild"))
    refused = history("delete", "tenday", "--db", str(db), input="n\n")
    assert refused.exit_code == 1
    said = refused.stderr.splitlines()[1]
    assert said == (
        "It has 3 follow-ups, 2 of them direct (child-1, grandchi, child-2); they stay, and their thread will"
        " say this run is no longer stored. The stopped one (child-2) could no longer be resumed."
    )
    assert "tenday" in stored(db)

    deleted = history("delete", "tenday", "--db", str(db), "--yes")
    assert deleted.exit_code == 0 and deleted.stderr == "", "--yes asks nothing"
    assert deleted.stdout.rstrip().endswith("; its 3 follow-ups stay.")
    assert {"child-1", "child-2", "grandchild"} <= set(stored(db))
    shown = history("show", "child-1", "--db", str(db)).stdout
    assert "follows up tenday, no longer stored" in shown


def test_a_run_without_follow_ups_is_asked_about_as_before(db: Path) -> None:
    result = history("delete", "today", "--db", str(db), input="n\n")
    assert len(result.stderr.splitlines()) == 2 and "follow-up" not in result.output


def test_delete_an_unknown_or_ambiguous_id(db: Path) -> None:
    with pytest.raises(UserError, match="^No run has the id 'nope'; `panel history list` shows the stored runs.$"):
        history("delete", "nope", "--yes", "--db", str(db))
    with pytest.raises(
        UserError, match="^The id 'old' matches several runs \\(old-finished, old-interrupted\\); give more of it.$"
    ):
        history("delete", "old", "--yes", "--db", str(db))


def test_a_run_still_being_written_is_not_deleted(tmp_path: Path) -> None:
    """Its process (this one) is alive: refused before anything is asked."""
    path = tmp_path / "runs.db"
    keep(path, "live", [run_started(), *answer_calls("live")])
    with pytest.raises(
        UserError, match=r"^Run live is still running \(process \d+\); stop it, or wait for it to end.$"
    ):
        history("delete", "live", "--db", str(path), input="y\n")
    assert "live" in stored(path)


def crash_a_run(path: Path, run_id: str) -> None:
    """Start a run in another process that then dies without ending it: a stale run."""
    code = (
        "import sys, asyncio\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from pathlib import Path\n"
        "from tests.store.sample_runs import record, run_started, answer_calls\n"
        f"asyncio.run(record(Path({str(path)!r}), {run_id!r}, [run_started(), *answer_calls({run_id!r})]))\n"
    )
    run_python(code).check_returncode()


@pytest.mark.subprocess
def test_a_stale_run_is_listed_shown_and_deleted(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    crash_a_run(path, "crashed")
    keep(path, "live", [run_started(), *answer_calls("live")])
    listed = history("list", "--db", str(path)).stdout
    assert any(line.startswith("crashed ") and " stale " in line for line in listed.splitlines())
    assert any(line.startswith("live ") and " running " in line for line in listed.splitlines())
    assert [
        row["run_id"] for row in json.loads(history("list", "--status", "stale", "--json", "--db", str(path)).stdout)
    ] == ["crashed"]
    shown = history("show", "crashed", "--db", str(path)).stdout
    assert "Status    stale (running, but its process " in shown and " is gone)" in shown
    assert (
        "The run never ended: its process is gone (it crashed or was killed); `panel resume` can continue it." in shown
    )
    assert "round 0 · answer" in shown
    assert history("delete", "crashed", "--yes", "--db", str(path)).exit_code == 0
    assert list(stored(path)) == ["live"]


def test_purge_needs_older_than(db: Path) -> None:
    result = cli("history", "purge", "--yes", "--db", str(db))
    assert result.exit_code == 2 and "Missing option '--older-than'" in result.output


def test_purge_says_how_many_and_asks(db: Path) -> None:
    before = stored(db)
    result = history("purge", "--older-than", "30d", "--db", str(db), input="n\n")
    assert result.exit_code == 1
    cutoff = time.strftime("%Y-%m-%d %H:%M", time.localtime(time.time() - 30 * DAY))
    assert result.stderr.startswith(f"Delete 2 runs started before {cutoff} from {db}? [y/N]:")
    assert result.stderr.endswith("Nothing deleted.\n")
    assert stored(db) == before


def test_purge_deletes_the_old_runs_and_leaves_the_rest_whole(db: Path) -> None:
    before = stored(db)
    result = history("purge", "--older-than", "30d", "--db", str(db), input="y\n")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1].startswith("Deleted 2 runs started before ")
    assert stored(db) == {run_id: kept for run_id, kept in before.items() if not run_id.startswith("old-")}


def test_purge_by_status(db: Path) -> None:
    before = stored(db)
    result = history("purge", "--older-than", "30d", "--status", "interrupted", "--yes", "--db", str(db))
    assert result.exit_code == 0 and result.stderr == ""
    assert result.stdout.startswith("Deleted 1 interrupted run started before ")
    assert stored(db) == {run_id: kept for run_id, kept in before.items() if run_id != "old-interrupted"}


def test_purge_a_date(db: Path) -> None:
    day = time.strftime("%Y-%m-%d", time.localtime(time.time() - 5 * DAY))
    result = history("purge", "--older-than", day, "--yes", "--db", str(db))
    assert result.stdout.startswith(f"Deleted 3 runs started before {day} 00:00.")
    assert list(stored(db)) == ["today"]


def test_purge_with_nothing_to_delete_asks_nothing(db: Path) -> None:
    before = stored(db)
    result = history("purge", "--older-than", "90d", "--status", "failed", "--db", str(db))
    assert result.exit_code == 0 and result.stderr == ""
    assert result.stdout.startswith("No failed runs started before ") and result.stdout.endswith(
        "; nothing to delete.\n"
    )
    assert stored(db) == before


@pytest.mark.subprocess
def test_purge_spares_a_run_still_being_written_and_takes_a_stale_one(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    crash_a_run(path, "crashed")
    keep(path, "live", [run_started(), *answer_calls("live")])
    tomorrow = time.strftime("%Y-%m-%d", time.localtime(time.time() + DAY))
    result = history("purge", "--older-than", tomorrow, "--status", "running", "--yes", "--db", str(path))
    assert result.stdout.startswith("Deleted 1 running run started before ")
    assert list(stored(path)) == ["live"]


def test_purge_of_nothing_but_a_run_still_being_written_says_so(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    keep(path, "live", [run_started(), *answer_calls("live")])
    tomorrow = time.strftime("%Y-%m-%d", time.localtime(time.time() + DAY))
    result = history("purge", "--older-than", tomorrow, "--yes", "--db", str(path))
    assert result.stdout == (
        f"Nothing to delete in {path}: the 1 run started before {tomorrow} 00:00 is still being written.\n"
    )
    assert list(stored(path)) == ["live"]


def test_purge_a_time_that_is_no_time(db: Path) -> None:
    with pytest.raises(
        UserError,
        match="^--older-than takes a span such as 7d, 24h or 30m, or a date such as 2025-01-31, not 'a month'.$",
    ):
        history("purge", "--older-than", "a month", "--yes", "--db", str(db))
