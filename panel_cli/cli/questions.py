"""Where a run's question comes from when the command line does not give it: the panel file,
else stdin, else a prompt on a terminal."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import typer

from panel_cli.config import Panel, resolve_question
from panel_cli.errors import UserError

# A question piped on stdin larger than this is a mistake (a binary, a log), not a question.
STDIN_LIMIT = 1 << 20


def read_stdin(before_prompt: Callable[[], None] | None = None) -> str | None:
    """The question piped on stdin; on a terminal, asked for at a prompt, once `before_prompt`
    has passed (the checks that would stop the run, so nobody types a question for a run that
    cannot start). Called only when no other source gives a question, so a pipe meant for
    something else is never read."""
    stream = sys.stdin
    if stream is None or stream.closed:
        return None
    if stream.isatty():
        if before_prompt is not None:
            before_prompt()
        return utf8_text(typer.prompt("Question", err=True), "The question typed")
    try:
        text = stream.read(STDIN_LIMIT + 1)
    except UnicodeDecodeError as exc:
        raise UserError(
            f"The question on stdin is not UTF-8 text ({_bad_byte(exc.object[exc.start])} at byte {exc.start + 1})."
        ) from None
    except OSError:
        return None
    if len(text) > STDIN_LIMIT:
        raise UserError(
            f"The question on stdin is longer than {STDIN_LIMIT:,} characters; put a shorter one in question_file."
        )
    return utf8_text(text, "The question on stdin")


def utf8_text(text: str, source: str) -> str:
    """`text` if it is text. Bytes that are not UTF-8 reach Python as lone surrogates (argv and
    stdin are decoded with `surrogateescape`); sent on, they fail every call and the store.
    Refused here with where the first one is, as bad input, before the run starts."""
    for index, char in enumerate(text):
        if "\ud800" <= char <= "\udfff":
            what = _bad_byte(ord(char) - 0xDC00) if "\udc80" <= char <= "\udcff" else "a lone surrogate"
            raise UserError(f"{source} is not UTF-8 text ({what} at character {index + 1}).")
    return text


def _bad_byte(value: int) -> str:
    return f"byte 0x{value:02x}"


def question_for(
    panel: Panel, panel_file: Path | None, given: str | None, *, before_prompt: Callable[[], None] | None = None
) -> str:
    if given is not None and given != "-":
        utf8_text(given, "The question given with -q")
    return resolve_question(panel, panel_file.parent if panel_file else None, given, lambda: read_stdin(before_prompt))
