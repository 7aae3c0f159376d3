"""A batch counts each call as it ends, and counts exactly the calls each run's line reports."""

from __future__ import annotations

from panel_cli.batch.progress import BatchTotals
from panel_cli.batch.runner import RunUsage
from panel_cli.events import CallFailed, CallFinished, CallStarted, CallTextGrew, RunStarted


class Progress:
    def __init__(self) -> None:
        self.updates = 0

    def update(self, totals: BatchTotals) -> None:
        self.updates += 1


ROUTE = {"member": "ann", "model": "openai/gpt-4o", "stage": "answer", "round": 0}


async def test_a_call_the_budget_refused_is_no_call_of_the_batch_as_of_its_run() -> None:
    totals, progress = BatchTotals(questions=1), Progress()
    usage = RunUsage(totals, progress)
    for event in [
        RunStarted(protocol="confer", panel="p", question="Q?", members=[], ts=1.0),
        CallStarted(call_id="c1", **ROUTE),
        CallTextGrew(call_id="c1", text="so far", **ROUTE),
        CallFinished(call_id="c1", text="A", tokens_in=10, tokens_out=5, cost=0.5, latency=1.0, **ROUTE),
        CallFailed(call_id="c2", kind="timeout", message="timed out", latency=2.0, **ROUTE),
        CallFailed(call_id="c3", kind="budget", message="not made: over budget", latency=0.0, attempts=0, **ROUTE),
    ]:
        await usage(event)

    assert (totals.calls, totals.tokens, totals.cost) == (2, 15, 0.5)
    assert (usage.run.calls, usage.run.refused) == (2, 1)
    assert progress.updates == 2
