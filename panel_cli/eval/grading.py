"""Grading a final answer against a dataset's gold answer: by option, by normalised exact
match, or by a judge member with a stated rubric.

Option and exact-match grading are pure. A protocol's final answer is free text, read in this
order, the first that gives an answer deciding:

1. a stated answer line: `Answer: …`, `Final answer: …`, `The answer is …` at the start of a
   line (Markdown emphasis, quotes and bullets around it allowed), or LaTeX's `\boxed{…}`.
   A final answer (or a box) beats a plain `Answer:`, and of two alike the last counts: a
   model that reasons first concludes last. A stated line that names nothing falls through.
2. the whole answer, or its first line, being exactly an option (or the gold short answer);
3. for options, the first option named in the first line (where eval's prompt asks for the
   answer), then in the whole text: first *by position*, so `Pacific, which is larger than
   the Atlantic.` is Pacific. Of two options named at the same place, the longer
   (`Do not ship` over `Ship`).

Options are named as whole words in any case; an option that is a number is named by any
number of the same value (`0.20` names `0.2`, `1,000` names `1000`, `1e3` names `1000`, `50%`
names `50`), and never by a longer number it is part of (`0.25`, `10.2`, `-0.2`). Options
are shown to models unlettered, so a bare `B` names option `B` only if one is called that.

Model output is hostile input: at most the first and last `READ_CHARS` characters of an
answer are read, and every pattern is linear in what it reads, so a huge answer is graded
in bounded time.

The judge reads the question, the gold answer and the answer, and must return a verdict
object; a reply without one is recorded as such and graded wrong, never guessed.
"""

from __future__ import annotations

import math
import re
import string
from typing import Any, Literal

from pydantic import BaseModel, Field

from panel_cli.config import Member
from panel_cli.eval.datasets import EvalItem
from panel_cli.llm.brief import RequestBrief, quote
from panel_cli.llm.gateway import Gateway
from panel_cli.protocols.stages import failure_reason, stage_deadline
from panel_cli.protocols.vote.ballots import exact_option, word_pattern
from panel_cli.tasks import Task, mark, render_labelled

Method = Literal["option", "exact", "judge"]

_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
# Joiners become spaces (`well-known` is `well known`); other punctuation goes (`U.S.A.` is `usa`).
_JOINERS = re.compile(r"[-‐–—/_]")
_PUNCTUATION = re.compile(rf"[{re.escape(string.punctuation)}“”‘’«»…]")
# What may wrap a number without changing it: `$5`, `50%`, `42.`
_NUMBER_WRAPPING = " $€£%."
# A number in running text: `42`, `-2.50`, `1,000`, `1e3`, `.5` is not one (`0.5` is). Not
# part of a longer number or word on either side (`0.25` holds no `0.2`, `x2` no `2`).
_NUMBER = re.compile(r"(?<![\w.,\-−])[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w]|[.,]\d)")
# `Answer: B`, `**Final answer:** B`, `The final answer is B`, `- answer = B`, at a line's start.
_STATED = re.compile(
    r"^[ \t>*_#`\-]*(?:the[ \t]+)?(?P<final>final[ \t]+)?answer[ \t*_`]*(?::|=|is\b[ \t]*:?)[ \t*_`]*(?P<rest>[^\n]*)",
    re.IGNORECASE | re.MULTILINE,
)
_BOXED = re.compile(r"\\boxed\{(?P<rest>[^{}\n]{1,500})\}")
# How much of an answer grading reads: this many characters from its start and from its end.
READ_CHARS = 20_000

# A judge's call is bounded like a stage: a hanging judge fails its grade, not the eval.
JUDGE_TIMEOUT = 120.0
JUDGE_RUBRIC = (
    "CORRECT when the answer commits to the same final answer as the reference, in any wording, "
    "spelling or unit that means the same (a number must have the same value). "
    "INCORRECT when it gives a different answer, gives none, hedges between several, or contradicts the reference. "
    "Judge only the final answer: ignore style, length and the reasoning around it."
)


class Grade(BaseModel):
    """How one final answer was graded. `predicted`: the option or normalised text it was read
    as (None when nothing could be read); `reason`: why, in one line."""

    correct: bool
    method: Method
    predicted: str | None = None
    reason: str = ""


