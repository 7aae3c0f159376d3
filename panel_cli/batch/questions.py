"""The questions of a batch, read from a file a person wrote: JSONL (`{"id": …, "question": …,
"options": […]}` a line), CSV with a `question` column (and an optional `id` column), or plain
text, one question a line. The file's name says which (`.jsonl`/`.ndjson`, `.csv`, anything
else is text).

The file is user input: every problem is one sentence naming the file and line, found before
any model is called. Each question gets a `key` that stays the same across runs of the same
file, so a resumed batch knows which questions it already answered: its id, or, without one,
a hash of its text (a line number would shift when a line is added above it).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from panel_cli.errors import ConfigError, UserError
from panel_cli.local_files import QUESTION_COUNT_LIMIT, FileRefused, read_given_file
from panel_cli.untrusted import RefusedJSON, load_json

# A file larger than this, or with more questions (`QUESTION_COUNT_LIMIT`), is a mistake (a log,
# a data dump), not a batch.
FILE_LIMIT = 64 << 20
QUESTION_LIMIT = 100_000  # characters
ID_LIMIT = 200  # characters
SHARD = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")
SHARD_LIMIT = 10_000
JSON_EXAMPLE = '{"id": "q1", "question": "…"}'

Format = Literal["jsonl", "csv", "text"]


class BatchQuestion(BaseModel):
    """One question of a batch. `id` is the file's (None when it gives none); `line` is where
    it starts in the file; `options`, a JSONL line's, replace the panel's for vote and decide.
    `key` names the question in the runs stored for it: its id, else `#` and a hash of its
    text (`~2`, `~3` … for the same text again)."""

    key: str
    id: str | int | None
    question: str
    options: list[str] | None = None
    line: int

    @property
    def label(self) -> str | int:
        """What the question is called in the results: its id, else its line number."""
        return self.id if self.id is not None else self.line


def file_format(path: Path) -> Format:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".csv":
        return "csv"
    if suffix == ".json":
        raise UserError(
            f"{path}: a batch reads JSONL (one JSON object a line, named .jsonl), CSV or text, not a .json file."
        )
    return "text"


def read_questions(path: Path) -> list[BatchQuestion]:
    """Every question of the file, in order; UserError (one sentence, located) for a file that
    cannot be a batch."""
    text = _read_text(path)
    name = str(path)
    parse = {"jsonl": _jsonl, "csv": _csv, "text": _text}[file_format(path)]
    questions: list[BatchQuestion] = []
    ids: dict[str, int] = {}
    texts: dict[str, int] = {}
    for line, given_id, question, options in parse(text, name):
        if len(questions) == QUESTION_COUNT_LIMIT:
            raise UserError(
                f"{name} holds more than {QUESTION_COUNT_LIMIT:,} questions; split it into several batches."
            )
        if len(question) > QUESTION_LIMIT:
            raise ConfigError(name, line, "question", f"longer than {QUESTION_LIMIT:,} characters")
        if given_id is not None:
            key = str(given_id)
            if key in ids:
                raise ConfigError(name, line, "id", f"'{key}' is also the id on line {ids[key]}; ids must be unique")
            ids[key] = line
        else:
            digest = "#" + hashlib.sha256(question.encode("utf-8", "surrogatepass")).hexdigest()[:16]
            texts[digest] = texts.get(digest, 0) + 1
            key = digest if texts[digest] == 1 else f"{digest}~{texts[digest]}"
        questions.append(BatchQuestion(key=key, id=given_id, question=question, options=options, line=line))
    if not questions:
        raise UserError(f"{name} holds no questions.")
    return questions


def _read_text(path: Path) -> str:
    try:
        data = read_given_file(path, FILE_LIMIT)
    except FileRefused as refused:
        raise UserError(
            f"{path} {refused}; give a questions file (JSONL, CSV, or text with one question a line)."
        ) from None
    if len(data) > FILE_LIMIT:
        raise UserError(f"{path} is larger than {FILE_LIMIT >> 20} MiB; split it into several batches.")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ConfigError(str(path), data[: error.start].count(b"\n") + 1, None, "not UTF-8 text") from None


Parsed = Iterator[tuple[int, str | int | None, str, list[str] | None]]


def _text(text: str, name: str) -> Parsed:
    for line, raw in enumerate(text.splitlines(), start=1):
        if raw.strip():
            yield line, None, raw.strip(), None


def _jsonl(text: str, name: str) -> Parsed:
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            entry = load_json(raw)
        except RefusedJSON as error:
            raise ConfigError(name, line, None, f"its JSON {error.msg} (column {error.colno})") from None
        except json.JSONDecodeError as error:
            raise ConfigError(name, line, None, f"not valid JSON ({error.msg}, column {error.colno})") from None
        if not isinstance(entry, dict):
            raise ConfigError(name, line, None, f"each line must be a JSON object, like {JSON_EXAMPLE}")
        yield (
            line,
            _id(entry.get("id"), name, line),
            _question(entry.get("question"), name, line),
            _options(entry, name, line),
        )


def _csv(text: str, name: str) -> Parsed:
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader, None)
        if header is None:
            return
        columns = [column.strip().casefold() for column in header]
        if "question" not in columns:
            raise ConfigError(name, 1, None, "a CSV file needs a 'question' column (and may have an 'id' column)")
        question_at = columns.index("question")
        id_at = columns.index("id") if "id" in columns else None
        while True:
            line = reader.line_num + 1
            row = next(reader, None)
            if row is None:
                return
            if not any(cell.strip() for cell in row):
                continue
            given_id = row[id_at].strip() if id_at is not None and id_at < len(row) and row[id_at].strip() else None
            cell = row[question_at] if question_at < len(row) else None
            yield line, _id(given_id, name, line), _question(cell, name, line), None
    except csv.Error as error:
        raise ConfigError(name, reader.line_num, None, f"not valid CSV ({error})") from None


def _question(value: Any, name: str, line: int) -> str:
    if value is None:
        raise ConfigError(name, line, "question", "missing")
    if not isinstance(value, str):
        raise ConfigError(name, line, "question", "must be text")
    if not value.strip():
        raise ConfigError(name, line, "question", "empty")
    return value.strip()


def _id(value: Any, name: str, line: int) -> str | int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ConfigError(name, line, "id", "must be text or a whole number")
    if isinstance(value, str):
        if not value.strip():
            raise ConfigError(name, line, "id", "empty")
        if len(value) > ID_LIMIT:
            raise ConfigError(name, line, "id", f"longer than {ID_LIMIT} characters")
    return value


def _options(entry: dict[str, Any], name: str, line: int) -> list[str] | None:
    from panel_cli.protocols.vote.ballots import option_problems

    value = entry.get("options")
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(option, str) for option in value):
        raise ConfigError(name, line, "options", 'must be a list of texts, like ["Yes", "No"]')
    if len(value) < 2:
        raise ConfigError(name, line, "options", "needs at least two options to choose between")
    problems = option_problems(value)
    if problems:
        raise ConfigError(name, line, "options", problems[0][1])
    return [option.strip() for option in value]


def parse_shard(value: str) -> tuple[int, int]:
    """`2/5` -> (2, 5): the second of five slices."""
    match = SHARD.fullmatch(value)
    if match is None:
        raise UserError(f"--shard: '{value}' is not a slice; give it as I/N, like 2/5 (the second of five).")
    index, count = int(match.group(1)), int(match.group(2))
    if not 1 <= count <= SHARD_LIMIT:
        raise UserError(f"--shard: the number of slices must be between 1 and {SHARD_LIMIT:,}.")
    if not 1 <= index <= count:
        raise UserError(f"--shard: the slice must be between 1 and {count}, like 1/{count}.")
    return index, count


def shard(questions: list[BatchQuestion], index: int, count: int) -> list[BatchQuestion]:
    """The `index`-th of `count` slices (1-based), dealt round-robin by position in the file:
    every question is in exactly one slice, and the slices differ in size by one at most."""
    return questions[index - 1 :: count]
