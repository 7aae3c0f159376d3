"""Real runs of every protocol (the shipped demo panels, the demo provider), stored and
recorded side by side, so a test can compare what the store gives back with what was emitted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from panel_cli.config import Panel, load_panel
from panel_cli.events import BaseEvent, EventBus
from panel_cli.llm.gateway import Gateway
from panel_cli.protocols.base import Engine
from panel_cli.protocols.confer.engine import confer
from panel_cli.protocols.council.engine import council
from panel_cli.protocols.delphi.engine import delphi
from panel_cli.protocols.ensemble.engine import ensemble
from panel_cli.protocols.orchestrate.engine import orchestrate
from panel_cli.protocols.supervise.engine import supervise
from panel_cli.protocols.vote.engine import decide, vote
from panel_cli.runs.execute import run_engine
from panel_cli.store.subscriber import TranscriptStore

ROOT = Path(__file__).resolve().parents[2]
ENGINES: dict[str, tuple[Engine, str]] = {
    "confer": (confer, "demo.yaml"),
    "council": (council, "council.yaml"),
    "ensemble": (ensemble, "ensemble.yaml"),
    "vote": (vote, "vote.yaml"),
    "decide": (decide, "decide.yaml"),
    "delphi": (delphi, "delphi.yaml"),
    "supervise": (supervise, "supervise.yaml"),
    "orchestrate": (orchestrate, "orchestrate.yaml"),
}


class Recorder:
    """Every event as the store receives it: the payload the bus stamped, messages included."""

    def __init__(self) -> None:
        self.payloads: list[dict[str, Any]] = []

    async def __call__(self, event: BaseEvent) -> None:
        self.payloads.append(event.model_dump(mode="json"))


def demo_panel(protocol: str) -> Panel:
    panel = load_panel(ROOT / "configs" / ENGINES[protocol][1]).model_copy(update={"protocol": protocol})
    return panel.model_copy(update={"mode": "majority"}) if protocol == "ensemble" else panel


async def stored_run(
    path: Path, run_id: str, protocol: str, question: str | None = None, panel: Panel | None = None
) -> Recorder:
    """Run `protocol` for real into the store at `path`; the recorder saw the same events."""
    panel = panel or demo_panel(protocol)
    recorder = Recorder()
    async with await TranscriptStore.open(path) as store:
        bus = EventBus(run_id, [store, recorder])
        gateway = Gateway(bus.emit, defaults=panel.defaults, concurrency=panel.concurrency)
        try:
            await run_engine(ENGINES[protocol][0], panel, question or panel.question or "What now?", gateway, bus)
        finally:
            await gateway.aclose()
    return recorder
