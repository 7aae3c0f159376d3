"""Imported transcripts whose JSON parses but has the wrong shape. `history import` checks each
stored JSON value against what a run writes there (an event's fields, a result, a decision's
counts, a retally, a call's messages) before it copies anything; a file that passes is one
that show, replay, export and retally read to the end. Fuzzed with hypothesis: a stored value
anywhere in a real run's rows is replaced by JSON of any shape; the import then refuses the
file with one sentence, or every reader ends cleanly."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from panel_cli.errors import UserError
from tests.helpers import ROOT, cli

PROTOCOLS = ("confer", "council", "vote", "decide", "delphi", "supervise", "orchestrate", "ensemble")
# Every stored JSON column a reader reads a shape from: (table, column, key columns).
JSON_COLUMNS = (
    ("events", "payload_json", ("run_id", "seq")),
    ("runs", "result_json", ("id",)),
    ("calls", "request_json", ("run_id", "id")),
    ("decisions", "vote_counts_json", ("run_id",)),
    ("retallies", "result_json", ("id",)),
)

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


def near(value: Any) -> st.SearchStrategy[Any]:
    """Values a stored one could be turned into that still parse: the far ends of its own type
    (what slips past a check of the type alone), and values of every other shape."""
    if isinstance(value, bool):
        same: st.SearchStrategy[Any] = st.sampled_from([not value, 1, "yes"])
    elif isinstance(value, int):
        same = st.sampled_from([-1, 0, 2**62, -(2**62), 10**18, 1.5, "3"])
    elif isinstance(value, float):
        same = st.sampled_from([1e308, -1e308, 0.0, -1.0, 1e-300, 2**62, "1.0"])
    elif isinstance(value, str):
        same = st.sampled_from(["", "zz-unknown", "x" * 300, [value], {"a": value}])
    elif isinstance(value, list):
        same = st.sampled_from([[], value + value, value[:1] * 5, [None], [[]], [{}]])
    elif isinstance(value, dict):
        same = st.sampled_from([{}, {"zz": 1}, dict.fromkeys(value), [], "x"])
    else:
        same = st.sampled_from([1, "x", [], {}])
    return same | JSON_VALUES


@pytest.fixture(scope="module")
def stored_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file holding a demo run of every protocol, and a retally of the vote."""
    folder = tmp_path_factory.mktemp("runs")
    db = folder / "runs.db"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PANEL_DEMO_DELAY", "0")
        patch.setenv("PANEL_CONFIG_DIR", str(folder))
        for protocol in PROTOCOLS:
            file = ROOT / "configs" / f"{protocol if protocol != 'confer' else 'demo'}.yaml"
            outcome = cli(protocol, str(file), "--json", "--db", str(db))
            assert outcome.exit_code == 0, (protocol, outcome.output)
        vote = cli("history", "list", "--protocol", "vote", "--json", "--db", str(db))
        run_id = json.loads(vote.stdout)[0]["run_id"]
        assert cli("history", "retally", run_id, "--method", "majority", "--db", str(db)).exit_code == 0
    return db


def _paths(value: Any, prefix: tuple[Any, ...] = (), depth: int = 0) -> list[tuple[Any, ...]]:
    """Every place in a JSON value a fuzzed value may go (at most four levels down)."""
    found = [prefix]
    if depth >= 4:
        return found
    if isinstance(value, dict):
        for key, item in value.items():
            if key != "$text":
                found += _paths(item, (*prefix, key), depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index), depth + 1)
    return found


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        value = value[part]
    return value


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, *rest = path
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[head] = _replaced(value[head], tuple(rest), new)
    return copy


def _fuzz(db: Path, data: st.DataObject) -> str:
    """Replace one value somewhere in one stored JSON column; what was changed, for the report."""
    with sqlite3.connect(db) as stored:
        table, column, keys = data.draw(st.sampled_from(JSON_COLUMNS), label="column")
        rows = stored.execute(f"SELECT {', '.join(keys)}, {column} FROM {table} WHERE {column} IS NOT NULL").fetchall()
        key_values = *_, raw = data.draw(st.sampled_from(rows), label="row")
        value = json.loads(raw)
        path = data.draw(st.sampled_from(_paths(value)), label="path")
        new = data.draw(near(_at(value, path)), label="new value")
        where = " AND ".join(f"{key} = ?" for key in keys)
        stored.execute(
            f"UPDATE {table} SET {column} = ? WHERE {where}",
            (json.dumps(_replaced(value, path, new)), *key_values[:-1]),
        )
    return f"{table}.{column} {key_values[:-1]} at {list(path)}: {new!r}"


