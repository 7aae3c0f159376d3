"""One panel run for one MCP request, on the run core as the Python API uses it
(`panel_cli.runs.ask`): no terminal, the store opened for the run and closed after it, the
request's progress as the run's only view, and litellm's clients shared with the requests in
flight beside it (`calls_in_flight`), so the first run to end never closes them under another.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from panel_cli.runs.ask import calls_in_flight, run_stored
from panel_cli.runs.controls import RunControls
from panel_cli.runs.loader import GatewayLoader
from panel_cli.runs.outcome import RunOutcome
from panel_cli.runs.panels import RunPanel
from panel_cli.runs.prepare import prepare_run

if TYPE_CHECKING:
    from panel_cli.view.base import View


@dataclass(frozen=True)
class FinishedRun:
    """A run's outcome, the secrets to scrub from whatever is made of it (its result is not
    scrubbed), and what the store could not keep of it (None: everything)."""

    outcome: RunOutcome
    secrets: list[str]
    store_failure: str | None = None


def say_on_stderr(line: str) -> None:
    """A notice before the run (a key sent to a host not its provider's): stdio's stdout carries
    the protocol alone."""
    sys.stderr.write(line + "\n")


async def run_for_request(
    chosen: RunPanel, question: str, *, controls: RunControls, db_path: Path, progress: View, run_id: str
) -> FinishedRun:
    """Run `chosen` on `question` to its end, stored in `db_path` as run `run_id`. Raises
    UserError for what stops a run before its first call (a missing key, a model litellm cannot
    route, an unknown price under the cap); cancelled, the run is stored `interrupted`, as on
    Ctrl-C, and CancelledError propagates. The checks before the run block on litellm's import,
    so they run in a thread."""
    prepared = await asyncio.to_thread(
        prepare_run,
        GatewayLoader(),
        chosen.panel,
        question,
        warnings=chosen.warnings,
        controls=controls,
        db_path=db_path,
        gate=chosen.gate,
        notify=say_on_stderr,
    )
    async with calls_in_flight() as shared:
        finished = await run_stored(prepared, db_path=db_path, view=progress, run_id=run_id, shared=shared)
    failure = finished.store_failure.message if finished.store_failure is not None else None
    return FinishedRun(outcome=finished.outcome, secrets=list(prepared.secrets), store_failure=failure)
