"""Errors a person can act on. Each carries one sentence and the exit code SPEC §4 gives."""

from __future__ import annotations


class PanelError(Exception):
    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UserError(PanelError):
    """Bad file, bad option, missing key: the user can fix it; exit code 2."""

    exit_code = 2


class ConfigError(UserError):
    """A panel file problem, located by file, line and field."""

    def __init__(self, file: str, line: int | None, field: str | None, problem: str) -> None:
        where = file if line is None else f"{file}, line {line}"
        what = f"{field}: {problem}" if field else problem
        super().__init__(f"{where}: {what}" + ("" if what.endswith(".") else "."))
        self.file, self.line, self.field, self.problem = file, line, field, problem


class MissingKeyError(UserError):
    """A member's provider needs a key that is not in the environment."""


class NoAnswerError(PanelError):
    """The protocol ran but reached no answer; exit code 1."""
