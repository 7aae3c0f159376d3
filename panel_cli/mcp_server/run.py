"""One panel run for one MCP request, on the run core as `panel batch` uses it: no terminal, the
store opened for the run and closed after it, the request's progress as the run's only view.

`run_for_request` is the one place a request becomes a run, so that switching to the Python
API's entry coroutine (`panel_cli.arun`) is a change to this module alone.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from panel_cli.runs.controls import RunControls
from panel_cli.runs.execute import run_panel
from panel_cli.runs.loader import GatewayLoader
from panel_cli.runs.outcome import RunOutcome
from panel_cli.runs.panels import RunPanel
from panel_cli.runs.prepare import prepare_run

if TYPE_CHECKING:
    from panel_cli.store.subscriber import TranscriptStore
    from panel_cli.view.base import View


@dataclass(frozen=True)
class FinishedRun:
    """A run's outcome, the secrets to scrub from whatever is made of it (its result is not
    scrubbed: `run_panel`), and what the store could not keep of it (None: everything)."""

    outcome: RunOutcome
    secrets: list[str]
    store_failure: str | None = None


async def run_for_request(
    chosen: RunPanel, question: str, *, controls: RunControls, db_path: Path, progress: View, run_id: str
) -> FinishedRun:
    """Run `chosen` on `question` to its end, stored in `db_path` as run `run_id`. Raises
    UserError for what stops a run before its first call (a missing key, a model litellm cannot
    route, an unknown price under the cap); cancelled, the run is stored `interrupted`, as on
    Ctrl-C, and CancelledError propagates. The checks before the run block (litellm's import),
    so they run in a thread; what they say (a key sent to a host not its provider's) goes to
    stderr, never to stdout, which stdio uses for the protocol."""
    from panel_cli.store.subscriber import TranscriptStore

    prepared = await asyncio.to_thread(
        prepare_run,
        GatewayLoader(),
        chosen.panel,
        question,
        warnings=chosen.warnings,
        controls=controls,
        db_path=db_path,
        console=Console(stderr=True),
        show_progress=False,
    )
    store = await TranscriptStore.open(db_path)
    try:
        outcome = await run_panel(prepared, store=store, view=progress, run_id=run_id)
    except BaseException:
        # Cancelled or failed, the run's last events are written as the store closes.
        if failure := await closed(store):
            sys.stderr.write(f"panel mcp: {failure}\n")
        raise
    return FinishedRun(outcome=outcome, secrets=list(prepared.secrets), store_failure=await closed(store))


async def closed(store: TranscriptStore) -> str | None:
    """Close `store`; what it could not write, if anything."""
    from panel_cli.store.subscriber import StoreFailure

    try:
        await store.close()
    except StoreFailure as failure:
        return failure.message
    return None
