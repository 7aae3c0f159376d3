"""A ballot (docs/protocols.md#vote-and-decide): the options as a voter is shown them, the
structured ballot asked of it, and its reply read as a ballot. Pure: the vote engine reads
every reply here, and eval and batch read options and answers the same way without loading
an engine or the gateway.

A ballot is model output, so it is read defensively: a choice that is not one of the options
is no vote for it, a ranking keeps real options only, each once, and a confidence is a number
from 0 to 100 or nothing.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from panel_cli.llm.structured import NoObject, TwoObjects, reply_object
from panel_cli.protocols.vote.settings import NoMatch
from panel_cli.protocols.vote.tally import Ballot, MatchedBy

# A reason is one line of a table and of every stored event: a runaway reply must not fill them.
REASON_LIMIT = 300
OPTION_LIMIT = 200
_QUOTES = "*_`\"'“”‘’"


class BallotReply(BaseModel):
    """The structured ballot asked of each voter, and of a decision's leader. A reply holding
    a second object with another choice holds two ballots (`panel_cli.llm.structured`)."""

    decisive: ClassVar[tuple[str, ...]] = ("choice",)

    choice: str = Field(description="the option you vote for, exactly as it is listed")
    ranking: list[str] = Field(default_factory=list, description="every option, best first")
    confidence: float | None = Field(default=None, description="your confidence in your choice, 0 to 100")
    reason: str = Field(default="", description="one line")


def _fold(text: str) -> str:
    """An option name as compared: quotes, emphasis and a closing period off (in any
    nesting: `"mysql".`, `**MySQL.**`), whitespace collapsed, any case."""
    trimmed, previous = text, None
    while trimmed != previous:
        previous, trimmed = trimmed, trimmed.strip().strip(_QUOTES).rstrip(".")
    return " ".join(trimmed.split()).casefold()


def exact_option(value: str, options: Sequence[str]) -> str | None:
    """The option a structured field names exactly (any case, any spacing), or None."""
    wanted = _fold(value)
    return next((option for option in options if _fold(option) == wanted), None)


@functools.lru_cache(maxsize=512)
def word_pattern(option: str) -> re.Pattern[str]:
    """An option as whole words in any case, any run of spaces between its words."""
    return re.compile(r"(?<!\w)" + r"\s+".join(re.escape(word) for word in option.split()) + r"(?!\w)", re.IGNORECASE)


# An explicit answer line in prose: `Answer: No`, `**Final answer:** MySQL`.
_ANSWER_LINE = re.compile(r"^[\s*_#>]*(?:final\s+|my\s+)?answer[\s*_]*:[\s*_]*(.+)$", re.IGNORECASE | re.MULTILINE)


def named_options(text: str, options: Sequence[str]) -> list[str]:
    """The options a text names, as whole words in any case, in the options' order. A mention
    inside a mention of a longer option is the longer one's: `do not ship` names `Do not ship`
    alone, `Ship it… do not ship` names both; `Shipping` names neither."""
    mentions = {option: [found.span() for found in word_pattern(option).finditer(text)] for option in options}
    claimed: list[tuple[int, int]] = []
    named: set[str] = set()
    for option in sorted(options, key=len, reverse=True):
        if any(not any(start <= left and right <= end for start, end in claimed) for left, right in mentions[option]):
            named.add(option)
        claimed += mentions[option]
    return [option for option in options if option in named]


def match_option(text: str, options: Sequence[str]) -> str | None:
    """The one option a text names (`named_options`); when it names several, the one its last
    `Answer:` line names, if that names one. A text that names several without saying which
    is its answer (`Yes or No? I say No`, `PostgreSQL, not MySQL`, `Ship it… do not ship`)
    names none: word order does not tell a choice from what it is chosen over, so it abstains."""
    named = named_options(text, options)
    if len(named) == 1:
        return named[0]
    lines = _ANSWER_LINE.findall(text) if named else []
    stated = named_options(lines[-1], options) if lines else []
    return stated[0] if len(stated) == 1 else None


def read_ranking(entries: Any, options: Sequence[str]) -> tuple[list[str], list[str]]:
    """A structured ranking: the options it names, best first, each once at its first place,
    and the entries that name no option (dropped, as written). A ranking given as one
    string (`A > B > C`) is split. Each entry and each option is folded once: a model's
    ranking of thousands of entries is read in linear time."""
    if isinstance(entries, str):
        entries = re.split(r"\s*(?:>|,|;|\n)\s*", entries)
    if not isinstance(entries, list):
        return [], []
    by_fold: dict[str, str] = {}
    for option in options:
        by_fold.setdefault(_fold(option), option)  # the first option of a fold, as `exact_option`
    ranking: dict[str, None] = {}
    dropped: list[str] = []
    for entry in entries:
        named = by_fold.get(_fold(entry)) if isinstance(entry, str) else None
        if named is None:
            if str(entry).strip():
                dropped.append(_short(entry))
        else:
            ranking.setdefault(named)
    return list(ranking), dropped


def read_confidence(value: Any) -> float | None:
    """0 to 100, clamped; None for anything that is not a number (NaN included)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip().rstrip("%"))
        except ValueError:
            return None
    if not isinstance(value, int | float) or math.isnan(value):
        return None
    return max(0.0, min(100.0, float(value)))


