"""Where a run's question comes from when the command line does not give it: the panel file,
else stdin, else a prompt on a terminal."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import typer

from panel_cli.config import Panel, resolve_question
from panel_cli.errors import UserError
from panel_cli.untrusted import bad_byte, utf8_text

# A question piped on stdin larger than this is a mistake (a binary, a log), not a question.
STDIN_LIMIT = 1 << 20


def read_stdin(stream: TextIO | None, before_prompt: Callable[[], None] | None = None) -> str | None:
    """The question piped on `stream` (the command's stdin); on a terminal, asked for at a
    prompt, once `before_prompt` has passed (the checks that would stop the run, so nobody
    types a question for a run that cannot start). Called only when no other source gives a
    question, so a pipe meant for something else is never read."""
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
            f"The question on stdin is not UTF-8 text ({bad_byte(exc.object[exc.start])} at byte {exc.start + 1})."
        ) from None
    except OSError:
        return None
    if len(text) > STDIN_LIMIT:
        raise UserError(
            f"The question on stdin is longer than {STDIN_LIMIT:,} characters; put a shorter one in question_file."
        )
    return utf8_text(text, "The question on stdin")


def question_for(
    panel: Panel,
    panel_file: Path | None,
    given: str | None,
    *,
    stdin: TextIO | None,
    before_prompt: Callable[[], None] | None = None,
) -> str:
    """The question of a run, from `-q` (`given`), else the panel, else `stdin`."""
    if given is not None and given != "-":
        utf8_text(given, "The question given with -q")
    folder = panel_file.parent if panel_file else None
    return resolve_question(panel, folder, given, lambda: read_stdin(stdin, before_prompt))
