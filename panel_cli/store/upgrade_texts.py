"""The text store of schema version 4, frozen for `panel_cli.store.upgrade`: a copy of
`panel_cli.store.texts` as it stood when migration 4 shipped, so that a version 3 file is
brought forward to the same rows however the live text store changes. Never edited.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

TEXT_MIN = 64  # shorter strings stay inline in their JSON
QUOTE_MIN = 64  # a text of the run at least this long is found again inside a prompt
COMPOSE_MIN = 1024  # a prompt at least this long is stored as parts when that saves space
LINE_MIN = 160  # a line at least this long inside a composed prompt is a text of its own
RECENT_PROMPTS = 8  # how many earlier prompts of a run a new one is compared with
REF = "$text"
ESCAPE = "$esc"

Part = str | list[int]


def text_hash(text: str) -> bytes:
    """The first 128 bits of SHA-256."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:16]


def dumps(value: Any) -> str:
    """The one serialisation of every JSON column: compact, and UTF-8 as it is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def encode(value: Any, put: Callable[[str], int]) -> Any:
    """`value` with every string of `TEXT_MIN` characters or more replaced by a reference to
    the text `put` stores. A dict that would read as a reference (or an escape) is escaped,
    so no data can pass for one."""
    if isinstance(value, str):
        return {REF: put(value)} if len(value) >= TEXT_MIN else value
    if isinstance(value, dict):
        encoded = {key: encode(item, put) for key, item in value.items()}
        return {ESCAPE: encoded} if len(value) == 1 and next(iter(value)) in (REF, ESCAPE) else encoded
    if isinstance(value, list | tuple):
        return [encode(item, put) for item in value]
    return value


def decode(value: Any, texts: TextCache) -> Any:
    if isinstance(value, dict):
        if len(value) == 1:
            key, item = next(iter(value.items()))
            if key == REF:
                return texts.get(item)
            if key == ESCAPE:
                return {inner: decode(part, texts) for inner, part in item.items()}
        return {key: decode(item, texts) for key, item in value.items()}
    if isinstance(value, list):
        return [decode(item, texts) for item in value]
    return value


class TextCache:
    """Texts by id, loaded in batches and put together from their parts."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._bodies: dict[int, str] = {}

    def load(self, ids: Iterable[int]) -> None:
        wanted = {int(text_id) for text_id in ids} - self._bodies.keys()
        composed: dict[int, list[Any]] = {}
        while wanted:
            rows = self._db.execute(
                "SELECT id, body, parts FROM texts WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(sorted(wanted)),),
            ).fetchall()
            if len(rows) < len(wanted):
                missing = wanted - {row[0] for row in rows}
                raise sqlite3.DatabaseError(f"text {min(missing)} is missing")
            wanted = set()
            for text_id, body, parts in rows:
                if body is not None:
                    self._bodies[text_id] = body
                else:
                    composed[text_id] = json.loads(parts)
                    wanted |= {part[0] for part in composed[text_id] if isinstance(part, list)}
            wanted -= self._bodies.keys() | composed.keys()
        for text_id in composed:
            self._assemble(text_id, composed)

    def _assemble(self, text_id: int, composed: dict[int, list[Any]]) -> str:
        if text_id not in self._bodies:
            pieces = []
            for part in composed[text_id]:
                if isinstance(part, str):
                    pieces.append(part)
                    continue
                whole = self._assemble(part[0], composed)
                pieces.append(whole if len(part) == 1 else whole[part[1] : part[1] + part[2]])
            self._bodies[text_id] = "".join(pieces)
        return self._bodies[text_id]

    def get(self, text_id: int) -> str:
        if text_id not in self._bodies:
            self.load([text_id])
        return self._bodies[text_id]

    def optional(self, text_id: int | None) -> str | None:
        return None if text_id is None else self.get(text_id)


