"""Merging the runs of another transcript file into this one (`panel history import`).

Shards of one `panel batch` run on several machines, each into its own file; importing the
files brings the batch together. A run is copied whole (its row and every row of every table
that belongs to it) or not at all: one already in this file, by id, is skipped, so importing
the same file twice changes nothing. Ids are kept. Texts are found by their hash, so a text
both files hold is stored once, and every reference to a text (a column, a `{"$text": id}`
inside JSON, a part of a composed text) is rewritten to its id in this file.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from panel_cli.errors import UserError
from panel_cli.store.connection import connect, database_error
from panel_cli.store.paths import resolve_db_path
from panel_cli.store.processes import process_alive, this_host
from panel_cli.store.reader import TranscriptReader, load_json
from panel_cli.store.records import RUN_STATUSES, listed_status, read_time
from panel_cli.store.texts import MissingTextError, TextCache, dumps, refs_in, remap_refs

# What a column of a run's rows may hold, as `panel history import` checks it: each a test
# of a value that is not NULL (NULL passes, except in a column `required` names), and what
# it is, for the sentence refusing a file.
Check = tuple[Callable[[Any], bool], str]
LONGEST_ID = 256
# Far past any fractional figure a run records (a time in seconds, a score, a cost, a latency):
# a float beyond it in an event is a file's lie, and arithmetic on it overflows in the views.
LARGEST_FIGURE = 1e15


def _whole(value: Any) -> bool:
    return isinstance(value, int) and -(2**63) <= value < 2**63


def _count(value: Any) -> bool:
    return _whole(value) and value >= 0


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _json(kind: type) -> Callable[[Any], bool]:
    def valid(value: Any) -> bool:
        try:
            return isinstance(load_json(value), kind)
        except ValueError:
            return False

    return valid


def _id(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= LONGEST_ID and value.isprintable()


TEXT: Check = (lambda value: isinstance(value, str), "text")
WHOLE: Check = (_whole, "a whole number")
COUNT: Check = (_count, "a count")
NUMBER: Check = (_number, "a finite number")
TIME: Check = (lambda value: read_time(value) is not None, "a time (2025-01-31T09:30:00.000000000Z)")
TEXT_ID: Check = (_whole, "a text's id")
RUN_ID: Check = (_id, f"an id (printable, 1 to {LONGEST_ID} characters)")
STATUS: Check = (lambda value: value in RUN_STATUSES, f"a status ({', '.join(RUN_STATUSES)})")
OBJECT: Check = (_json(dict), "a JSON object")
LIST: Check = (_json(list), "a JSON list")
ANY_JSON: Check = (_json(object), "JSON")


@dataclass(frozen=True)
class RunTable:
    """A table whose rows belong to runs: `run_column` names the run (`id` for `runs` itself),
    `texts` are columns holding a text's id, `refs` JSON columns whose `{"$text": id}`
    references point at texts. Texts found any other way would be left pointing nowhere.
    `columns` says what each column may hold, `required` which may not be NULL."""

    name: str
    run_column: str = "run_id"
    texts: tuple[str, ...] = ()
    refs: tuple[str, ...] = ()
    columns: Mapping[str, Check] = field(default_factory=dict)
    required: tuple[str, ...] = ()


# Every table that holds rows of runs, `runs` first; a new one must be listed here (a test
# checks that every table with a `run_id` column is).
RUN_TABLES = (
    RunTable(
        "runs",
        run_column="id",
        texts=("question_text", "config_text", "final_answer_text"),
        refs=("result_json",),
        columns={
            "id": RUN_ID,
            **dict.fromkeys(("protocol", "panel", "error", "outcome", "host", "batch_id"), TEXT),
            **dict.fromkeys(("question_text", "config_text", "final_answer_text"), TEXT_ID),
            "status": STATUS,
            "started_at": TIME,
            "finished_at": TIME,
            "result_json": OBJECT,
            **dict.fromkeys(("calls", "tokens"), COUNT),
            "cost": NUMBER,
            **dict.fromkeys(("pid", "started_seq", "ended_seq"), WHOLE),
            "parent_id": RUN_ID,
            "resumed_by": RUN_ID,
            "imported_from": TEXT,
        },
        required=("id", "protocol", "status", "started_at", "question_text"),
    ),
    RunTable(
        "events",
        refs=("payload_json",),
        columns={"seq": WHOLE, "ts": TIME, "type": TEXT, "payload_json": OBJECT},
        required=("seq", "type"),
    ),
    RunTable(
        "calls",
        texts=("response_text",),
        refs=("request_json",),
        columns={
            "id": TEXT,
            **dict.fromkeys(("seq", "started_seq", "round", "truncated", "reused", "late", "attempts"), WHOLE),
            **dict.fromkeys(
                ("member", "model", "stage", "about", "request_hash", "error_kind", "error", "detail"), TEXT
            ),
            "request_json": LIST,
            "response_text": TEXT_ID,
            **dict.fromkeys(("tokens_in", "tokens_out"), COUNT),
            **dict.fromkeys(("cost", "latency"), NUMBER),
            "ts": TIME,
        },
        required=("id",),
    ),
    RunTable(
        "decisions",
        columns={
            "seq": WHOLE,
            **dict.fromkeys(("topic", "winner", "method", "leader"), TEXT),
            "vote_counts_json": OBJECT,
            **dict.fromkeys(("total_votes", "ballots_cast"), COUNT),
            **dict.fromkeys(("leader_override", "consensus_reached"), WHOLE),
            "decided_at": TIME,
        },
    ),
    RunTable(
        "retallies",
        columns={
            "id": TEXT,
            "method": TEXT,
            "threshold": NUMBER,
            "quorum": COUNT,
            "winner": TEXT,
            "leader_override": WHOLE,
            "result_json": OBJECT,
            "created_at": TIME,
        },
        required=("id",),
    ),
    RunTable(
        "tool_calls",
        columns={
            "seq": WHOLE,
            **dict.fromkeys(
                ("call_id", "tool_call_id", "member", "stage", "about", "server", "tool", "status", "error"), TEXT
            ),
            "round": WHOLE,
            "arguments_json": ANY_JSON,
            "result_chars": COUNT,
            "truncated": WHOLE,
            "duration": NUMBER,
            "ts": TIME,
        },
        required=("seq",),
    ),
)


# The tables of an eval (migration 8), `evals` first, each keyed by the eval's id: an eval is
# copied whole, with its questions, graded items and judge calls, beside the runs it graded.
EVAL_TABLES = (
    RunTable(
        "evals",
        run_column="id",
        columns={
            "id": RUN_ID,
            **dict.fromkeys(("status", "panel", "dataset", "dataset_sha256", "host"), TEXT),
            **dict.fromkeys(("started_at", "finished_at"), TIME),
            **dict.fromkeys(("questions", "seed", "pid"), WHOLE),
            "summary_json": OBJECT,
        },
        required=("id", "status", "started_at", "summary_json"),
    ),
    RunTable(
        "eval_questions",
        run_column="eval_id",
        columns={
            "position": WHOLE,
            **dict.fromkeys(("question_id", "question", "answer", "about"), TEXT),
            "options_json": LIST,
        },
        required=("position", "question_id"),
    ),
    RunTable(
        "eval_items",
        run_column="eval_id",
        columns={
            **dict.fromkeys(("system", "question_id", "final_answer", "error"), TEXT),
            "graded_run": RUN_ID,
            **dict.fromkeys(("correct", "calls", "tokens", "judge_tokens"), WHOLE),
            **dict.fromkeys(("cost", "duration", "judge_cost"), NUMBER),
            "grade_json": OBJECT,
            "ts": TIME,
        },
        required=("system", "question_id", "grade_json"),
    ),
    RunTable(
        "eval_judge_calls",
        run_column="eval_id",
        columns={
            **dict.fromkeys(("system", "question_id", "member", "model", "prompt", "reply", "error"), TEXT),
            **dict.fromkeys(("tokens_in", "tokens_out"), COUNT),
            **dict.fromkeys(("cost", "latency"), NUMBER),
            "ts": TIME,
        },
        required=("system", "question_id"),
    ),
)


class ImportReport(BaseModel):
    """What an import did: `imported` runs, `skipped` ones this file already had, `running`
    ones still being written by a process on this host (left for a later import, or they
    would stay `running` here for good), and how many `texts` were new to this file; the
    `evals` copied with them, and those this file had (`evals_skipped`)."""

    source: str
    target: str
    imported: list[str]
    skipped: list[str]
    running: list[str]
    texts: int
    evals: list[str] = Field(default_factory=list)
    evals_skipped: list[str] = Field(default_factory=list)


class TextCopier:
    """Copies texts from the other file on demand, each once, and remembers their ids here."""

    def __init__(self, source: sqlite3.Connection, target: sqlite3.Connection) -> None:
        self._source = source
        self._target = target
        self._ids: dict[int, int] = {}
        self.added = 0

    def id_for(self, source_id: int) -> int:
        if source_id not in self._ids:
            self._ids[source_id] = self._copy(source_id)
        return self._ids[source_id]

    def _copy(self, source_id: int) -> int:
        row = self._source.execute(
            "SELECT hash, body, parts, searchable FROM texts WHERE id = ?", (source_id,)
        ).fetchone()
        if row is None:
            raise MissingTextError(f"text {source_id} is missing")
        digest, body, parts, searchable = row
        found = self._target.execute("SELECT id, searchable FROM texts WHERE hash = ?", (digest,)).fetchone()
        if found is not None:
            target_id, indexed = found
            if searchable and not indexed:
                # As `Texts.put` does: a text becoming a question or an answer is kept whole and indexed.
                whole = body if body is not None else TextCache(self._source).get(source_id)
                self._target.execute(
                    "UPDATE texts SET body = ?, parts = NULL, searchable = 1 WHERE id = ?", (whole, target_id)
                )
                self._target.execute("INSERT INTO text_search (rowid, body) VALUES (?, ?)", (target_id, whole))
            return int(target_id)
        if searchable and body is None:
            body, parts = TextCache(self._source).get(source_id), None
        if parts is not None:
            parts = dumps(
                [[self.id_for(part[0]), *part[1:]] if isinstance(part, list) else part for part in json.loads(parts)]
            )
        cursor = self._target.execute(
            "INSERT INTO texts (hash, body, parts, searchable) VALUES (?, ?, ?, ?)", (digest, body, parts, searchable)
        )
        target_id = int(cursor.lastrowid or 0)
        if searchable:
            self._target.execute("INSERT INTO text_search (rowid, body) VALUES (?, ?)", (target_id, body))
        self.added += 1
        return target_id


def import_runs(
    path: Path | str | None, other: Path | str, check_event: Callable[[dict[str, Any]], object] | None = None
) -> ImportReport:
    """Copy every run of `other` that the file at `path` lacks, in one transaction: an
    import that fails half way leaves this file as it was. `other` is only read.
    `check_event`: a further check of each copied event (a ValidationError refuses the file),
    for shapes the protocols know and the store does not (a vote's tally)."""
    path = resolve_db_path(path)
    other = Path(other).expanduser()
    if not other.exists():
        raise UserError(f"{other} does not exist; give the transcript database to import runs from.")
    if not other.is_file():  # the command line refuses a folder before this; Python may not
        kind = "a folder" if other.is_dir() else "not a regular file (a pipe, a device or a socket)"
        raise UserError(f"{other} is {kind}; give the transcript database to import runs from.")
    if path.exists() and path.resolve() == other.resolve():
        raise UserError(f"{other} is the database runs are imported into; give another file to import from.")
    with TranscriptReader.open(other) as reader:
        source = reader.connection
        target = connect(path)
        try:
            _check_source(source, target, other)
            target.execute("BEGIN IMMEDIATE")
            try:
                report = _copy_runs(source, target, str(other), str(path), check_event)
                report.evals, report.evals_skipped = _copy_evals(source, target, str(other))
                target.execute("COMMIT")
            except BaseException:
                if target.in_transaction:
                    target.execute("ROLLBACK")
                raise
        except MissingTextError as error:
            raise UserError(
                f"The transcript database {other} is damaged ({error}); its runs were not imported."
            ) from error
        except BadRow as error:
            raise UserError(f"{other} cannot be imported: {error}; nothing was imported.") from error
        except sqlite3.DatabaseError as error:
            raise database_error(path, error, writing=True) from error
        finally:
            target.close()
    return report


def _check_source(source: sqlite3.Connection, target: sqlite3.Connection, other: Path) -> None:
    """The other file holds its runs as panel makes them: every table a run's or an eval's rows
    live in (and `texts`) exactly as this file has it, and SQLite finds the file whole. A file whose
    version lies about its tables, a `runs` that is a view (of duplicate rows, or of millions
    made up on the fly), a table without its key: each is one sentence naming that file, not
    an error blamed on this one half way through. Reads only the other file."""
    names = [table.name for table in (*RUN_TABLES, *EVAL_TABLES)] + ["texts"]
    schema = "SELECT type, sql FROM sqlite_master WHERE name = ?"
    try:
        for name in names:
            theirs, ours = source.execute(schema, (name,)).fetchone(), target.execute(schema, (name,)).fetchone()
            if theirs is None or tuple(theirs) != tuple(ours):
                raise UserError(f"{other} cannot be imported: {_unlike(source, target, name)}; nothing was imported.")
        problems = [row[0] for row in source.execute("PRAGMA quick_check(3)")]
    except sqlite3.DatabaseError as error:
        raise UserError(
            f"{other} cannot be imported: SQLite cannot read it ({error}); nothing was imported."
        ) from error
    if problems != ["ok"]:
        raise UserError(f"{other} cannot be imported: it is damaged ({problems[0]}); nothing was imported.")


def _unlike(source: sqlite3.Connection, target: sqlite3.Connection, name: str) -> str:
    """How the other file's table differs from this file's, in a few words."""
    found = source.execute("SELECT type FROM sqlite_master WHERE name = ?", (name,)).fetchone()
    if found is None:
        return f"it has no table {name}"
    if found[0] != "table":
        return f"its {name} is a {found[0]}, not a table"
    theirs = {row[1] for row in source.execute(f"PRAGMA table_info({name})")}
    missing = [row[1] for row in target.execute(f"PRAGMA table_info({name})") if row[1] not in theirs]
    if missing:
        return f"its table {name} lacks the column {missing[0]}"
    return f"its table {name} is not as panel makes it"


def _copy_runs(
    source: sqlite3.Connection,
    target: sqlite3.Connection,
    source_name: str,
    target_name: str,
    check_event: Callable[[dict[str, Any]], object] | None = None,
) -> ImportReport:
    imported: list[str] = []
    skipped: list[str] = []
    running: list[str] = []
    here = this_host()
    for row in source.execute("SELECT * FROM runs ORDER BY started_at, id").fetchall():
        if target.execute("SELECT 1 FROM runs WHERE id = ?", (row["id"],)).fetchone() is not None:
            skipped.append(row["id"])
        elif listed_status(row) == "running" and row["host"] == here:
            running.append(row["id"])
        else:
            imported.append(row["id"])
    wanted = json.dumps(imported)
    check_rows(source, target, wanted)
    texts = TextCopier(source, target)
    for table in RUN_TABLES:
        columns = _shared_columns(source, target, table.name)
        insert = f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})"
        rows = source.execute(
            f"SELECT {', '.join(columns)} FROM {table.name} WHERE {table.run_column} IN (SELECT value FROM json_each(?))",
            (wanted,),
        )
        for row in rows:
            values = dict(zip(columns, row, strict=True))
            for column in table.texts:
                if values.get(column) is not None:
                    values[column] = texts.id_for(values[column])
            for column in table.refs:
                if values.get(column) is not None:
                    values[column] = remap_refs(values[column], texts.id_for)
            target.execute(insert, [values[column] for column in columns])
    check_shapes(target, Path(target_name), imported, check_event)
    # Whatever the other file said of where its runs came from: they came from it.
    target.execute(
        "UPDATE runs SET imported_from = ? WHERE id IN (SELECT value FROM json_each(?))",
        (str(Path(source_name).resolve()), wanted),
    )
    return ImportReport(
        source=source_name, target=target_name, imported=imported, skipped=skipped, running=running, texts=texts.added
    )


