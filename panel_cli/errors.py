"""Errors a person can act on. Each carries one sentence (a ConfigError, one per problem)
and its exit code (docs/exit-codes.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from panel_cli.exit_status import ExitStatus


class PanelError(Exception):
    exit_code: ExitStatus = ExitStatus.FAILURE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UserError(PanelError):
    """Bad file, bad option, missing key: the user can fix it; exit code 2."""

    exit_code = ExitStatus.USER_ERROR


class ConfigProblem(NamedTuple):
    """One problem in a file: where it is, which field, and what is wrong."""

    file: str
    line: int | None
    field: str | None
    problem: str

    def sentence(self) -> str:
        where = self.file if self.line is None else f"{self.file}, line {self.line}"
        what = f"{self.field}: {self.problem}" if self.field else self.problem
        return f"{where}: {what}" + ("" if what.endswith(".") else ".")


class PanelFileError(UserError):
    """A file panel reads (a panel file above all) that is missing, cannot be read, or is not
    valid; a `ConfigError` when the problem has a place in the file."""


class ConfigError(PanelFileError):
    """A panel file problem, located by file, line and field; or several, one line each, so a
    file with three mistakes takes one fix instead of three runs."""

    def __init__(
        self, file: str, line: int | None, field: str | None, problem: str, *, more: Sequence[ConfigProblem] = ()
    ) -> None:
        self.problems = [ConfigProblem(file, line, field, problem), *more]
        super().__init__("\n".join(entry.sentence() for entry in self.problems))
        self.file, self.line, self.field, self.problem = file, line, field, problem

    @classmethod
    def listing(cls, problems: Sequence[ConfigProblem]) -> ConfigError:
        """One error for every problem, in the order given (the first is `file`, `line`, …)."""
        first, *more = problems
        return cls(*first, more=more)


class MissingKeyError(UserError):
    """A member's provider needs a key that is not in the environment."""


class BudgetError(UserError):
    """A spending cap that cannot hold: not an amount, or a cost cap over a member whose price
    is unknown (unless unknown prices are allowed)."""


class OptionError(UserError):
    """A protocol option given a value the protocol refuses, as the command line refuses it."""


class UnknownOptionError(OptionError, TypeError):
    """An option the protocol does not take: a TypeError too, as an unexpected keyword argument is."""


class NoAnswerError(PanelError):
    """The protocol ran but reached no answer; exit code 1."""
