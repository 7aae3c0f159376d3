"""supervise's part of the views: under each critique, a worker × round grid of the critic's
verdicts so far and that round's feedback; its plain lines and its summary fields.

The deliveries and corrections are ordinary stage tables (the reply is the deliverable).
The critic's feedback is model text: always `Text`, never markup."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from panel_cli.view import fmt
from panel_cli.view.tables import RunSoFar, StageState, StageTable, warning_line

if TYPE_CHECKING:
    from panel_cli.events import VerdictGiven

FEEDBACK_LIMIT = 300


def critique_stage(stage: str, round_: int | None, seen: RunSoFar) -> StageState:
    """The critic's review of a round: its calls use no tools."""
    return CritiqueStage(stage, round_, verdicts=seen.verdicts, tool_use=False)


@dataclass
class CritiqueStage(StageState):
    """A critique: the critic's call rows, then the grid of every verdict up to this round.
    `verdicts` is the run's list, shared by every critique stage and filled as verdicts come."""

    verdicts: list[VerdictGiven] = field(default_factory=list)

    def render(self) -> RenderableType:
        parts: list[RenderableType] = [StageTable(self)]
        upto = [verdict for verdict in self.verdicts if self.round is None or verdict.round <= self.round]
        if upto:
            parts += [Text(), verdict_grid(upto)]
            current = next((verdict for verdict in upto if verdict.round == self.round), None)
            if current is not None:
                parts += feedback_lines(current)
        parts += [warning_line(warning) for warning in self.warnings]
        return Group(*parts)


def verdict_cell(verdict: VerdictGiven, worker: str) -> Text:
    if verdict.verdict is None:
        return Text("no verdict", style="yellow")
    if worker in verdict.rejected:
        return Text("✗ rejected", style="bold red")
    return Text("✓ approved", style="green")


def verdict_grid(verdicts: list[VerdictGiven]) -> Table:
    """One row per worker, one column per review round."""
    table = Table(title=Text("verdicts", style="bold"), title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
    table.add_column("worker", no_wrap=True)
    for verdict in verdicts:
        table.add_column(f"round {verdict.round}", no_wrap=True)
    for worker in verdicts[-1].workers:
        table.add_row(Text(worker), *(verdict_cell(verdict, worker) for verdict in verdicts))
    return table


def feedback_lines(verdict: VerdictGiven) -> list[Text]:
    """The round's feedback, worker by worker; why there is no verdict, when there is none."""
    if verdict.verdict is None:
        return [
            Text.assemble(
                (" no usable verdict: ", "yellow"), fmt.one_line(verdict.problem or "unknown", FEEDBACK_LIMIT)
            )
        ]
    return [
        Text.assemble(
            (f" {worker}: ", "bold red" if worker in verdict.rejected else "bold"),
            (fmt.one_line(text, FEEDBACK_LIMIT), "dim"),
        )
        for worker, text in verdict.feedback.items()
    ]


def _verdict_line(event: VerdictGiven) -> str:
    """`[round 1] verdict  critic: REJECTED  writer: Add numbers.`"""
    head = f"[round {event.round}] verdict  {event.critic}: "
    if event.verdict is None:
        return head + f"no usable verdict ({fmt.one_line(event.problem or 'unknown', 200)})"
    feedback = "; ".join(f"{worker}: {fmt.one_line(text, 200)}" for worker, text in event.feedback.items())
    return head + event.verdict + (f"  {feedback}" if feedback else "")


# The plain view's line for each supervise event.
PLAIN_LINES: dict[str, Callable[[Any], str]] = {"supervise_verdict": _verdict_line}
