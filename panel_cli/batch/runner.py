"""Running a batch: the panel once per question, `concurrency` runs at a time, every run
stored with the batch's id and the question's key, every finished question a line of the
results file.

The runs share one store (one writer, one connection) and one set of per-endpoint limits, so
the panel's `concurrency` per endpoint holds across all of them; each run has its own event
bus and run id. A run that raises is a question without an answer, and the batch goes on; a
`PanelError` (the store cannot be written, say) stops the whole batch, since every other run
would meet it too. Cancelled (Ctrl-C, SIGTERM), every run in flight is stored as
interrupted, and the finished ones stay: resuming the batch runs only the others.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from panel_cli.batch.lines import BatchLine
from panel_cli.batch.progress import BatchProgress, BatchTotals
from panel_cli.batch.questions import BatchQuestion
from panel_cli.config import Panel
from panel_cli.errors import PanelError, UserError
from panel_cli.events import BaseEvent, CallFailed, CallFinished
from panel_cli.redact import redact_obj
from panel_cli.run_keys import BATCH_TAG
from panel_cli.runs.execute import SharedCalls, new_run_id, run_panel
from panel_cli.runs.outcome import CallsByStatus, SpentAnew
from panel_cli.runs.prepare import PreparedRun, run_budget
from panel_cli.totals import RunTotals

if TYPE_CHECKING:
    from panel_cli.protocols.base import Engine
    from panel_cli.runs.resume import TakenOver
    from panel_cli.store.records import BatchRun
    from panel_cli.store.subscriber import TranscriptStore

# The tag that names the question a run answered (`BatchQuestion.key`).
QUESTION_TAG = "question"


class BatchSummary(BaseModel):
    """What `panel batch --json` prints at the end. `skipped` questions had a finished run
    from an earlier invocation; `ran` were run now; `answered` and `no_answer` count every
    question of the batch (of the slice, with --shard); calls, tokens and cost are this
    invocation's (None: no call reported them), its reused calls (a resumed question's)
    among them, split out as a run's are: `calls_by_status`, and `spent_anew` (null when none
    was reused)."""

    batch_id: str
    questions: int
    skipped: int
    ran: int
    answered: int
    no_answer: int
    calls: int
    tokens: int | None
    cost: float | None
    cost_basis: str = "unknown"
    calls_by_status: CallsByStatus = Field(default_factory=CallsByStatus)
    spent_anew: SpentAnew | None = None
    output: str
    db: str


def finished_runs(runs: Sequence[BatchRun]) -> dict[str, BatchRun]:
    """The finished run of each question (by key) among a batch's runs, the latest if
    several: with an answer or without one, a finished run is not made again. Interrupted,
    failed and crashed runs do not count."""
    finished: dict[str, BatchRun] = {}
    for run in runs:
        key = run.tags.get(QUESTION_TAG)
        if isinstance(key, str) and run.status in ("finished", "no_answer"):
            finished[key] = run
    return finished


def question_panel(panel: Panel, question: BatchQuestion) -> Panel:
    """The panel a question runs on: a question's own options replace the panel's."""
    return panel.model_copy(update={"options": question.options}) if question.options else panel


class ResultsFile:
    """`--output`, JSONL: rewritten in full when the batch starts (with what earlier
    invocations finished) and when it ends (every line in question order), and appended to
    as each run finishes in between, so an interrupted batch keeps every finished line."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def rewrite(self, lines: Sequence[BatchLine]) -> None:
        partial = self.path.with_name(f".{self.path.name}.partial")
        try:
            with partial.open("w", encoding="utf-8") as file:
                file.writelines(_jsonl(line) for line in lines)
            os.replace(partial, self.path)
        except OSError as error:
            raise UserError(f"Cannot write the results to {self.path}: {error.strerror}.") from error

    def append(self, line: BatchLine) -> None:
        try:
            with self.path.open("a", encoding="utf-8") as file:
                file.write(_jsonl(line))
        except OSError as error:
            raise UserError(f"Cannot write the results to {self.path}: {error.strerror}.") from error


def _jsonl(line: BatchLine) -> str:
    return json.dumps(line.model_dump(mode="json"), ensure_ascii=False) + "\n"


