"""An eval kept in the transcript store and read back: the runner's recorder over the store's
`EvalWriter`, and the `EvalResult` of a stored eval, summarized again from its items."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from panel_cli.errors import UserError
from panel_cli.eval.results import EvalResult, ItemResult, summarize
from panel_cli.store.evals import EvalWriter, StoredEval

# What the items decide, computed again whenever an eval is read (`summarize`): not stored.
DERIVED = {"items", "asked", "systems", "comparisons", "pairs", "departures"}


def summary_of(result: EvalResult) -> dict[str, Any]:
    """The eval as its row keeps it: everything but its questions, its items and what they decide."""
    return result.model_dump(mode="json", exclude=DERIVED)


class EvalRecording:
    """The runner's recorder (`runner.EvalRecorder`), writing through an `EvalWriter`."""

    def __init__(self, writer: EvalWriter) -> None:
        self._writer = writer

    def begin(self, result: EvalResult) -> None:
        self._writer.begin(summary_of(result), [question.model_dump(mode="json") for question in result.asked])

    def update(self, result: EvalResult) -> None:
        self._writer.update(summary_of(result))

    def item(self, item: ItemResult) -> None:
        self._writer.item(item.model_dump(mode="json"))

    def end(self, status: str) -> None:
        self._writer.end(status)


def stored_result(stored: StoredEval) -> EvalResult:
    """A stored eval as a result: its summary, questions and items, summarized again. One
    this version cannot read (a newer panel's, a damaged row) is refused in one sentence."""
    fields = {**stored.summary, "status": stored.row.status, "asked": stored.questions, "items": stored.items}
    try:
        return summarize(EvalResult.model_validate(fields))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "eval"
        raise UserError(
            f"Eval {stored.row.id} cannot be read by this version of panel ({where}: {first['msg']})."
        ) from None
