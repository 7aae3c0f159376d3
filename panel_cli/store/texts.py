"""Every text a run holds is stored once, in the `texts` table, found by its hash.

A protocol repeats texts all the time: a confer vote prompt quotes every member's answer
(N² texts per round), a call's reply is also in its event, a run's result repeats its final
answer and every round. Rows and JSON columns refer to a text by its id instead, as
`{"$text": 12}` inside JSON; strings shorter than `TEXT_MIN` stay where they are, since a
reference would cost more than it saves.

A long prompt is also kept as parts when that saves space (`Composer`): the texts of the run
it quotes at the start of a line (the answers in a vote prompt), its long lines (instructions
and schemas every run sends), and, when a prompt differs from a recent one only in its
middle (each member's vote prompt names its own answer), slices of that one. A part is a
literal string, `[id]` (a whole text) or `[id, start, length]` (a slice, in characters).
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

TEXT_MIN = 64  # shorter strings stay inline in their JSON
QUOTE_MIN = 64  # a text of the run at least this long is found again inside a prompt
COMPOSE_MIN = 1024  # a prompt at least this long is stored as parts when that saves space
LINE_MIN = 160  # a line at least this long inside a composed prompt is a text of its own
RECENT_PROMPTS = 8  # how many earlier prompts of a run a new one is compared with
REF = "$text"
ESCAPE = "$esc"
_REF_PATTERN = re.compile(r'\{"\$text":(\d+)\}')

Part = str | list[int]


def text_hash(text: str) -> bytes:
    """The first 128 bits of SHA-256: no collision is expected among any number of runs a
    person keeps, and the key stays small. hashlib is imported here: only writing needs it."""
    import hashlib

    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:16]


def dumps(value: Any) -> str:
    """The one serialisation of every JSON column: compact, so `_REF_PATTERN` finds each
    reference, and UTF-8 as it is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# -- JSON with references ----------------------------------------------------------------


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


class TextLookup(Protocol):
    """Texts by id, as a row is read back: a `TextCache`, or the reader's `Texts`, which gives
    None for a text a damaged file cannot give."""

    def get(self, text_id: int, /) -> str | None: ...

    def optional(self, text_id: int | None, /) -> str | None: ...


def decode(value: Any, texts: TextLookup) -> Any:
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


def refs_in(json_text: str | None) -> Iterator[int]:
    """The texts a JSON column refers to. A reference can only appear as this exact
    sequence: inside a JSON string, its quotes would be escaped."""
    if json_text:
        for match in _REF_PATTERN.finditer(json_text):
            yield int(match.group(1))


def remap_refs(json_text: str, new_id: Callable[[int], int]) -> str:
    """A JSON column with each reference pointing at `new_id(old id)`: the same texts, in
    another file (`panel history import`)."""
    return _REF_PATTERN.sub(lambda match: dumps({REF: new_id(int(match.group(1)))}), json_text)


def part_refs(parts_json: str) -> Iterator[int]:
    """The texts a composed text is made of; none from parts that are not a list of parts (a
    damaged row, which must not stop a delete or a purge from going through)."""
    try:
        parts = json.loads(parts_json)
    except (TypeError, ValueError, RecursionError):
        return
    for part in parts if isinstance(parts, list) else ():
        if _is_part(part) and not isinstance(part, str):
            yield part[0]


# -- reading -----------------------------------------------------------------------------


class MissingTextError(Exception):
    """A row refers to a text the file does not have, or one it cannot put together (parts
    that are not a list of parts, that refer to the text itself, a body that is not text):
    the file is damaged."""


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
                raise MissingTextError(f"text {min(missing)} is missing")
            wanted = set()
            for text_id, body, parts in rows:
                if isinstance(body, str):
                    self._bodies[text_id] = body
                else:
                    composed[text_id] = _parts(text_id, body, parts)
                    wanted |= {part[0] for part in composed[text_id] if isinstance(part, list)}
            wanted -= self._bodies.keys() | composed.keys()
        for text_id in composed:
            self._assemble(text_id, composed)

    def _assemble(self, text_id: int, composed: dict[int, list[Any]]) -> None:
        """Put `text_id` together, the texts it is made of first. Without recursion: a prompt
        made of a slice of one made of a slice of another can be any number of texts deep."""
        pending = [text_id]
        building: set[int] = set()
        while pending:
            current = pending[-1]
            if current in self._bodies:
                pending.pop()
                continue
            needed = [part[0] for part in composed[current] if isinstance(part, list) and part[0] not in self._bodies]
            if needed:
                if current in building:
                    raise MissingTextError(f"text {current} is made of itself")
                building.add(current)
                pending += needed
                continue
            pieces = []
            for part in composed[current]:
                if isinstance(part, str):
                    pieces.append(part)
                else:
                    whole = self._bodies[part[0]]
                    pieces.append(whole if len(part) == 1 else whole[part[1] : part[1] + part[2]])
            self._bodies[current] = "".join(pieces)
            building.discard(current)
            pending.pop()

    def get(self, text_id: int) -> str:
        if text_id not in self._bodies:
            self.load([text_id])
        return self._bodies[text_id]

    def optional(self, text_id: int | None) -> str | None:
        return None if text_id is None else self.get(text_id)


