"""`--gate`: a run's outcome as a verdict a script acts on (docs/exit-codes.md).

A protocol that can be gated declares a `--gate` option in its spec, whose `verdict` names its
`GateRule`: what the option's value may be, checked against the panel before any call
(`expect`), and how a result is judged against it (`judge`). The run core arms the gate with
the value given (`Gate`) and puts its judgement in the result envelope, so the command line,
the Python API and a server all report the same verdict."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from panel_cli.exit_status import ExitStatus

if TYPE_CHECKING:
    from panel_cli.config import Panel


class GateVerdict(BaseModel):
    """How a gated run came out: `option`, the outcome it was gated on; `passed`, the run came
    to it; `exit_status`, 0 passed, 1 it came to another, 3 it came to none; `reason`, one line."""

    option: str
    passed: bool
    exit_status: int = Field(description="0 passed, 1 another outcome, 3 no outcome")
    reason: str


def verdict(option: str, status: ExitStatus, reason: str) -> GateVerdict:
    """The verdict whose exit status is `status`: SUCCESS (passed), FAILURE or UNDECIDED."""
    return GateVerdict(option=option, passed=status == ExitStatus.SUCCESS, exit_status=int(status), reason=reason)


@dataclass(frozen=True)
class GateRule:
    """A protocol's gate. `expect(panel, value)`: the outcome `value` names, as the result
    will spell it (a ValueError, whose words name the choices, for a value that names none);
    `judge(result, outcome)`: the verdict on a result."""

    expect: Callable[[Panel, str], str]
    judge: Callable[[Any, str], GateVerdict]


@dataclass(frozen=True)
class Gate:
    """A gate armed for one run: the rule and the outcome it waits for."""

    rule: GateRule
    outcome: str

    def judge(self, result: Any) -> GateVerdict:
        return self.rule.judge(result, self.outcome)