def _copy_evals(
    source: sqlite3.Connection, target: sqlite3.Connection, source_name: str
) -> tuple[list[str], list[str]]:
    """Copy every eval of `source` that `target` lacks, whole, each row checked as a run's are
    (`BadRow` names the first that holds what no eval can); an eval still being written by a
    live process on this host is left for a later import. Its summary says where it came from
    (`imported_from`): `panel eval --resume` does not run a panel another file stored. Returns
    the evals copied and those `target` already had."""
    if source.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'evals'").fetchone() is None:
        return [], []
    copied: list[str] = []
    skipped: list[str] = []
    here = this_host()
    for row in source.execute("SELECT id, status, host, pid, started_at FROM evals ORDER BY started_at, id"):
        if target.execute("SELECT 1 FROM evals WHERE id = ?", (row["id"],)).fetchone() is not None:
            skipped.append(row["id"])
        elif not (row["status"] == "running" and row["host"] == here and _alive(row["pid"], row["started_at"])):
            copied.append(row["id"])
    wanted = json.dumps(copied)
    for table in EVAL_TABLES:
        columns = _shared_columns(source, target, table.name)
        insert = f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})"
        rows = source.execute(
            f"SELECT {', '.join(columns)} FROM {table.name} WHERE {table.run_column} IN (SELECT value FROM json_each(?))"
            f" ORDER BY {table.run_column}",
            (wanted,),
        )
        for found in rows:
            values = dict(zip(columns, found, strict=True))
            check_values(table, values, f"eval {_shown(values[table.run_column])}, {table.name}.")
            if table.name == "evals":
                summary = {**load_json(values["summary_json"]), "imported_from": str(Path(source_name).resolve())}
                values["summary_json"] = json.dumps(summary, ensure_ascii=False, separators=(",", ":"))
            target.execute(insert, [values[column] for column in columns])
    return copied, skipped


