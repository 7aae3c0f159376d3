"""What every protocol shares: the engine signature, stage deadlines, and the run envelope
(run started, then finished / failed / interrupted) around an engine."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from pydantic import BaseModel

from panel_cli.config import Panel
from panel_cli.events import BaseEvent, MemberInfo, RunFailed, RunFinished, RunInterrupted, RunStarted
from panel_cli.llm.gateway import Gateway

Emit = Callable[[BaseEvent], Awaitable[Any]]

# SPEC: a stage of answers, votes or reviews waits at most 5 minutes unless the panel says otherwise.
DEFAULT_STAGE_TIMEOUT = 300.0


class ProtocolResult(BaseModel):
    """Every result says what the final answer is and whether the protocol reached one."""

    final_answer: str | None

    @property
    def reached_answer(self) -> bool:
        return self.final_answer is not None


class Engine(Protocol):
    async def __call__(self, panel: Panel, question: str, gateway: Gateway, emit: Emit) -> ProtocolResult: ...


def stage_deadline(seconds: float | None) -> float | None:
    """A stage's end as a `loop.time()` instant, which the gateway never lets a call pass."""
    return None if seconds is None else asyncio.get_running_loop().time() + seconds


def labels_for(count: int) -> list[str]:
    """A, B, …, Z, then AA, AB, … so a panel of any size has labels."""
    out = []
    for index in range(count):
        label, n = "", index
        while True:
            label = chr(ord("A") + n % 26) + label
            n = n // 26 - 1
            if n < 0:
                break
        out.append(label)
    return out


async def run_engine(engine: Engine, panel: Panel, question: str, gateway: Gateway, emit: Emit) -> ProtocolResult:
    """Run an engine inside the run envelope, so a store or view always sees how it ended."""
    await emit(
        RunStarted(
            protocol=panel.protocol,
            panel=panel.name,
            question=question,
            members=[MemberInfo(name=m.name, model=m.model) for m in panel.members],
            config=panel.model_dump(mode="json", exclude_none=True),
        )
    )
    try:
        result = await engine(panel, question, gateway, emit)
    except (asyncio.CancelledError, KeyboardInterrupt):
        await asyncio.shield(emit(RunInterrupted()))
        raise
    except Exception as exc:
        await emit(RunFailed(message=f"{type(exc).__name__}: {exc}"))
        raise
    await emit(
        RunFinished(final_answer=result.final_answer, reached_answer=result.reached_answer, result=result.model_dump(mode="json"))
    )
    return result
