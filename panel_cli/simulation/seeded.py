"""What every simulated reply shares, a persona's or a simulated voter's: the mark it carries,
and seeds drawn from the text of its request, so one request always gives one reply."""

from __future__ import annotations

import hashlib

from panel_cli.llm.brief import RequestBrief

SIMULATED = "[simulated]"
QUESTION_ECHO_LIMIT = 1000


def digest(text: str) -> int:
    """A text as a 64-bit number: the seed of every draw made for it."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def echoed_question(brief: RequestBrief) -> str:
    """The question, on one line; a very long one is cut at a word, visibly."""
    text = " ".join(brief.question.split())
    if len(text) <= QUESTION_ECHO_LIMIT:
        return text
    return text[:QUESTION_ECHO_LIMIT].rsplit(" ", 1)[0] + " …"