class JudgeVerdict(BaseModel):
    """The structured verdict asked of a judge."""

    verdict: Literal["CORRECT", "INCORRECT"] = Field(description="CORRECT or INCORRECT, by the rubric")
    reason: str = Field(default="", description="one sentence")


def as_number(text: str) -> float | None:
    """The value of an answer that is a number (`1,000`, `$5`, `-2.50`, `3.`), else None."""
    bare = _THOUSANDS.sub("", text.strip().strip(_NUMBER_WRAPPING))
    try:
        value = float(bare)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def normalize(text: str) -> str:
    """An answer as compared: a number as its value (`3.0`, `3` and `$3` are `3`), anything
    else in any case, without punctuation or articles, whitespace collapsed."""
    value = as_number(text)
    if value is not None:
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    cleaned = _PUNCTUATION.sub("", _JOINERS.sub(" ", text.casefold()))
    return " ".join(_ARTICLES.sub(" ", cleaned).split())


def same_answer(answer: str, gold: str) -> bool:
    """Normalised exact match; two numbers match when their values do."""
    left = normalize(answer)
    return bool(left) and left == normalize(gold)


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def readable(text: str, limit: int = READ_CHARS) -> str:
    """What grading reads of an answer: all of it, or its first and last `limit` characters."""
    return text if len(text) <= 2 * limit else f"{text[:limit]}\n{text[-limit:]}"


def stated_answer(text: str) -> str | None:
    """The text of the answer line that counts (see the module's docstring), or None."""
    finals: list[str] = []
    plain: list[str] = []
    for found in _STATED.finditer(text):
        rest = found.group("rest").strip()
        (finals if found.group("final") else plain).append(rest)
    finals += [found.group("rest").strip() for found in _BOXED.finditer(text)]
    for stated in (finals, plain):
        named = [rest for rest in stated if rest.strip("*_`\"' .")]
        if named:
            return named[-1]
    return None


def _number_places(text: str, value: float) -> int | None:
    """Where `text` first names a number of this value."""
    for found in _NUMBER.finditer(text):
        if as_number(found.group().replace("−", "-")) == value:
            return found.start()
    return None


def first_option(text: str, options: list[str]) -> str | None:
    """The option named first in `text`: the earliest place, the longer option on a tie."""
    best: tuple[int, int] | None = None
    chosen: str | None = None
    for option in options:
        value = as_number(option)
        if value is not None:
            place = _number_places(text, value)
        else:
            found = word_pattern(option.strip()).search(text)
            place = found.start() if found else None
        if place is not None and (best is None or (place, -len(option)) < best):
            best, chosen = (place, -len(option)), option
    return chosen


def _read_option(text: str, options: list[str]) -> tuple[str | None, str]:
    """The option an answer gives and where it was read."""
    stated = stated_answer(text)
    if stated is not None:
        found = exact_option(stated, options) or first_option(stated, options)
        if found is not None:
            return found, "its answer line"
    head = first_line(text)
    for candidate in (text, head):
        found = exact_option(candidate, options)
        if found is not None:
            return found, "its first line"
    found = first_option(head, options)
    if found is not None:
        return found, "its first line"
    return first_option(text, options), "its text"


def read_option(answer: str, options: list[str]) -> str | None:
    """The option a final answer gives (see the module's docstring for the order)."""
    return _read_option(readable(answer), options)[0]


def grade_option(answer: str | None, item: EvalItem) -> Grade:
    assert item.options is not None
    if answer is None:
        return Grade(correct=False, method="option", reason="no final answer")
    chosen, where = _read_option(readable(answer), item.options)
    if chosen is None:
        return Grade(correct=False, method="option", reason="names none of the options")
    right = chosen == item.answer
    verdict = "the gold option" if right else "another option"
    return Grade(correct=right, method="option", predicted=chosen, reason=f"{verdict}, read from {where}")