def _alive(pid: Any, started_at: Any) -> bool:
    """Whether the process an eval's row names still runs here (so the eval is still going)."""
    return _whole(pid) and process_alive(pid, read_time(started_at))


class BadRow(Exception):
    """A row of the other file holds what no run can (a time that is not one, JSON that does
    not parse, a text that is missing or made of itself): the file is refused whole."""


def check_rows(source: sqlite3.Connection, target: sqlite3.Connection, wanted: str) -> None:
    """Every row of the runs `wanted` (a JSON list of ids) holds what its column may, and
    every text it refers to can be read; BadRow names the first that does not. Checked
    before anything is copied, so that every reader of this file can trust what it holds."""
    for table in RUN_TABLES:
        columns = _shared_columns(source, target, table.name)
        rows = source.execute(
            f"SELECT {', '.join(columns)} FROM {table.name} WHERE {table.run_column} IN (SELECT value FROM json_each(?))"
            f" ORDER BY {table.run_column}",
            (wanted,),
        )
        for row in rows:
            values = dict(zip(columns, row, strict=True))
            run = f"run {_shown(values[table.run_column])}, {table.name}."
            check_values(table, values, run)
            ids = [values[column] for column in table.texts if values.get(column) is not None]
            ids += [text_id for column in table.refs for text_id in refs_in(values.get(column))]
            try:
                TextCache(source).load(ids)
            except (MissingTextError, ValueError, RecursionError) as error:
                raise BadRow(f"{run[:-1]}: {error}") from error