def _short(value: Any, limit: int = 60) -> str:
    flat = " ".join(str(value).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _listing(entries: list[str], limit: int = 5) -> str:
    shown = ", ".join(f"'{entry}'" for entry in entries[:limit])
    return shown + (f" and {len(entries) - limit} more" if len(entries) > limit else "")


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= REASON_LIMIT else flat[: REASON_LIMIT - 1].rstrip() + "…"


def read_ballot(
    voter: str,
    text: str,
    parsed: dict[str, Any] | None,
    options: Sequence[str],
    *,
    no_match: NoMatch,
    weight: float = 1.0,
) -> tuple[Ballot, list[str]]:
    """A reply read as a ballot, and the warnings to raise about it.

    A reply holding a ballot object (its own: `panel_cli.llm.structured.reply_object`) is read
    by its own fields: a `choice` that is exactly an option is a structured vote; any other
    choice is matched as text (`match_option`), and its ranking, confidence and reason are
    read field by field. A reply with no ballot object, or with two ballots that disagree, is
    read as prose, matched as text. A ballot that names no option, or several without an
    `Answer:` line to say which, abstains (the warning names them), or with `no_match: first`
    counts for the first option."""
    warnings: list[str] = []
    data: dict[str, Any] | None = parsed
    if data is None:
        try:
            data = reply_object(text, BallotReply.decisive)
        except TwoObjects as exc:
            warnings.append(f"{exc}; read as text")
        except NoObject:
            pass
    matched_by: MatchedBy = "text"
    matched = ""  # the text the choice was read from, when it was read as text
    ranking: list[str] = []
    confidence: float | None = None
    if isinstance(data, dict) and "choice" in data:
        raw = data["choice"]
        choice = exact_option(raw, options) if isinstance(raw, str) else None
        if choice is not None:
            matched_by = "structured"
        elif isinstance(raw, str):
            choice, matched = match_option(raw, options), raw
            named = f"; its words name {choice}" if choice else ""
            warnings.append(f"chose '{_short(raw)}', which is not one of the options{named}")
        else:
            warnings.append("its ballot's choice is not text")
        ranking, dropped = read_ranking(data.get("ranking"), options)
        if dropped:
            warnings.append(f"ranked {_listing(dropped)}, not among the options; dropped")
        confidence = read_confidence(data.get("confidence"))
        reason = data["reason"] if isinstance(data.get("reason"), str) else ""
    else:
        choice, matched = match_option(text, options), text
        reason = text
    several = named_options(matched, options) if choice is None else []
    unread = f"named {_listing(several)} and no Answer: line says which" if len(several) > 1 else "named no option"
    if choice is None and no_match == "first":
        choice, matched_by = options[0], "first"
        warnings.append(f"{unread}; counted for the first option, {options[0]} (no_match: first)")
    elif choice is None:
        matched_by = "none"
        warnings.append(f"{unread}; recorded as an abstention")
    ballot = Ballot(
        voter=voter,
        choice=choice,
        ranking=[choice, *(option for option in ranking if option != choice)] if choice else [],
        confidence=confidence,
        reason=_one_line(reason),
        matched_by=matched_by,
        weight=weight,
    )
    return ballot, warnings


def options_block(options: Sequence[str]) -> str:
    return "Options:\n" + "\n".join(f"- {option}" for option in options)


def option_problems(options: Sequence[str]) -> list[tuple[int, str]]:
    """(index, problem) for each option that cannot be voted on. Options are matched in any
    case, so two that differ only in case are one option given twice."""
    problems: list[tuple[int, str]] = []
    seen: set[str] = set()
    for index, option in enumerate(options):
        if not option.strip():
            problems.append((index, "an option cannot be empty"))
        elif "\n" in option or "\r" in option:
            problems.append((index, "an option is one line of text"))
        elif len(option) > OPTION_LIMIT:
            problems.append((index, f"an option is at most {OPTION_LIMIT} characters"))
        elif _fold(option) in seen:
            problems.append((index, f"'{option.strip()}' is given twice (options match in any case)"))
        seen.add(_fold(option))
    return problems