def _parts(text_id: int, body: Any, parts: Any) -> list[Any]:
    """A composed text's parts, each a string, `[id]` or `[id, start, length]`, checked."""
    try:
        found = json.loads(parts) if isinstance(parts, str) and body is None else None
    except (ValueError, RecursionError):
        found = None
    if not isinstance(found, list) or not all(_is_part(part) for part in found):
        raise MissingTextError(f"text {text_id} is neither a text nor a list of parts")
    return found


def _is_part(part: Any) -> bool:
    if isinstance(part, str):
        return True
    return (
        isinstance(part, list)
        and len(part) in (1, 3)
        and all(isinstance(number, int) and not isinstance(number, bool) and number >= 0 for number in part)
    )


# -- writing -----------------------------------------------------------------------------


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
        # The pending texts by id, and those long enough to quote by their beginning, as the
        # committed ones are: a 64-member vote round quotes the answers of the same group
        # commit, and scanning every pending text at every line was a fifth of the run's CPU.
        self._pending_texts: dict[int, str] = {}
        self._pending_quotable: dict[str, list[tuple[str, int]]] = {}

    def found(self, text: str, text_id: int, *, whole: bool) -> None:
        if whole:
            self._hold(text, text_id, recent=False)

    def stored(self, text: str, text_id: int, composition: Composition | None, *, prompt: bool) -> None:
        """A new text of the run. A prompt stored whole, or quoting others (which keeps it one
        level deep), is one later prompts may be sliced from."""
        if composition is None:
            self._hold(text, text_id, recent=prompt and len(text) >= COMPOSE_MIN)
        elif not composition.sliced:
            self._hold(text, text_id, recent=True)

    def _hold(self, text: str, text_id: int, *, recent: bool) -> None:
        self._pending.append((text, text_id, recent))
        self._pending_texts[text_id] = text
        _index(self._pending_quotable, text, text_id)

    def commit(self) -> None:
        for text, text_id, recent in self._pending:
            self._known[text_id] = text
            _index(self._quotable, text, text_id)
            if recent:
                self._recent.append((text, text_id))
        self.rollback()

    def rollback(self) -> None:
        self._pending.clear()
        self._pending_texts.clear()
        self._pending_quotable.clear()

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
        candidates = [*self._quotable.get(key, []), *self._pending_quotable.get(key, [])]
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
        return self._pending_texts[text_id]

    def _assemble(self, parts: list[Part | Line]) -> str:
        pieces = []
        for part in parts:
            if isinstance(part, str):
                pieces.append(part)
            else:
                whole = self._text(part[0])
                pieces.append(whole if len(part) == 1 else whole[part[1] : part[1] + part[2]])
        return "".join(pieces)


def _index(quotable: dict[str, list[tuple[str, int]]], text: str, text_id: int) -> None:
    """Make `text` findable by its first QUOTE_MIN characters (once), when it is that long."""
    if len(text) >= QUOTE_MIN:
        entries = quotable.setdefault(text[:QUOTE_MIN], [])
        if all(known_id != text_id for _, known_id in entries):
            entries.append((text, text_id))


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


# -- cleaning up -------------------------------------------------------------------------


def collect_garbage(db: sqlite3.Connection) -> int:
    """Delete every text no row refers to, directly or as a part of a text that is kept; the
    caller holds the write lock. Returns how many texts were deleted.

    Marking from every row rather than counting references keeps the writers simple (a
    text is shared by any number of runs, and a count kept by each writer could drift), and
    it is fast enough for what calls it: deleting and purging runs."""
    marked: set[int] = set()
    for (text_id,) in db.execute(
        "SELECT question_text FROM runs UNION SELECT final_answer_text FROM runs"
        " UNION SELECT config_text FROM runs UNION SELECT response_text FROM calls"
    ):
        if text_id is not None:
            marked.add(text_id)
    for query in (
        "SELECT result_json FROM runs WHERE result_json IS NOT NULL",
        "SELECT payload_json FROM events WHERE payload_json IS NOT NULL",
        "SELECT request_json FROM calls WHERE request_json IS NOT NULL",
    ):
        for (json_text,) in db.execute(query):
            marked.update(refs_in(json_text))
    composed = {
        text_id: list(part_refs(parts))
        for text_id, parts in db.execute("SELECT id, parts FROM texts WHERE parts IS NOT NULL")
    }
    frontier = [text_id for text_id in marked if text_id in composed]
    while frontier:
        found = [part for text_id in frontier for part in composed[text_id] if part not in marked]
        marked.update(found)
        frontier = [text_id for text_id in found if text_id in composed]
    db.execute("CREATE TEMP TABLE IF NOT EXISTS kept_texts (id INTEGER PRIMARY KEY)")
    try:
        db.executemany("INSERT INTO temp.kept_texts (id) VALUES (?)", ((text_id,) for text_id in marked))
        for text_id, body in db.execute(
            "SELECT id, body FROM texts WHERE searchable = 1 AND id NOT IN (SELECT id FROM temp.kept_texts)"
        ).fetchall():
            db.execute("INSERT INTO text_search (text_search, rowid, body) VALUES ('delete', ?, ?)", (text_id, body))
        cursor = db.execute("DELETE FROM texts WHERE id NOT IN (SELECT id FROM temp.kept_texts)")
        return cursor.rowcount
    finally:
        db.execute("DROP TABLE temp.kept_texts")