class RunUsage:
    """A run's view in a batch: it draws nothing. It counts the run's own calls, tokens and
    cost (`run`: what the line of a run that raised reports), and adds each call to the
    batch's totals as it ends, so the progress shows spending as it happens."""

    def __init__(self, totals: BatchTotals, progress: BatchProgress) -> None:
        self.run = RunTotals()
        self._totals = totals
        self._progress = progress

    async def __call__(self, event: BaseEvent) -> None:
        self.run.update(event)
        refused = isinstance(event, CallFailed) and event.kind == "budget"  # no request went out
        if isinstance(event, CallFinished | CallFailed) and not refused:
            self._totals.spent.update(event)
            self._progress.update(self._totals)

    def close(self) -> None:
        return None


class BatchRunner:
    """One invocation of a batch: `questions` are those still to run (the others are in
    `lines` already, from the store), in file order; `taken_over`, by question key, the stopped
    run a question resumes (`panel_cli.batch.resume`)."""

    def __init__(
        self,
        *,
        batch_id: str,
        engine: Engine,
        panel: Panel,
        questions: Sequence[BatchQuestion],
        lines: dict[str, BatchLine],
        warnings: Sequence[str],
        secrets: Sequence[str],
        db_path: Path,
        output: ResultsFile,
        concurrency: int,
        totals: BatchTotals,
        progress: BatchProgress,
        taken_over: Mapping[str, TakenOver] | None = None,
    ) -> None:
        self.batch_id = batch_id
        self.engine = engine
        self.panel = panel
        self.questions = list(questions)
        self.lines = lines
        self.warnings = list(warnings)
        self.secrets = list(secrets)
        self.db_path = db_path
        self.output = output
        self.concurrency = concurrency
        self.totals = totals
        self.progress = progress
        self.taken_over = dict(taken_over or {})

    async def run(self) -> None:
        """Every question still to run; the store and the HTTP clients are closed however it ends."""
        from panel_cli.store.subscriber import TranscriptStore

        store = await TranscriptStore.open(self.db_path)
        shared = SharedCalls()
        pending = iter(self.questions)
        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(min(self.concurrency, len(self.questions))):
                    group.create_task(self._work(pending, store, shared))
        except ExceptionGroup as failed:
            # The first error stopped the batch; the others are the same error met by other runs.
            raise failed.exceptions[0] from None
        finally:
            await shared.aclose()
            await store.close()

    async def _work(self, pending: Iterator[BatchQuestion], store: TranscriptStore, shared: SharedCalls) -> None:
        """One of `concurrency` workers: each takes the next question as soon as its run ends."""
        for question in pending:
            await self._run_one(question, store, shared)

    async def _run_one(self, question: BatchQuestion, store: TranscriptStore, shared: SharedCalls) -> None:
        run_id = new_run_id()
        started = time.perf_counter()
        usage = RunUsage(self.totals, self.progress)
        # A question whose run stopped goes on from it, on the panel that run ran (`take_over`).
        taken = self.taken_over.get(question.key)
        panel = taken.panel if taken is not None else question_panel(self.panel, question)
        try:
            # The file's `defaults.max_cost` caps each run, as it caps a run of the panel alone.
            prepared = PreparedRun(
                engine=self.engine,
                panel=panel,
                question=question.question,
                warnings=self.warnings,
                secrets=self.secrets,
                budget=run_budget(panel, allow_flag=False),
                continuing=taken.continuing if taken is not None else None,
            )
            outcome = await run_panel(
                prepared,
                store=store,
                view=usage,
                shared=shared,
                tags={BATCH_TAG: self.batch_id, QUESTION_TAG: question.key},
                run_id=run_id,
            )
        except PanelError:
            raise
        except Exception as error:
            line = BatchLine(
                id=question.label,
                question=question.question,
                run_id=run_id,
                final_answer=None,
                reached_answer=False,
                failure_reason=f"the run failed: {type(error).__name__}: {error}",
                calls=usage.run.calls,
                tokens=usage.run.tokens,
                cost=usage.run.run_cost,
                cost_basis=usage.run.cost_basis,
                duration_s=round(time.perf_counter() - started, 3),
            )
        else:
            line = BatchLine.of(question, outcome)
        line = BatchLine.model_validate(redact_obj(line.model_dump(mode="json"), self.secrets))
        self.lines[question.key] = line
        self.output.append(line)
        self.totals.add_line(line.reached_answer)
        self.progress.finished(line, self.totals)
