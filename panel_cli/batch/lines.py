"""One line of a batch's results file (JSONL): a question and how its run ended, from a run
made now (`of`) or one an earlier invocation of the batch finished (`stored`). Apart from
the runner, so that the progress view draws a line without importing the runner that writes it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel

from panel_cli.batch.questions import BatchQuestion

if TYPE_CHECKING:
    from panel_cli.runs.outcome import RunOutcome
    from panel_cli.store.records import BatchRun


class BatchLine(BaseModel):
    """One line of the results file: a question (its id, else its line number) and how its
    run ended. `failure_reason` says why there is no answer."""

    id: str | int
    question: str
    run_id: str | None
    final_answer: str | None
    reached_answer: bool
    failure_reason: str | None = None
    calls: int
    tokens: int | None
    cost: float | None
    cost_basis: str = "unknown"
    duration_s: float | None

    @classmethod
    def stored(cls, question: BatchQuestion, run: BatchRun) -> BatchLine:
        """The line of a question an earlier invocation of the batch answered."""
        duration = None if run.duration_s is None else round(run.duration_s, 3)
        return cls(
            id=question.label,
            question=question.question,
            run_id=run.id,
            final_answer=run.final_answer,
            reached_answer=run.reached_answer,
            failure_reason=run.failure_reason,
            calls=run.calls,
            tokens=run.tokens,
            cost=run.cost,
            cost_basis=run.cost_basis,
            duration_s=duration,
        )

    @classmethod
    def of(cls, question: BatchQuestion, outcome: RunOutcome) -> BatchLine:
        envelope = outcome.envelope
        return cls(
            id=question.label,
            question=question.question,
            run_id=envelope.run_id,
            final_answer=envelope.final_answer,
            reached_answer=envelope.reached_answer,
            failure_reason=outcome.result.failure_reason,
            calls=envelope.calls,
            tokens=envelope.tokens,
            cost=envelope.cost,
            cost_basis=envelope.cost_basis,
            duration_s=envelope.duration_s,
        )
