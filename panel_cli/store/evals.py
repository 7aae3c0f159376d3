"""Evals in the transcript file: `EvalWriter` keeps one as it runs, `EvalReader` reads them back.

An eval's runs are ordinary runs (tagged with its id); what is the eval's own is here, in the
tables of migration 8 (docs/store.md): the eval's row with its plan and settings as JSON, the
questions it graded with their gold answers, each graded item, and each call a judge made.
An item is committed as soon as it is graded, so an eval stopped at any point keeps every
grade it reached and `panel eval --resume` runs only the rest.

The store knows nothing of eval's models: it is handed plain values (`model_dump`) and gives
plain values back, which `panel_cli.eval` validates into its own models.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from pydantic import BaseModel

from panel_cli.errors import UserError
from panel_cli.store.connection import connect, damaged_error, database_error, open_for_reading
from panel_cli.store.processes import process_alive, this_host
from panel_cli.store.reader import LAST, UNPRICED_CALL, prefix_successor
from panel_cli.store.times import epoch, iso_time

# The item's fields kept as they are, by column; its run id is `graded_run` (not `run_id`: the
# rows are the eval's, and `history import` copies the tables keyed by a run).
ITEM_COLUMNS = (
    "final_answer",
    "calls",
    "tokens",
    "cost",
    "error",
    "judge_tokens",
    "judge_cost",
    "confidence",
    "confidence_basis",
    "confidence_from",
)


class EvalRow(BaseModel):
    """An eval as `panel eval list` shows it. `status` is `stale` for one still marked running
    whose process on this host is gone (killed before it could say so)."""

    id: str
    status: str
    started_at: float
    finished_at: float | None
    panel: str
    dataset: str
    dataset_sha256: str
    questions: int
    seed: int
    items: int
    correct: int


class StoredEval(BaseModel):
    """An eval read back whole: its row, its summary (the eval's own JSON), its questions in
    order, and its items, each with its judge's call when a judge graded it."""

    row: EvalRow
    summary: dict[str, Any]
    questions: list[dict[str, Any]]
    items: list[dict[str, Any]]


class EvalWriter:
    """Keeps one eval in a transcript file, each write its own transaction (an eval writes a
    row per graded question, a few a second at most). Opened with `EvalWriter.open`."""

    def __init__(self, db: sqlite3.Connection, eval_id: str) -> None:
        self._db = db
        self.eval_id = eval_id

    @classmethod
    def open(cls, path: Path, eval_id: str) -> EvalWriter:
        return cls(connect(path), eval_id)

    def __enter__(self) -> EvalWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    def begin(self, summary: Mapping[str, Any], questions: Sequence[Mapping[str, Any]]) -> None:
        """The eval's row and its questions; a resumed eval's row is marked running again and
        its questions are left as they were."""
        with self._transaction():
            found = self._db.execute("SELECT 1 FROM evals WHERE id = ?", (self.eval_id,)).fetchone()
            if found is not None:
                self._db.execute(
                    "UPDATE evals SET status = 'running', finished_at = NULL, pid = ?, host = ?, summary_json = ?"
                    " WHERE id = ?",
                    (os.getpid(), this_host(), _json(summary), self.eval_id),
                )
                return
            self._db.execute(
                "INSERT INTO evals (id, status, started_at, panel, dataset, dataset_sha256, questions, seed, pid, host,"
                " summary_json) VALUES (?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    self.eval_id,
                    iso_time(time.time()),
                    summary.get("panel"),
                    summary.get("dataset"),
                    summary.get("dataset_sha256"),
                    len(questions),
                    summary.get("seed"),
                    os.getpid(),
                    this_host(),
                    _json(summary),
                ),
            )
            self._db.executemany(
                "INSERT INTO eval_questions (eval_id, position, question_id, question, answer, options_json, about)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        self.eval_id,
                        position,
                        question["id"],
                        question["question"],
                        question["answer"],
                        None if question.get("options") is None else _json(question["options"]),
                        question.get("about"),
                    )
                    for position, question in enumerate(questions)
                ],
            )

    def update(self, summary: Mapping[str, Any]) -> None:
        with self._transaction():
            self._db.execute("UPDATE evals SET summary_json = ? WHERE id = ?", (_json(summary), self.eval_id))

    def item(self, item: Mapping[str, Any]) -> None:
        """One graded item (replacing the one a resumed eval ran again), with its judge's call."""
        grade = item["grade"]
        now = iso_time(time.time())
        with self._transaction():
            self._db.execute(
                "INSERT OR REPLACE INTO eval_items (eval_id, system, question_id, graded_run, correct, grade_json, duration, ts, "
                + ", ".join(ITEM_COLUMNS)
                + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, "
                + ", ".join("?" for _ in ITEM_COLUMNS)
                + ")",
                (
                    self.eval_id,
                    item["system"],
                    item["question_id"],
                    item["run_id"],
                    int(bool(grade["correct"])),
                    _json(grade),
                    item["duration_s"],
                    now,
                    *(item.get(column) for column in ITEM_COLUMNS),
                ),
            )
            self._db.execute(
                "DELETE FROM eval_judge_calls WHERE eval_id = ? AND system = ? AND question_id = ?",
                (self.eval_id, item["system"], item["question_id"]),
            )
            call = item.get("judge_call")
            if call is not None:
                self._db.execute(
                    "INSERT INTO eval_judge_calls (eval_id, system, question_id, member, model, prompt, reply,"
                    " tokens_in, tokens_out, cost, latency, error, ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        self.eval_id,
                        item["system"],
                        item["question_id"],
                        call["member"],
                        call["model"],
                        call["prompt"],
                        call["reply"],
                        call.get("tokens_in"),
                        call.get("tokens_out"),
                        call.get("cost"),
                        call.get("latency"),
                        call.get("error"),
                        now,
                    ),
                )

    def end(self, status: str) -> None:
        with self._transaction():
            self._db.execute(
                "UPDATE evals SET status = ?, finished_at = ? WHERE id = ?",
                (status, iso_time(time.time()), self.eval_id),
            )

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)


