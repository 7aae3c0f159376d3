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
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from panel_cli.errors import UserError
from panel_cli.store.connection import connect, database_error
from panel_cli.store.paths import resolve_db_path
from panel_cli.store.processes import this_host
from panel_cli.store.reader import TranscriptReader
from panel_cli.store.records import listed_status
from panel_cli.store.texts import MissingTextError, TextCache, dumps, remap_refs


@dataclass(frozen=True)
class RunTable:
    """A table whose rows belong to runs: `run_column` names the run (`id` for `runs` itself),
    `texts` are columns holding a text's id, `refs` JSON columns whose `{"$text": id}`
    references point at texts. Texts found any other way would be left pointing nowhere."""

    name: str
    run_column: str = "run_id"
    texts: tuple[str, ...] = ()
    refs: tuple[str, ...] = ()


# Every table that holds rows of runs, `runs` first; a new one must be listed here (a test
# checks that every table with a `run_id` column is).
RUN_TABLES = (
    RunTable(
        "runs", run_column="id", texts=("question_text", "config_text", "final_answer_text"), refs=("result_json",)
    ),
    RunTable("events", refs=("payload_json",)),
    RunTable("calls", texts=("response_text",), refs=("request_json",)),
    RunTable("decisions"),
    RunTable("retallies"),
    RunTable("tool_calls"),
)


class ImportReport(BaseModel):
    """What an import did: `imported` runs, `skipped` ones this file already had, `running`
    ones still being written by a process on this host (left for a later import, or they
    would stay `running` here for good), and how many `texts` were new to this file."""

    source: str
    target: str
    imported: list[str]
    skipped: list[str]
    running: list[str]
    texts: int


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


def import_runs(path: Path | str | None, other: Path | str) -> ImportReport:
    """Copy every run of `other` that the file at `path` lacks, in one transaction: an
    import that fails half way leaves this file as it was. `other` is only read."""
    path = resolve_db_path(path)
    other = Path(other).expanduser()
    if not other.exists():
        raise UserError(f"{other} does not exist; give the transcript database to import runs from.")
    if path.exists() and path.resolve() == other.resolve():
        raise UserError(f"{other} is the database runs are imported into; give another file to import from.")
    with TranscriptReader.open(other) as reader:
        source = reader.connection
        target = connect(path)
        try:
            target.execute("BEGIN IMMEDIATE")
            try:
                report = _copy_runs(source, target, str(other), str(path))
                target.execute("COMMIT")
            except BaseException:
                if target.in_transaction:
                    target.execute("ROLLBACK")
                raise
        except MissingTextError as error:
            raise UserError(
                f"The transcript database {other} is damaged ({error}); its runs were not imported."
            ) from error
        except sqlite3.DatabaseError as error:
            raise database_error(path, error, writing=True) from error
        finally:
            target.close()
    return report


def _copy_runs(
    source: sqlite3.Connection, target: sqlite3.Connection, source_name: str, target_name: str
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
    texts = TextCopier(source, target)
    wanted = json.dumps(imported)
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
    return ImportReport(
        source=source_name, target=target_name, imported=imported, skipped=skipped, running=running, texts=texts.added
    )


def _shared_columns(source: sqlite3.Connection, target: sqlite3.Connection, table: str) -> list[str]:
    """The table's columns in this file that the other file has too (the same, once the other
    has been brought forward to this schema)."""
    theirs = {row[1] for row in source.execute(f"PRAGMA table_info({table})")}
    return [row[1] for row in target.execute(f"PRAGMA table_info({table})") if row[1] in theirs]
