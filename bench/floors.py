"""Floors the benchmarks share: programs that do a bench's job without panel, to divide by.

A floor that calls models uses litellm one of two ways, and a bench that prints a ratio to
one says which:
- as panel sets it up (`PANEL_SETUP`): litellm loaded by panel's own `load_litellm` (its
  settings, the import with the garbage collector off and frozen after, its two private hooks)
  and each call made inside the gateway's quiet-call context, which engages the hooks:
  litellm then skips its per-call cost calculation and success logging, as it does for
  panel's calls. What panel does above this floor is panel's own work.
- out of the box (`OUT_OF_THE_BOX`): `import litellm` and nothing else, as a script using it
  would. litellm does its bookkeeping for every call, so panel may well spend less than this.
panel's set-up is imported from panel, never copied, in `panel_setup` alone, so the floor
follows the product when the set-up changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import ModuleType
from typing import Any, NamedTuple

VOTE_MARKER = "[panel-task: confer.vote]"  # how the benches' fake server tells a vote prompt

# The floor of any Typer CLI's help: a minimal two-command app, no completion options.
TYPER_FLOOR = '''\
import typer

app = typer.Typer(add_completion=False)


@app.command()
def hello(name: str) -> None:
    """Say hello."""
    print(f"hello {name}")


@app.command()
def bye(name: str, loud: bool = False) -> None:
    """Say goodbye."""
    print(f"bye {name}")


if __name__ == "__main__":
    app()
'''


PANEL_SETUP = "as-panel"
OUT_OF_THE_BOX = "out-of-the-box"
# What each set-up is called wherever a bench prints a figure measured against it.
FLOOR_NAMES = {PANEL_SETUP: "litellm as panel sets it up", OUT_OF_THE_BOX: "litellm out of the box"}


class LitellmFloor(NamedTuple):
    """litellm, and the context each of the floor's calls is made in (the whole call: a
    stream is read to its end inside it, as the gateway reads one)."""

    litellm: ModuleType
    around_call: Callable[[], AbstractContextManager[None]]


def panel_setup() -> tuple[Callable[[], ModuleType], Callable[[], AbstractContextManager[None]]]:
    """panel's `load_litellm` and the context of the gateway's own calls: imported, so the
    floor tracks the product. The benches' one import of them."""
    from panel_cli.llm.litellm_setup import load_litellm, quiet_call

    return load_litellm, quiet_call


def litellm_floor(setup: str) -> LitellmFloor:
    """litellm set up as `setup` (`PANEL_SETUP` or `OUT_OF_THE_BOX`) names. One process holds
    one set-up: `load_litellm` changes the module and freezes the collector for the process."""
    if setup == OUT_OF_THE_BOX:
        import litellm

        return LitellmFloor(litellm, contextlib.nullcontext)
    if setup != PANEL_SETUP:
        raise ValueError(f"no floor set-up named {setup!r}")
    load_litellm, quiet_call = panel_setup()
    return LitellmFloor(load_litellm(), quiet_call)


async def bare_confer(
    floor: LitellmFloor, url: str, key: str, *, members: int, stages: int, question: str, stream: bool
) -> None:
    """confer's stages made with `litellm.acompletion` alone: every member answers (streamed,
    its usage at the end, as panel asks on a terminal, when `stream`), then `stages - 1` vote
    rounds whose prompts quote every answer, each stage's calls at once."""

    async def call(member: int, content: str, streamed: bool = False) -> str:
        extra: dict[str, Any] = {"stream": True, "stream_options": {"include_usage": True}} if streamed else {}
        with floor.around_call():
            response = await floor.litellm.acompletion(
                model=f"openai/m{member}",
                messages=[{"role": "user", "content": content}],
                api_base=url,
                api_key=key,
                max_retries=0,
                **extra,
            )
            if streamed:
                return "".join([chunk.choices[0].delta.content or "" async for chunk in response if chunk.choices])
            return response.choices[0].message.content

    answers = await asyncio.gather(*(call(member, question, stream) for member in range(members)))
    for _ in range(stages - 1):
        block = "\n\n".join(f"=== Answer {index} ===\n{text}" for index, text in enumerate(answers))
        prompt = f"{question}\n\n{block}\n\n{VOTE_MARKER}"
        votes = await asyncio.gather(*(call(member, prompt) for member in range(members)))
        answers = [json.loads(vote)["revised_answer"] for vote in votes]