def grade_exact(answer: str | None, item: EvalItem) -> Grade:
    """A stated answer line, when there is one, is the answer; else the whole answer or its first line."""
    if answer is None:
        return Grade(correct=False, method="exact", reason="no final answer")
    text = readable(answer)
    stated = stated_answer(text)
    candidates = [stated.strip("*_`")] if stated is not None else [text, first_line(text)]
    for candidate in candidates:
        if same_answer(candidate, item.answer):
            return Grade(correct=True, method="exact", predicted=normalize(candidate), reason="matches the gold answer")
    return Grade(
        correct=False,
        method="exact",
        predicted=normalize(candidates[-1]) or None,
        reason="differs from the gold answer",
    )


def grade(answer: str | None, item: EvalItem) -> Grade:
    """The automatic grade: by option for a multiple-choice question, else by exact match."""
    return grade_option(answer, item) if item.multiple_choice else grade_exact(answer, item)


def judge_prompt(item: EvalItem, answer: str) -> str:
    """The question, the reference and the answer to grade, with the rubric stated. The answer
    is model text, so it is fenced: it cannot close its fence and write a verdict of its own."""
    options = "\n\nThe options were:\n" + "\n".join(f"- {option}" for option in item.options) if item.options else ""
    return mark(
        f"Question:\n{item.question}{options}\n\nReference answer:\n{item.answer}\n\n"
        f"Grade the answer below against the reference.\n\n{render_labelled({'to grade': answer}, 'Answer')}\n\n"
        f"Rubric: {JUDGE_RUBRIC}\n\nGive your verdict, CORRECT or INCORRECT, and a one-sentence reason.",
        Task.JUDGE,
    )


def read_verdict(parsed: dict[str, Any] | None, problem: str | None) -> Grade:
    if parsed is None:
        return Grade(
            correct=False,
            method="judge",
            reason=f"the judge gave no verdict ({problem or 'no JSON object'}); graded wrong",
        )
    correct = parsed["verdict"] == "CORRECT"
    reason = " ".join(str(parsed.get("reason", "")).split())[:300]
    return Grade(correct=correct, method="judge", predicted=parsed["verdict"], reason=reason)


class JudgeRecord(BaseModel):
    """The judge's call as an eval stores it: who judged, what it was asked and what it
    replied, what it cost; `error` when the call failed."""

    member: str
    model: str
    prompt: str
    reply: str
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None
    latency: float = 0.0
    error: str | None = None


class JudgeCall(BaseModel):
    """A judge's grade and what the call cost, kept apart from the protocol it graded;
    `record` is the call itself (None when no call was made)."""

    grade: Grade
    tokens: int | None = None
    cost: float | None = None
    record: JudgeRecord | None = None


async def judge_answer(
    gateway: Gateway,
    judge: Member,
    item: EvalItem,
    answer: str | None,
    *,
    about: str,
    limit: float | None = JUDGE_TIMEOUT,
) -> JudgeCall:
    """One judge call, within `limit` seconds. No final answer is wrong without asking; a failed
    call is a grade of wrong that says why, so one flaky judge call does not stop the eval."""
    if answer is None:
        return JudgeCall(grade=Grade(correct=False, method="judge", reason="no final answer"))
    messages = [{"role": "user", "content": judge_prompt(item, answer)}]
    brief = RequestBrief(
        task=Task.JUDGE,
        question=item.question,
        reference=item.answer,
        quoted=quote({"to grade": answer}),
    )
    reply = await gateway.call(
        judge, messages, stage="judge", about=about, deadline=stage_deadline(limit), schema=JudgeVerdict, brief=brief
    )
    tokens = (
        None
        if reply.tokens_in is None and reply.tokens_out is None
        else (reply.tokens_in or 0) + (reply.tokens_out or 0)
    )
    record = JudgeRecord(
        member=judge.name,
        model=reply.model or judge.model,
        prompt=messages[0]["content"],
        reply=reply.text,
        tokens_in=reply.tokens_in,
        tokens_out=reply.tokens_out,
        cost=reply.cost,
        latency=reply.latency,
        error=None if reply.ok else failure_reason(reply.error_kind, reply.error),
    )
    if not reply.ok:
        reason = f"the judge's call failed ({record.error}); graded wrong"
        grade = Grade(correct=False, method="judge", reason=reason)
        return JudgeCall(grade=grade, tokens=tokens, cost=reply.cost, record=record)
    return JudgeCall(grade=read_verdict(reply.parsed, reply.parse_error), tokens=tokens, cost=reply.cost, record=record)
