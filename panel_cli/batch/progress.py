"""How a person watches a batch: a Rich progress bar on a terminal (questions done of all,
how many without an answer, the time left, tokens and cost so far), one plain line per
finished question on a pipe, nothing with `--quiet`. A batch draws no run's live view: many
runs at once would fight over the screen, and the totals are what a batch is watched for."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TaskID, TextColumn
from rich.text import Text

from panel_cli.totals import RunTotals
from panel_cli.view import fmt

if TYPE_CHECKING:
    from panel_cli.batch.lines import BatchLine


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
    # Every call of this invocation's runs, counted as a run counts its own (`RunTotals`).
    spent: RunTotals = field(default_factory=RunTotals)

    @property
    def calls(self) -> int:
        return self.spent.calls

    @property
    def tokens(self) -> int | None:
        return self.spent.tokens

    @property
    def cost(self) -> float | None:
        return self.spent.run_cost

    def add_line(self, reached_answer: bool) -> None:
        self.done += 1
        self.failed += not reached_answer

    @property
    def usage(self) -> str:
        cost = fmt.basis_cost(self.cost, self.spent.cost_basis, self.spent.unpriced)
        return f"{fmt.tokens(self.tokens)} tokens · cost {cost}"


def time_left(durations: Sequence[float], remaining: int, concurrency: int) -> float | None:
    """Seconds until a batch ends: the questions left run `concurrency` at a time, each as long
    as the runs finished so far took on average; None until one has finished.

    A rate measured over the finished questions jumps, since runs started together end
    together: the first few end at once (a short estimate), then none for a while (a long
    one). The mean length of a run does not care when runs end."""
    if remaining <= 0:
        return 0.0
    if not durations:
        return None
    return sum(durations) / len(durations) * remaining / min(concurrency, remaining)


class TimeLeft:
    """The batch's time left as a person reads it: estimated anew (`time_left`) when a question
    ends, counting down in between, and never below zero."""

    def __init__(self, concurrency: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._concurrency = concurrency
        self._clock = clock
        self._durations: list[float] = []
        self._estimate: tuple[float, float] | None = None  # seconds left, and when they were

    def finished(self, duration: float | None, remaining: int) -> None:
        """A question's run ended after `duration` seconds; `remaining` questions are left."""
        if duration is not None:
            self._durations.append(duration)
        estimate = time_left(self._durations, remaining, self._concurrency)
        self._estimate = None if estimate is None else (estimate, self._clock())

    def seconds(self) -> float | None:
        if self._estimate is None:
            return None
        estimate, at = self._estimate
        return max(estimate - (self._clock() - at), 0.0)


class TimeLeftColumn(ProgressColumn):
    """`0:01:20` left, or `-:--:--` before the first question ends, as Rich writes time left."""

    def __init__(self, time_left: TimeLeft) -> None:
        super().__init__()
        self._time_left = time_left

    def render(self, task: Task) -> Text:
        seconds = self._time_left.seconds()
        if seconds is None:
            return Text("-:--:--", style="progress.remaining")
        minutes, second = divmod(round(seconds), 60)
        hours, minute = divmod(minutes, 60)
        return Text(f"{hours}:{minute:02d}:{second:02d}", style="progress.remaining")


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
        label = fmt.flat(str(line.id))  # an id is never cut
        run = f"run {line.run_id}, {fmt.seconds(line.duration_s)}, {fmt.basis_cost(line.cost, line.cost_basis)}"
        if line.reached_answer:
            how = "answered"
        else:
            how = f"no answer: {fmt.one_line(line.failure_reason or 'the panel reached no answer', 120)}"
        self._stream.write(f"panel: [{totals.done}/{totals.questions}] question {label}: {how} ({run})\n")
        self._stream.flush()

    def close(self) -> None:
        return None


class BarProgress:
    """Rich's progress bar; nothing user-written is drawn in it, and markup is off all the same.
    The time left is the batch's own (`TimeLeft`), not Rich's rate of progress."""

    def __init__(self, console: Console, batch_id: str, totals: BatchTotals, concurrency: int) -> None:
        self._time_left = TimeLeft(concurrency)
        self._progress = Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("· {task.fields[failed]} failed ·", markup=False),
            TimeLeftColumn(self._time_left),
            TextColumn("· {task.fields[usage]}", markup=False),
            console=console,
        )
        self._task: TaskID = self._progress.add_task(
            f"batch {batch_id}", total=totals.questions, completed=totals.done, failed=totals.failed, usage=totals.usage
        )
        self._progress.start()

    def update(self, totals: BatchTotals) -> None:
        self._progress.update(self._task, usage=totals.usage)

    def finished(self, line: BatchLine, totals: BatchTotals) -> None:
        self._time_left.finished(line.duration_s, totals.questions - totals.done)
        self._progress.update(self._task, completed=totals.done, failed=totals.failed, usage=totals.usage)

    def close(self) -> None:
        self._progress.stop()


def make_progress(
    batch_id: str, totals: BatchTotals, *, concurrency: int, json_mode: bool, quiet: bool
) -> BatchProgress:
    """As a run's view is chosen (`panel_cli.view.base.make_view`): `--quiet` draws nothing;
    `--json` keeps stdout for the summary, so the bar goes to stderr on a terminal and
    nothing is drawn otherwise; a terminal gets the bar, a pipe plain lines on stderr."""
    if quiet:
        return NullProgress()
    console = Console(stderr=json_mode)
    if console.is_terminal:
        return BarProgress(console, batch_id, totals, concurrency)
    return NullProgress() if json_mode else PlainProgress(sys.stderr)
