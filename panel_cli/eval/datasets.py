"""Eval datasets: JSONL files of questions with gold answers, and the ones panel ships.

A row is `{"question": …, "answer": …, "options": [...]?, "id": …?}`. With `options` the
question is multiple choice and `answer` must be one of them; without, it is a short answer
graded by normalised exact match. Every problem is located (`FILE, line N: problem.`) and
all of them are listed at once, so a dataset with three typos takes one fix.

Built-in datasets live in `panel_cli/datasets/*.jsonl` (package data, so an installed
`panel` has them) and are named `builtin:<name>`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterator
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from panel_cli.errors import ConfigError, ConfigProblem, UserError
from panel_cli.local_files import QUESTION_COUNT_LIMIT, FileRefused, read_given_file
from panel_cli.protocols.vote.ballots import exact_option, option_problems
from panel_cli.untrusted import RefusedJSON, load_json

BUILTIN_PREFIX = "builtin:"
# A dataset is read whole; this is far above any hand-made one and stops a wrong path
# (a log, a binary) from filling memory.
MAX_DATASET_BYTES = 64 * 1024 * 1024
MAX_PROBLEMS = 20
# Where `str.splitlines` breaks a line.
_LINE_BREAK = re.compile("\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")


class EvalItem(BaseModel):
    """One question of a dataset. `options` is None for a short-answer question."""

    id: str
    question: str
    answer: str
    options: list[str] | None = None
    about: str | None = None

    @property
    def multiple_choice(self) -> bool:
        return self.options is not None


class Dataset(BaseModel):
    """A dataset as loaded: where it came from (`builtin:general` or a path), the SHA-256 of
    its text (so a report names exactly which file it was graded on), and its rows."""

    source: str
    items: list[EvalItem]
    sha256: str = ""

    @property
    def multiple_choice(self) -> bool:
        return all(item.multiple_choice for item in self.items)


class BuiltinDataset(BaseModel):
    name: str
    size: int
    description: str


def _builtin_dir() -> Traversable:
    return files("panel_cli") / "datasets"


def builtin_names() -> list[str]:
    return sorted(
        entry.name.removesuffix(".jsonl") for entry in _builtin_dir().iterdir() if entry.name.endswith(".jsonl")
    )


def list_builtin() -> list[BuiltinDataset]:
    """Each built-in dataset with its size and what it holds (how many rows of each `about`)."""
    listed = []
    for name in builtin_names():
        dataset = load_dataset(f"{BUILTIN_PREFIX}{name}")
        kind = "multiple choice" if dataset.multiple_choice else "short answer"
        topics = Counter(item.about for item in dataset.items if item.about)
        held = ", ".join(f"{count} {topic}" for topic, count in topics.items())
        listed.append(
            BuiltinDataset(
                name=f"{BUILTIN_PREFIX}{name}", size=len(dataset.items), description=f"{kind}: {held}" if held else kind
            )
        )
    return listed


def load_dataset(spec: str, limit: int | None = None) -> Dataset:
    """`builtin:<name>` or a path to a JSONL file: its first `limit` questions, when given
    (the rest is not read as questions), else every one, at most as many as a batch takes."""
    if spec.startswith(BUILTIN_PREFIX):
        name = spec[len(BUILTIN_PREFIX) :]
        if name not in builtin_names():
            raise UserError(
                f"--dataset: there is no built-in dataset '{name}'; the built-ins are {', '.join(builtin_names())} (panel eval --list-datasets)."
            )
        text = (_builtin_dir() / f"{name}.jsonl").read_text(encoding="utf-8")
    else:
        text = _read(Path(spec))
    return Dataset(source=spec, items=parse_dataset(text, spec, limit), sha256=text_sha256(text))


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read(path: Path) -> str:
    """A dataset file's text, or a pipe's (`--dataset <(head -50 big.jsonl)`), read no further
    than the size limit (`read_given_file`)."""
    shown = str(path)
    try:
        data = read_given_file(path, MAX_DATASET_BYTES)
    except FileRefused as refused:
        raise UserError(f"--dataset: {shown} {refused}; give a JSONL file.") from None
    if len(data) > MAX_DATASET_BYTES:
        raise UserError(f"--dataset: {shown} is larger than {MAX_DATASET_BYTES // (1024 * 1024)} MiB.")
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(shown, line, None, "is not UTF-8 text; save the dataset as UTF-8") from None


def _text(value: Any) -> str | None:
    """A gold answer or question as text: strings, and numbers written as numbers (42, 2.5)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return format(value, "g") if isinstance(value, float) else str(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def _row(data: Any, line: int) -> tuple[EvalItem | None, list[tuple[str | None, str]]]:
    """A row read defensively, or the problems that stop it (field, problem)."""
    if not isinstance(data, dict):
        return None, [(None, "a row is a JSON object with 'question' and 'answer'")]
    problems: list[tuple[str | None, str]] = []
    question = _text(data.get("question"))
    answer = _text(data.get("answer"))
    if question is None:
        problems.append(("question", "missing or empty; every row needs its question as text"))
    if answer is None:
        problems.append(("answer", "missing or empty; every row needs its gold answer"))
    options: list[str] | None = None
    raw = data.get("options")
    if raw is not None:
        if not isinstance(raw, list) or not all(
            isinstance(option, str | int | float) and not isinstance(option, bool) for option in raw
        ):
            problems.append(("options", "a list of options as text"))
        else:
            options = [_text(option) or "" for option in raw]
            found = option_problems(options)
            if found:
                problems.append(("options", found[0][1]))
            elif len(options) < 2:
                problems.append(("options", "a multiple-choice question needs at least two options"))
            elif answer is not None:
                gold = exact_option(answer, options)
                if gold is None:
                    problems.append(("answer", f"'{answer}' is not one of the options"))
                answer = gold
    unknown = sorted(set(data) - {"id", "question", "answer", "options", "about"})
    if unknown:
        problems.append((unknown[0], "not a dataset field (question, answer, options, id, about)"))
    if problems:
        return None, problems
    identifier = _text(data.get("id")) or str(line)
    assert question is not None and answer is not None
    return EvalItem(
        id=identifier, question=question, answer=answer, options=options, about=_text(data.get("about"))
    ), []


def parse_dataset(text: str, source: str, limit: int | None = None) -> list[EvalItem]:
    """The rows of a JSONL dataset (blank lines skipped), the first `limit` of them when given,
    or one ConfigError listing every problem among the lines read. Without a limit, a dataset
    of more questions than a batch takes (`QUESTION_COUNT_LIMIT`) is refused as a batch is: a
    million rows read whole is a minute and gigabytes before the first call."""
    items: list[EvalItem] = []
    problems: list[ConfigProblem] = []
    seen: dict[str, int] = {}
    for line, raw in enumerate(_lines(text), start=1):
        if (limit is not None and len(items) >= limit) or len(problems) >= MAX_PROBLEMS:
            break
        if not raw.strip():
            continue
        if len(items) == QUESTION_COUNT_LIMIT:
            raise UserError(
                f"--dataset: {source} holds more than {QUESTION_COUNT_LIMIT:,} questions; give --limit, or split it."
            )
        try:
            data = load_json(raw)
        except RefusedJSON as exc:
            problems.append(ConfigProblem(source, line, None, f"its JSON {exc.msg} (column {exc.colno})"))
            continue
        except json.JSONDecodeError as exc:
            problems.append(
                ConfigProblem(source, line, None, f"not JSON ({exc.msg}); a dataset has one JSON object a line")
            )
            continue
        item, found = _row(data, line)
        problems += [ConfigProblem(source, line, field, problem) for field, problem in found]
        if item is not None:
            if item.id in seen:
                problems.append(
                    ConfigProblem(source, line, "id", f"'{item.id}' is also the id on line {seen[item.id]}")
                )
            seen.setdefault(item.id, line)
            items.append(item)
    if problems:
        raise ConfigError.listing(problems[:MAX_PROBLEMS])
    if not items:
        raise UserError(f"--dataset: {source} holds no questions.")
    return items


def _lines(text: str) -> Iterator[str]:
    """`text.splitlines()`, one line at a time: a dataset read for its first few questions is
    not split whole."""
    start = 0
    for found in _LINE_BREAK.finditer(text):
        yield text[start : found.start()]
        start = found.end()
    if start < len(text):
        yield text[start:]