def check_shapes(
    target: sqlite3.Connection,
    path: Path,
    run_ids: list[str],
    check_event: Callable[[dict[str, Any]], object] | None = None,
) -> None:
    """Every event of the runs just copied (not yet committed) is read back as the readers
    read it and is the event its type says: JSON that parses can still hold a list where a
    tally's counts go, or a round numbered by text, and every reader (show, replay, export,
    retally) would meet it. BadRow names the first. An event of a type this panel does not
    know is left alone, as the readers pass over it."""
    from pydantic import ValidationError

    from panel_cli.events import EVENT_TYPES, parse_event

    reader = TranscriptReader(target, path)
    for run_id in run_ids:
        for payload in reader.run_events(run_id):
            kind = payload.get("type")
            if kind not in EVENT_TYPES:
                continue
            huge = _huge_number(payload)
            if huge is not None:
                raise BadRow(
                    f"run {_shown(run_id)}, events: its {kind} event (seq {payload.get('seq')}) holds {huge!r},"
                    f" past any figure a run records (at most {LARGEST_FIGURE:.0e} either way)"
                )
            try:
                parse_event(payload)
                if check_event is not None:
                    check_event(payload)
            except ValidationError as error:
                first = error.errors()[0]
                field = ".".join(str(part) for part in first["loc"]) or "it"
                raise BadRow(
                    f"run {_shown(run_id)}, events: its {kind} event (seq {payload.get('seq')}) is not one"
                    f" ({field}: {first['msg']})"
                ) from None


