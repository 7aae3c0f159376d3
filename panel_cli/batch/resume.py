"""Where an invocation of a batch starts from: the questions that already have a finished run
(their lines are kept), and the runs that stopped before their end (interrupted, failed,
crashed), which their questions resume, reusing every call those runs got answered.

Claims (`panel_cli.store.claims`) keep two invocations of one batch from running the same
questions at once: the batch (its slice, with `--shard`) is claimed before anything is read,
then each run to resume, so a `panel resume` of one of them cannot run alongside. The claims
are held until the invocation ends (`BatchStart.release`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from panel_cli.batch.lines import BatchLine
from panel_cli.batch.questions import BatchQuestion
from panel_cli.batch.runner import QUESTION_TAG, finished_runs
from panel_cli.config import Panel
from panel_cli.errors import UserError
from panel_cli.runs.resume import TakenOver, answered_count, take_over
from panel_cli.store.claims import Claim, release_claims, take_claims
from panel_cli.store.reader import TranscriptReader
from panel_cli.store.records import BatchRun

# What a run of a batch that stopped before its end is listed as: its question resumes it.
STOPPED = ("interrupted", "failed", "stale")


@dataclass
class BatchStart:
    """`lines`: the results of the questions with a finished run, by key; `taken_over`: the
    stopped run each unfinished question resumes, by key; `claims`: what this invocation holds."""

    lines: dict[str, BatchLine] = field(default_factory=dict)
    taken_over: dict[str, TakenOver] = field(default_factory=dict)
    claims: list[Claim] = field(default_factory=list)

    @property
    def answered(self) -> int:
        """The answered calls the resumed questions can take instead of asking again."""
        return sum(answered_count(taken.continuing) for taken in self.taken_over.values())

    def release(self) -> None:
        release_claims(self.claims)


def batch_start(
    db_path: Path,
    batch_id: str,
    panel: Panel,
    questions: Sequence[BatchQuestion],
    *,
    resuming: bool,
    slices: tuple[int, int] | None = None,
) -> BatchStart:
    """Claim the batch (its slice), then read where it stands. Resuming, the batch must exist and
    have run this panel's protocol; starting (a slice's id is not random), it must not exist
    yet. Raises UserError (the claims released) for either, or for a claim another process holds."""
    target = batch_id if slices is None else f"{batch_id} {slices[0]}/{slices[1]}"
    start = BatchStart(claims=take_claims(db_path, [("batch", target)]))
    try:
        with TranscriptReader.open(db_path) as reader:
            runs = reader.batch_runs(batch_id)
        _check(db_path, batch_id, panel, runs, resuming=resuming)
        finished = finished_runs(runs)
        start.lines = {
            question.key: BatchLine.stored(question, finished[question.key])
            for question in questions
            if question.key in finished
        }
        stopped = stopped_runs(runs, {question.key for question in questions} - set(start.lines))
        if stopped:
            start.claims += take_claims(db_path, [("run", run.id) for run in stopped.values()])
            with TranscriptReader.open(db_path) as reader:
                for key, run in stopped.items():
                    if (taken := take_over(reader, run.id)) is not None:
                        start.taken_over[key] = taken
    except BaseException:
        start.release()
        raise
    return start


def stopped_runs(runs: Sequence[BatchRun], keys: set[str]) -> dict[str, BatchRun]:
    """For each question of `keys`, its latest run if that one stopped before its end (a
    question whose latest run another run took over, outside the batch, starts afresh)."""
    latest: dict[str, BatchRun] = {}
    for run in runs:  # oldest first
        key = run.tags.get(QUESTION_TAG)
        if isinstance(key, str) and key in keys:
            latest[key] = run
    return {key: run for key, run in latest.items() if run.status in STOPPED}


def _check(db_path: Path, batch_id: str, panel: Panel, runs: Sequence[BatchRun], *, resuming: bool) -> None:
    if not resuming:
        if runs:
            raise UserError(f"Batch {batch_id} already has runs in {db_path}; continue it with --resume {batch_id}.")
        return
    if not runs:
        raise UserError(f"No batch has the id '{batch_id}' in {db_path}; a batch's id is printed when it starts.")
    protocols = {run.protocol for run in runs}
    if panel.protocol not in protocols:
        raise UserError(
            f"Batch {batch_id} ran {', '.join(sorted(protocols))}, and this panel runs {panel.protocol}; resume it with its own panel file."
        )