class _Transaction:
    """`BEGIN IMMEDIATE` … `COMMIT`, rolled back on any error (the connection is in autocommit)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._db.execute("ROLLBACK" if kind is not None else "COMMIT")


_ROW = (
    "SELECT e.id, e.status, e.started_at, e.finished_at, e.panel, e.dataset, e.dataset_sha256, e.questions, e.seed,"
    " e.pid, e.host, (SELECT count(*) FROM eval_items i WHERE i.eval_id = e.id) AS items,"
    " (SELECT coalesce(sum(i.correct), 0) FROM eval_items i WHERE i.eval_id = e.id) AS correct FROM evals e"
)


class EvalReader:
    """Reads evals without writing anything (the file is opened read-only, never migrated)."""

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self._db = db
        self._path = path

    @classmethod
    def open(cls, path: Path) -> EvalReader:
        db, _ = open_for_reading(path)
        return cls(db, path)

    def __enter__(self) -> EvalReader:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._db.close()

    def list_evals(self, limit: int = 20) -> list[EvalRow]:
        """The latest evals first."""
        try:
            rows = self._db.execute(f"{_ROW} ORDER BY e.started_at DESC, e.id LIMIT ?", (limit,)).fetchall()
        except sqlite3.DatabaseError as error:
            raise database_error(self._path, error, writing=False) from error
        return [_row(row) for row in rows]

    def get(self, prefix: str) -> StoredEval:
        """The eval whose id is or begins with `prefix`, or `last`, the eval started last (a
        start still to come, as an imported file could claim, is no eval's); a UserError
        naming the candidates when several begin with `prefix`, and when none does."""
        try:
            row = self._find(prefix)
            questions = self._db.execute(
                "SELECT question_id, question, answer, options_json, about FROM eval_questions WHERE eval_id = ?"
                " ORDER BY position",
                (row["id"],),
            ).fetchall()
            items = self._db.execute(
                "SELECT i.*, j.member AS j_member, j.model AS j_model, j.prompt AS j_prompt, j.reply AS j_reply,"
                " j.tokens_in AS j_tokens_in, j.tokens_out AS j_tokens_out, j.cost AS j_cost,"
                " j.latency AS j_latency, j.error AS j_error,"
                " (SELECT group_concat(DISTINCT CAST(c.model AS TEXT)) FROM calls c"
                f" WHERE c.run_id = i.graded_run AND {UNPRICED_CALL}) AS unpriced"
                " FROM eval_items i LEFT JOIN eval_judge_calls j"
                " ON j.eval_id = i.eval_id AND j.system = i.system AND j.question_id = i.question_id"
                " WHERE i.eval_id = ? ORDER BY i.ts, i.system, i.question_id",
                (row["id"],),
            ).fetchall()
            summary = json.loads(
                self._db.execute("SELECT summary_json FROM evals WHERE id = ?", (row["id"],)).fetchone()[0]
            )
        except sqlite3.DatabaseError as error:
            raise database_error(self._path, error, writing=False) from error
        except (json.JSONDecodeError, TypeError) as error:
            raise damaged_error(self._path, error) from error
        return StoredEval(
            row=_row(row),
            summary=summary,
            questions=[
                {
                    "id": question["question_id"],
                    "question": question["question"],
                    "answer": question["answer"],
                    "options": None if question["options_json"] is None else json.loads(question["options_json"]),
                    "about": question["about"],
                }
                for question in questions
            ],
            items=[_item(item) for item in items],
        )

    def _find(self, prefix: str) -> sqlite3.Row:
        rows = self._db.execute(f"{_ROW} WHERE e.id = ?", (prefix,)).fetchall()
        if not rows and prefix.strip().lower() == LAST:
            rows = self._db.execute(
                f"{_ROW} WHERE e.started_at <= ? ORDER BY e.started_at DESC, e.id LIMIT 1", (iso_time(time.time()),)
            ).fetchall()
            if not rows:
                raise UserError(f"There is no eval in {self._path} yet, so no last one.")
        if not rows and prefix:
            upper = prefix_successor(prefix)
            rows = self._db.execute(
                f"{_ROW} WHERE e.id >= ?{' AND e.id < ?' if upper else ''} ORDER BY e.id LIMIT 6",
                (prefix, upper) if upper else (prefix,),
            ).fetchall()
        if not rows:
            raise UserError(f"No eval '{prefix}' in {self._path} (panel eval list shows them).")
        if len(rows) > 1:
            matches = ", ".join(str(row["id"]) for row in rows[:5]) + (", …" if len(rows) > 5 else "")
            raise UserError(f"'{prefix}' begins more than one eval's id ({matches}); give more of it.")
        return rows[0]


def _row(row: sqlite3.Row) -> EvalRow:
    status = row["status"]
    started = epoch(row["started_at"])
    if status == "running" and row["host"] == this_host() and not process_alive(row["pid"] or 0, started):
        status = "stale"
    return EvalRow(
        id=row["id"],
        status=status,
        started_at=started,
        finished_at=None if row["finished_at"] is None else epoch(row["finished_at"]),
        panel=row["panel"] or "",
        dataset=row["dataset"] or "",
        dataset_sha256=row["dataset_sha256"] or "",
        questions=row["questions"] or 0,
        seed=row["seed"] or 0,
        items=row["items"],
        correct=row["correct"],
    )


def _item(row: sqlite3.Row) -> dict[str, Any]:
    item: dict[str, Any] = {column: row[column] for column in ITEM_COLUMNS}
    item.update(
        run_id=row["graded_run"],
        system=row["system"],
        question_id=row["question_id"],
        grade=json.loads(row["grade_json"]),
        duration_s=row["duration"],
        unpriced_models=sorted(str(row["unpriced"]).split(",")) if row["unpriced"] is not None else [],
    )
    if row["j_member"] is not None:
        item["judge_call"] = {
            "member": row["j_member"],
            "model": row["j_model"],
            "prompt": row["j_prompt"],
            "reply": row["j_reply"],
            "tokens_in": row["j_tokens_in"],
            "tokens_out": row["j_tokens_out"],
            "cost": row["j_cost"],
            "latency": row["j_latency"] or 0.0,
            "error": row["j_error"],
        }
    return item


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