def _clean(outcome: Any) -> bool:
    """Ended as panel means to: done, one sentence (UserError), or an exit it chose."""
    return outcome.exception is None or isinstance(outcome.exception, UserError | SystemExit)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_an_imported_file_of_any_shape_is_refused_or_read_to_the_end(stored_runs, tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("fuzz")
    source = folder / "other.db"
    shutil.copy(stored_runs, source)
    changed = _fuzz(source, data)
    target = folder / "mine.db"
    imported = cli("history", "import", str(source), "--db", str(target))
    assert _clean(imported), (changed, imported.output, imported.exception)
    if imported.exit_code != 0:
        assert isinstance(imported.exception, UserError) and "nothing was imported" in imported.exception.message
        return
    with sqlite3.connect(target) as stored:
        runs = stored.execute("SELECT id, protocol FROM runs").fetchall()
    for run_id, protocol in runs:
        commands = [
            ("history", "show", run_id),
            ("history", "show", run_id, "--json"),
            ("history", "replay", run_id, "--speed", "max"),
            ("history", "export", run_id, "--format", "md"),
            ("history", "export", run_id, "-o", str(folder / f"{run_id}.html")),
        ]
        if protocol in ("vote", "decide"):
            commands.append(("history", "retally", run_id, "--method", "plurality"))
        for command in commands:
            outcome = cli(*command, "--db", str(target))
            assert _clean(outcome), (changed, command, outcome.output[-2000:], repr(outcome.exception))


# What the fuzzing found, kept as plain tests: each failed before import checked shapes.


def _edit(db: Path, table: str, column: str, where: str, change: Any) -> None:
    """Rewrite the first stored JSON value of `table.column` matching `where` with `change`."""
    with sqlite3.connect(db) as stored:
        (raw,) = stored.execute(f"SELECT {column} FROM {table} WHERE {where} LIMIT 1").fetchone()
        value = json.loads(raw)
        change(value)
        stored.execute(f"UPDATE {table} SET {column} = ? WHERE {column} = ?", (json.dumps(value), raw))


def _copied(stored_runs: Path, tmp_path: Path) -> Path:
    source = tmp_path / "other.db"
    shutil.copy(stored_runs, source)
    return source


def test_an_event_that_is_not_what_its_type_says_is_refused_naming_it(stored_runs, tmp_path):
    source = _copied(stored_runs, tmp_path)
    _edit(source, "events", "payload_json", "type = 'round_tallied'", lambda value: value.update(round="first"))
    target = tmp_path / "mine.db"
    refused = cli("history", "import", str(source), "--db", str(target))
    assert isinstance(refused.exception, UserError)
    assert refused.exception.message.startswith(f"{source} cannot be imported: run '")
    assert "events: its round_tallied event (seq " in refused.exception.message
    assert "is not one (round: Input should be a valid integer" in refused.exception.message
    assert not target.exists() or not sqlite3.connect(target).execute("SELECT count(*) FROM runs").fetchone()[0]


def test_a_runoff_round_naming_a_winner_it_never_counted_is_still_drawn(stored_runs, tmp_path):
    source = _copied(stored_runs, tmp_path)
    _edit(
        source,
        "events",
        "payload_json",
        "type = 'vote_tallied' AND payload_json LIKE '%\"rounds\":[%'",
        lambda value: value["tally"]["rounds"][-1].update(winner=""),
    )
    target = tmp_path / "mine.db"
    assert cli("history", "import", str(source), "--db", str(target)).exit_code == 0
    (run_id,) = sqlite3.connect(target).execute("SELECT id FROM runs WHERE protocol = 'vote'").fetchone()
    for command in (
        ("history", "show", run_id),
        ("history", "replay", run_id, "--speed", "max"),
        ("history", "export", run_id, "--format", "md"),
    ):
        outcome = cli(*command, "--db", str(target))
        assert outcome.exit_code == 0 and outcome.exception is None, (command, outcome.exception)


def test_a_stored_result_whose_counts_are_text_still_retallies(stored_runs, tmp_path):
    source = _copied(stored_runs, tmp_path)
    _edit(
        source,
        "runs",
        "result_json",
        "protocol = 'vote'",
        lambda value: value.update(vote_counts="x", weights=["y"], threshold="x", failure_reason=1, confidence="x"),
    )
    target = tmp_path / "mine.db"
    assert cli("history", "import", str(source), "--db", str(target)).exit_code == 0
    (run_id,) = sqlite3.connect(target).execute("SELECT id FROM runs WHERE protocol = 'vote'").fetchone()
    outcome = cli("history", "retally", run_id, "--method", "plurality", "--db", str(target))
    assert outcome.exit_code == 0 and outcome.exception is None, outcome.exception


def test_a_score_past_any_figure_a_run_records_is_refused(stored_runs, tmp_path):
    """-1e308 is a finite float that validates as a score; summed or rounded in a view it
    overflows. No figure a run records comes near it."""
    source = _copied(stored_runs, tmp_path)
    _edit(
        source,
        "events",
        "payload_json",
        "type = 'round_tallied' AND payload_json LIKE '%\"scores\"%'",
        lambda value: value["scores"].update({next(iter(value["scores"])): -1e308}),
    )
    refused = cli("history", "import", str(source), "--db", str(tmp_path / "mine.db"))
    assert isinstance(refused.exception, UserError)
    assert "holds -1e+308, past any figure a run records (at most 1e+15 either way)" in refused.exception.message


@pytest.mark.parametrize(
    "change",
    [
        lambda tally: tally.update(method={"a": "ranked_choice"}),
        lambda tally: tally["rounds"][0].update(counts=[]),
        lambda tally: tally["rounds"][0].update(eliminated=1),
    ],
    ids=["method-an-object", "round-counts-a-list", "eliminated-a-number"],
)
def test_a_vote_tally_that_is_not_a_tally_is_refused(stored_runs, tmp_path, change):
    """A vote_tallied event says only that its tally is a mapping; the import reads it as the
    vote's own count, which every reader of a vote draws."""
    source = _copied(stored_runs, tmp_path)
    _edit(
        source,
        "events",
        "payload_json",
        "type = 'vote_tallied' AND payload_json LIKE '%\"rounds\":[%'",
        lambda value: change(value["tally"]),
    )
    refused = cli("history", "import", str(source), "--db", str(tmp_path / "mine.db"))
    assert isinstance(refused.exception, UserError), refused.exception
    assert "events: its vote_tallied event (seq " in refused.exception.message
