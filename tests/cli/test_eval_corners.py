"""The corners of `panel eval` a new user hit: `last` as an eval id, an ambiguous beginning of
one that names no candidates, `history import` that left the evals behind, and demo personas
scoring 0% without a word on what eval wants. Each through the CLI, in-process."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.helpers import cli, cli_json, cli_ok, cli_refused

EVAL = ("eval", "configs/vote.yaml", "--dataset", "builtin:general", "--limit", "1", "--protocols", "vote")


def run_eval(db: Path) -> str:
    """An eval of one question on the demo vote panel; its id."""
    return cli_json(*EVAL, "--db", str(db))["eval_id"]


@pytest.fixture
def two_evals(tmp_path: Path) -> tuple[Path, str, str]:
    db = tmp_path / "runs.db"
    first, second = run_eval(db), run_eval(db)
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE evals SET started_at = '2020-01-01T00:00:00.000000000Z' WHERE id = ?", (first,))
    connection.close()
    return db, first, second


def test_show_and_resume_take_last(two_evals: tuple[Path, str, str]) -> None:
    db, _, second = two_evals
    shown = cli_json("eval", "show", "last", "--db", str(db))
    assert shown["eval_id"] == second
    assert cli_refused("eval", "--resume", "last", "--db", str(db)) == (
        f"Eval {second} is finished; panel eval show {second} shows it."
    )


def test_last_is_not_an_eval_dated_in_the_future(two_evals: tuple[Path, str, str]) -> None:
    db, first, _ = two_evals
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE evals SET started_at = '2999-01-01T00:00:00.000000000Z' WHERE id = ?", (first,))
    connection.close()
    assert cli_json("eval", "show", "last", "--db", str(db))["eval_id"] != first


def test_an_ambiguous_beginning_names_the_evals_it_could_be(two_evals: tuple[Path, str, str]) -> None:
    db, first, second = two_evals
    with sqlite3.connect(db) as connection:
        for table in ("eval_questions", "eval_items", "eval_judge_calls"):
            connection.execute(f"UPDATE {table} SET eval_id = 'same' || eval_id")
        connection.execute("UPDATE evals SET id = 'same' || id")
    connection.close()
    said = cli_refused("eval", "show", "same", "--db", str(db))
    assert said.startswith("'same' begins more than one eval's id (")
    assert f"same{first}" in said and f"same{second}" in said and said.endswith("); give more of it.")
    assert "Eval of vote-demo" in cli_ok("eval", "show", f"same{first}", "--db", str(db))


def test_history_import_brings_the_evals_with_their_runs(tmp_path: Path) -> None:
    shard = tmp_path / "shard.db"
    eval_id = run_eval(shard)
    target = tmp_path / "all.db"
    report = cli_json("history", "import", str(shard), "--db", str(target))
    assert report["evals"] == [eval_id] and report["evals_skipped"] == []
    assert (
        cli_json("eval", "show", eval_id, "--db", str(target))["systems"]
        == cli_json("eval", "show", eval_id, "--db", str(shard))["systems"]
    )
    again = cli_ok("history", "import", str(shard), "--db", str(target))
    assert "skipped 2 runs and 1 eval already there" in again

    with sqlite3.connect(target) as connection:
        connection.execute("UPDATE evals SET status = 'interrupted'")
    connection.close()
    refused = cli_refused("eval", "--resume", eval_id, "--db", str(target))
    assert refused.startswith(f"Eval {eval_id} came from {shard.resolve()} (panel history import)")


def test_an_eval_row_that_holds_what_no_eval_can_refuses_the_import_whole(tmp_path: Path) -> None:
    shard = tmp_path / "shard.db"
    eval_id = run_eval(shard)
    with sqlite3.connect(shard) as connection:
        connection.execute("UPDATE eval_items SET grade_json = '[1, 2' WHERE eval_id = ?", (eval_id,))
    connection.close()
    target = tmp_path / "all.db"
    refused = cli_refused("history", "import", str(shard), "--db", str(target))
    assert f"eval '{eval_id}', eval_items.grade_json holds" in refused and refused.endswith("nothing was imported.")
    assert json.loads(cli("history", "list", "--json", "--db", str(target)).stdout) == []


def test_demo_personas_are_told_to_score_near_zero_and_what_eval_wants(tmp_path: Path) -> None:
    outcome = cli(*EVAL, "--db", str(tmp_path / "runs.db"))
    assert outcome.exit_code == 0, outcome.output
    said = "are demo personas: a persona answers in a voice of its own, never the question, so it scores near 0%."
    assert said in outcome.stderr and "demo/oracle@p" in outcome.stderr, "before the first run"
    assert said in " ".join(outcome.stdout.split()), "and under the table, where the 0% is"
    oracles = tmp_path / "oracles.yaml"
    oracles.write_text(
        "name: oracles\nprotocol: vote\nmembers:\n"
        + "".join(f"  - {{name: o{n}, model: demo/oracle@0.7}}\n" for n in range(3))
    )
    quiet = cli("eval", str(oracles), *EVAL[2:], "--db", str(tmp_path / "runs.db"))
    assert quiet.exit_code in (0, 1), quiet.output
    assert "near 0%" not in quiet.output
