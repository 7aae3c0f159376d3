"""Council rankings (docs/protocols.md#council): read a reviewer's `FINAL RANKING`, average the places, and
measure two common biases of peer review.

Pure functions with no I/O, so the parse rules and the arithmetic are tested by hand and the
engine only decides which text to feed them. A ranking holds *canonical labels*: the label
exactly as the reviewer was shown it (`Model A`, or a member's name when the council is not
anonymised), whatever spelling the reviewer used. Only labels the reviewer was shown count,
each once: an entry that names none is dropped (and reported), so padding a ranking with
invented labels cannot push a rival down.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping, Sequence

from pydantic import BaseModel

_MARKER = re.compile(r"FINAL\s+RANKING\s*:", re.IGNORECASE)
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
# `1.`, `2)`, `(3)`, `4:` or a bullet followed by a space: a list item's number, not its content.
_NUMBERING = re.compile(r"^\s*(?:\(?\d+\s*[.):\]]|[-*•+](?=\s))\s*")
# A later item's number on a numbered line (`… 2. Model B`, `…, (3) Model C`), and what else
# separates the entries of a line; `>` of a Markdown quotation at a line's start is no separator.
_INLINE_NUMBER = re.compile(r"[,;]?\s+(?=\(?\d+\s*[.):\]]\s)")
_SEPARATORS = re.compile(r"\s*(?:[,;]|>+|[→»≻]+)\s*")
_QUOTATION = re.compile(r"^\s*>+\s*")
# The words reviewers put before a label: `Model A`, `Response B`, `Member gpt`.
_PREFIX = re.compile(r"^(?:model|member|answer|response)\s+", re.IGNORECASE)
# What may follow a bare label in an item (`A - clear`, `B: thin`, `C (best)`). A hyphen
# counts only with a space before it, so `gpt-4o-2` is never read as `gpt-4o`.
_SEPARATOR_AFTER_BARE = re.compile(r"^(?:\s*[–—:(|]|\s+-)")
# After a prefixed label (`Model A is the most complete`) a space will do as well.
_SEPARATOR_AFTER_PREFIXED = re.compile(r"^(?:\s|[–—:(|,;!])")


def has_ranking(text: str) -> bool:
    """Whether the text contains a `FINAL RANKING:` marker at all."""
    return _MARKER.search(text) is not None


def _items(line: str) -> list[str]:
    """The entries of one line of a ranking, a quotation's `>` taken off first. A numbered or
    bulleted line is one entry (`1. Model A, the clearest > the rest`), unless further numbers
    start further entries on it (`1. Model A 2. Model B`, `1. Model A, 2. Model B`). Any
    other line is a list: `Model C > Model A > Model B`, with commas, semicolons or arrows."""
    line = _QUOTATION.sub("", line, count=1)
    if _NUMBERING.match(line):
        return _INLINE_NUMBER.split(line)
    return _SEPARATORS.split(line)


def _clean(item: str) -> str:
    """Drop the numbering, Markdown emphasis and code marks, quotes and a closing period."""
    item = _NUMBERING.sub("", item, count=1).replace("*", "").replace("`", "")
    return item.strip().strip("_\"'“”").strip().rstrip(".;").strip()


def _match(item: str, known: Mapping[str, str]) -> str | None:
    """The canonical label an item names, or None. `known` maps each label's case-folded key
    (`a` for `Model A`, `gpt` for a member named gpt) to its canonical form. Longer keys are
    tried first so `gpt-4o-2` is never read as `gpt-4o`."""
    folded = item.casefold()
    prefix = _PREFIX.match(folded)
    candidates = [(folded, False)] + ([(folded[prefix.end() :], True)] if prefix else [])
    for key in sorted(known, key=len, reverse=True):
        for body, prefixed in candidates:
            if body == key:
                return known[key]
            if body.startswith(key):
                rest = body[len(key) :]
                separator = _SEPARATOR_AFTER_PREFIXED if prefixed else _SEPARATOR_AFTER_BARE
                if separator.match(rest):
                    return known[key]
    return None


class ParsedRanking(BaseModel):
    """A review's ranking of the labels it was shown, best first, and the entries dropped
    from it because they name no such label (as written, for the warning)."""

    ranking: list[str]
    dropped: list[str]


def parse_ranking(text: str, known: Mapping[str, str]) -> ParsedRanking:
    """The ranking at the end of one review.

    Read from the text after the *last* `FINAL RANKING:` (so a marker quoted earlier never
    counts) up to the next blank line, as a list separated by commas, semicolons or `>`, or
    as numbered or bulleted lines (`_items`). Blank
    lines straight after the marker are skipped, since models often write the list as a
    Markdown block. A label listed twice counts once, at its first place; an entry that is
    not a known label is dropped, and the places close up around it. No marker: an empty
    ranking."""
    markers = list(_MARKER.finditer(text))
    if not markers:
        return ParsedRanking(ranking=[], dropped=[])
    rest = text[markers[-1].end() :].lstrip()
    section = _BLANK_LINE.split(rest, maxsplit=1)[0]
    ranking: list[str] = []
    dropped: list[str] = []
    for line in section.splitlines():
        for part in _items(line):
            item = _clean(part)
            if not item:
                continue
            entry = _match(item, known)
            if entry is None:
                dropped.append(item)
            elif entry not in ranking:
                ranking.append(entry)
    return ParsedRanking(ranking=ranking, dropped=dropped)


class RankedMember(BaseModel):
    """One line of the aggregate ranking."""

    name: str
    label: str
    average_rank: float
    count: int


def aggregate_rankings(
    rankings: Iterable[Sequence[str]], authors: Mapping[str, str], labels: Mapping[str, str]
) -> list[RankedMember]:
    """Each member's mean 1-based place over the rankings that list it, best (lowest) first;
    ties go to the member ranked more often, then to the earlier label.

    `authors` maps a canonical label to the member who wrote that answer (rankings hold only
    shown labels, so every entry has one). `labels` maps member -> label, in label order."""
    places: dict[str, list[int]] = {}
    for ranking in rankings:
        for place, entry in enumerate(ranking, start=1):
            author = authors.get(entry)
            if author is not None:
                places.setdefault(author, []).append(place)
    order = list(labels)
    ranked = [
        RankedMember(name=name, label=labels[name], average_rank=sum(found) / len(found), count=len(found))
        for name, found in places.items()
    ]
    ranked.sort(key=lambda entry: (entry.average_rank, -entry.count, order.index(entry.name)))
    return ranked


def review_order(
    labels: Sequence[str], reviewer: str, own: str | None, *, shuffle: bool, seed: int | None, self_review: bool
) -> list[str]:
    """The labels one reviewer is shown, in the order it sees them.

    Without `self_review` its own answer is left out. With `shuffle` each reviewer gets its
    own order, drawn from the run's seed and its name, so the same seed replays the same
    orders and position bias averages out across reviewers. Labels never change, only order."""
    shown = [label for label in labels if self_review or label != own]
    if shuffle:
        random.Random(f"{seed}:{reviewer}").shuffle(shown)
    return shown


class ReviewFacts(BaseModel):
    """What the bias report needs from one review: the reviewer's own label (None when it
    had no answer or was not shown it), the order it was shown, and its ranking."""

    own: str | None
    shown: list[str]
    ranking: list[str]


class BiasReport(BaseModel):
    """Two signs of bias in a council's reviews, each a count over the reviews that could
    show it, and the share (None when no review could).

    `own_first`: reviews that were shown their author's own answer and put it first — a
    panel that favours itself. `shown_first`: reviews whose first place went to the answer
    they were shown first — position bias, which `shuffle` is there to break up."""

    own_first: int
    own_reviews: int
    own_first_share: float | None
    shown_first: int
    ranked_reviews: int
    shown_first_share: float | None


def bias_report(reviews: Iterable[ReviewFacts]) -> BiasReport:
    own_first = own_reviews = shown_first = ranked_reviews = 0
    for review in reviews:
        if not review.ranking:
            continue
        ranked_reviews += 1
        if review.shown and review.ranking[0] == review.shown[0]:
            shown_first += 1
        if review.own is not None and review.own in review.shown:
            own_reviews += 1
            if review.ranking[0] == review.own:
                own_first += 1
    return BiasReport(
        own_first=own_first,
        own_reviews=own_reviews,
        own_first_share=own_first / own_reviews if own_reviews else None,
        shown_first=shown_first,
        ranked_reviews=ranked_reviews,
        shown_first_share=shown_first / ranked_reviews if ranked_reviews else None,
    )