def _huge_number(value: Any) -> float | None:
    """The first fractional number (a float) in a payload past `LARGEST_FIGURE` either way (the
    depth is bounded). Whole numbers are left to their fields: a seed may be any 64-bit one."""
    if isinstance(value, float):
        return value if not -LARGEST_FIGURE <= value <= LARGEST_FIGURE else None
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return next((found for item in items if (found := _huge_number(item)) is not None), None)


def check_values(table: RunTable, values: Mapping[str, Any], where: str) -> None:
    """Each value of a row holds what its column may (`where` begins the sentence naming it)."""
    for column, value in values.items():
        check = table.columns.get(column)
        if value is None and column in table.required:
            raise BadRow(f"{where}{column} is empty")
        if value is not None and check is not None and not check[0](value):
            raise BadRow(f"{where}{column} holds {_shown(value)}, not {check[1]}")


def _shown(value: Any) -> str:
    """A bad value, short enough for a sentence."""
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:39] + "…"


def _shared_columns(source: sqlite3.Connection, target: sqlite3.Connection, table: str) -> list[str]:
    """The table's columns in this file that the other file has too (the same, once the other
    has been brought forward to this schema)."""
    theirs = {row[1] for row in source.execute(f"PRAGMA table_info({table})")}
    return [row[1] for row in target.execute(f"PRAGMA table_info({table})") if row[1] in theirs]
