"""How a person watches a batch: a Rich progress bar on a terminal (questions done of all,
how many without an answer, the time left, tokens and cost so far), one plain line per
finished question on a pipe, nothing with `--quiet`. A batch draws no run's live view: many
runs at once would fight over the screen, and the totals are what a batch is watched for."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from panel_cli.view import fmt

if TYPE_CHECKING:
    from panel_cli.batch.runner import BatchLine

# How far back the time-left estimate looks: a batch's runs take seconds to minutes each.
SPEED_WINDOW = 600.0


@dataclass
class BatchTotals:
    """Where a batch stands. `done` counts questions with a finished run, `skipped` (finished
    by an earlier invocation of the batch) included; `failed`, those of them without an
    answer. Calls, tokens and cost are this invocation's, counted as each call ends; tokens
    and cost stay None until a call reports them (an unknown cost is not free)."""

    questions: int
    skipped: int = 0
    done: int = 0
    failed: int = 0
    calls: int = 0
    tokens: int | None = None
    cost: float | None = None

    def add_call(self, tokens: int | None, cost: float | None) -> None:
        self.calls += 1
        if tokens is not None:
            self.tokens = (self.tokens or 0) + tokens
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost

    def add_line(self, reached_answer: bool) -> None:
        self.done += 1
        self.failed += not reached_answer

    @property
    def usage(self) -> str:
        return f"{fmt.tokens(self.tokens)} tokens · cost {fmt.cost(self.cost)}"


class BatchProgress(Protocol):
    def update(self, totals: BatchTotals) -> None:
        """A call ended: tokens and cost moved."""

    def finished(self, line: BatchLine, totals: BatchTotals) -> None:
        """A question's run ended."""

    def close(self) -> None:
        """Stop drawing. Safe to call twice."""


class NullProgress:
    def update(self, totals: BatchTotals) -> None:
        return None

    def finished(self, line: BatchLine, totals: BatchTotals) -> None:
        return None

    def close(self) -> None:
        return None


class PlainProgress:
    """One line per finished question, for a log."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def update(self, totals: BatchTotals) -> None:
        return None

    def finished(self, line: BatchLine, totals: BatchTotals) -> None:
        label = fmt.one_line(str(line.id), 40)
        run = f"run {line.run_id}, {fmt.seconds(line.duration_s)}, {fmt.cost(line.cost)}"
        if line.reached_answer:
            how = "answered"
        else:
            how = f"no answer: {fmt.one_line(line.failure_reason or 'the panel reached no answer', 120)}"
        self._stream.write(f"panel: [{totals.done}/{totals.questions}] question {label}: {how} ({run})\n")
        self._stream.flush()

    def close(self) -> None:
        return None


class BarProgress:
    """Rich's progress bar; nothing user-written is drawn in it, and markup is off all the same."""

    def __init__(self, console: Console, batch_id: str, totals: BatchTotals) -> None:
        self._progress = Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("· {task.fields[failed]} failed ·", markup=False),
            TimeRemainingColumn(),
            TextColumn("· {task.fields[usage]}", markup=False),
            console=console,
            speed_estimate_period=SPEED_WINDOW,
        )
        self._task: TaskID = self._progress.add_task(
            f"batch {batch_id}", total=totals.questions, completed=totals.done, failed=totals.failed, usage=totals.usage
        )
        self._progress.start()

    def update(self, totals: BatchTotals) -> None:
        self._progress.update(self._task, usage=totals.usage)

    def finished(self, line: BatchLine, totals: BatchTotals) -> None:
        self._progress.update(self._task, completed=totals.done, failed=totals.failed, usage=totals.usage)

    def close(self) -> None:
        self._progress.stop()


def make_progress(batch_id: str, totals: BatchTotals, *, json_mode: bool, quiet: bool) -> BatchProgress:
    """As a run's view is chosen (`panel_cli.view.base.make_view`): `--quiet` draws nothing;
    `--json` keeps stdout for the summary, so the bar goes to stderr on a terminal and
    nothing is drawn otherwise; a terminal gets the bar, a pipe plain lines on stderr."""
    if quiet:
        return NullProgress()
    console = Console(stderr=json_mode)
    if console.is_terminal:
        return BarProgress(console, batch_id, totals)
    return NullProgress() if json_mode else PlainProgress(sys.stderr)
