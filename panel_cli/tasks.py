"""The markers engines put in their prompts to say what kind of answer they want.

The demo provider answers in the shape a protocol asks for; it must recognise the request
for certain rather than guess from wording, so every engine prompt ends with one marker
line. Real models see a harmless comment.
"""

from __future__ import annotations

import re
from enum import StrEnum


class Task(StrEnum):
    ANSWER = "answer"
    CONFER_VOTE = "confer.vote"
    COUNCIL_REVIEW = "council.review"
    COUNCIL_REVIEW_NAMED = "council.review.named"
    COUNCIL_SYNTHESIS = "council.synthesis"
    BALLOT = "ballot"
    CRITIC = "critic"
    PLAN = "plan"
    SYNTHESIS = "synthesis"
    JUDGE = "judge"


_MARKER = re.compile(r"\[panel-task: ([a-z.]+)\]")


def mark(prompt: str, task: Task) -> str:
    return f"{prompt}\n\n[panel-task: {task.value}]"


def find_task(text: str) -> Task | None:
    """The last marker in the text wins, so quoted material cannot override the request."""
    found = _MARKER.findall(text)
    for value in reversed(found):
        try:
            return Task(value)
        except ValueError:
            continue
    return None


BLOCK_START = "<answers>"
BLOCK_END = "</answers>"


def render_labelled(block: dict[str, str], noun: str = "Answer") -> str:
    """Labelled texts between delimiters, so a reader (and the demo) knows where each ends."""
    body = "\n\n".join(f"{noun} {label}:\n{text}" for label, text in block.items())
    return f"{BLOCK_START}\n{body}\n{BLOCK_END}"