class Texts:
    """Stores texts for one writing connection, inside the caller's transaction."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def put(
        self, text: str, *, composer: Composer | None = None, compose: bool = False, searchable: bool = False
    ) -> int:
        """The id of `text`, stored now unless it already is. `searchable` texts (questions and
        final answers) are indexed for full-text search, and so always kept whole."""
        digest = text_hash(text)
        row = self._db.execute("SELECT id, body IS NULL, searchable FROM texts WHERE hash = ?", (digest,)).fetchone()
        if row is not None:
            text_id, is_composed, indexed = row
            if searchable and not indexed:
                self._db.execute(
                    "UPDATE texts SET body = ?, parts = NULL, searchable = 1 WHERE id = ?", (text, text_id)
                )
                self._db.execute("INSERT INTO text_search (rowid, body) VALUES (?, ?)", (text_id, text))
                is_composed = False
            if composer is not None:
                composer.found(text, text_id, whole=not is_composed or searchable)
            return int(text_id)
        prompt = composer is not None and compose and not searchable
        parts = composer.compose(text) if composer is not None and prompt else None
        cursor = self._db.execute(
            "INSERT INTO texts (hash, body, parts, searchable) VALUES (?, ?, ?, ?)",
            (digest, None if parts else text, dumps(parts.parts) if parts else None, int(searchable)),
        )
        text_id = int(cursor.lastrowid or 0)
        if searchable:
            self._db.execute("INSERT INTO text_search (rowid, body) VALUES (?, ?)", (text_id, text))
        if composer is not None:
            composer.stored(text, text_id, parts, prompt=prompt)
        return text_id


class Line(str):
    """A long line of a prompt being composed: a text of its own once the composition is kept."""


class Composition:
    def __init__(self, parts: list[Part | Line], *, sliced: bool) -> None:
        self.parts = parts
        self.sliced = sliced


class Composer:
    """What one run has stored so far, so that its later prompts can be kept as parts.

    Entries made inside a transaction are only kept once it commits (`commit`): a text from a
    rolled back transaction does not exist, and nothing may be composed from it."""

    def __init__(self, texts: Texts) -> None:
        self._texts = texts
        self._quotable: dict[str, list[tuple[str, int]]] = {}
        self._recent: deque[tuple[str, int]] = deque(maxlen=RECENT_PROMPTS)
        self._known: dict[int, str] = {}
        self._pending: list[tuple[str, int, bool]] = []  # (text, id, a base for slices)

    def found(self, text: str, text_id: int, *, whole: bool) -> None:
        if whole:
            self._pending.append((text, text_id, False))

    def stored(self, text: str, text_id: int, composition: Composition | None, *, prompt: bool) -> None:
        """A new text of the run. A prompt stored whole, or quoting others (which keeps it one
        level deep), is one later prompts may be sliced from."""
        if composition is None:
            self._pending.append((text, text_id, prompt and len(text) >= COMPOSE_MIN))
        elif not composition.sliced:
            self._pending.append((text, text_id, True))

    def commit(self) -> None:
        for text, text_id, recent in self._pending:
            self._known[text_id] = text
            if len(text) >= QUOTE_MIN:
                entries = self._quotable.setdefault(text[:QUOTE_MIN], [])
                if all(known_id != text_id for _, known_id in entries):
                    entries.append((text, text_id))
            if recent:
                self._recent.append((text, text_id))
        self._pending.clear()

    def rollback(self) -> None:
        self._pending.clear()

    def compose(self, text: str) -> Composition | None:
        """Parts that make `text` when they save space, else None (the text is stored whole)."""
        if len(text) < COMPOSE_MIN:
            return None
        base, prefix, suffix = self._closest(text)
        if base is not None and prefix + suffix >= len(text) // 2:
            base_text, base_id = base
            parts: list[Part | Line] = [[base_id, 0, prefix]] if prefix else []
            parts += self._quote(text[prefix : len(text) - suffix])
            if suffix:
                parts.append([base_id, len(base_text) - suffix, suffix])
            composition = Composition(parts, sliced=True)
        else:
            composition = Composition(self._quote(text), sliced=False)
        literal = sum(len(part) for part in composition.parts if isinstance(part, str) and not isinstance(part, Line))
        if len(text) - literal - 12 * len(composition.parts) < 256 or self._assemble(composition.parts) != text:
            return None
        composition.parts = [
            [self._texts.put(part, composer=self)] if isinstance(part, Line) else part for part in composition.parts
        ]
        return composition

    def _closest(self, text: str) -> tuple[tuple[str, int] | None, int, int]:
        """The recent prompt sharing the most of its beginning and end with `text`."""
        best: tuple[tuple[str, int] | None, int, int] = (None, 0, 0)
        for base_text, base_id in reversed(self._recent):
            prefix = common_prefix(text, base_text)
            suffix = common_suffix(text, base_text, min(len(text), len(base_text)) - prefix)
            if prefix + suffix > best[1] + best[2]:
                best = ((base_text, base_id), prefix, suffix)
        return best

    def _quote(self, segment: str) -> list[Part | Line]:
        """`segment` as literal strings, long lines, and the texts of this run it quotes at
        the start of a line."""
        parts: list[Part | Line] = []
        start = 0  # where the literal text not yet added begins
        position = 0
        while position < len(segment):
            found = self._quoted_at(segment, position)
            if found is not None:
                quoted, quoted_id = found
                parts += self._lines(segment[start:position])
                parts.append([quoted_id])
                position = start = position + len(quoted)
                if position < len(segment) and segment[position - 1] == "\n":
                    continue
            newline = segment.find("\n", position)
            if newline < 0:
                break
            position = newline + 1
        parts += self._lines(segment[start:])
        return parts

    def _quoted_at(self, segment: str, position: int) -> tuple[str, int] | None:
        key = segment[position : position + QUOTE_MIN]
        if len(key) < QUOTE_MIN:
            return None
        candidates = [*self._quotable.get(key, []), *((text, text_id) for text, text_id, _ in self._pending)]
        matches = [(text, text_id) for text, text_id in candidates if segment.startswith(text, position)]
        return max(matches, key=lambda match: len(match[0]), default=None)

    @staticmethod
    def _lines(literal: str) -> list[Part | Line]:
        """Long lines stand apart (boilerplate every run repeats: instructions, schemas); the
        rest stays literal."""
        parts: list[Part | Line] = []
        pending = ""
        for line in literal.splitlines(keepends=True):
            bare = line.rstrip("\n")
            if len(bare) >= LINE_MIN:
                if pending:
                    parts.append(pending)
                parts.append(Line(bare))
                pending = line[len(bare) :]
            else:
                pending += line
        if pending:
            parts.append(pending)
        return parts

    def _text(self, text_id: int) -> str:
        if text_id in self._known:
            return self._known[text_id]
        return next(text for text, known_id, _ in self._pending if known_id == text_id)

    def _assemble(self, parts: list[Part | Line]) -> str:
        pieces = []
        for part in parts:
            if isinstance(part, str):
                pieces.append(part)
            else:
                whole = self._text(part[0])
                pieces.append(whole if len(part) == 1 else whole[part[1] : part[1] + part[2]])
        return "".join(pieces)


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common beginning, by bisection on slices (compared in C)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def common_suffix(a: str, b: str, limit: int) -> int:
    low, high = 0, max(0, limit)
    while low < high:
        middle = (low + high + 1) // 2
        if a[len(a) - middle :] == b[len(b) - middle :]:
            low = middle
        else:
            high = middle - 1
    return low
