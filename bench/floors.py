"""Floors the benchmarks share: programs that do a job with no panel code, to divide by."""

from __future__ import annotations

import asyncio
import json
from typing import Any

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


async def bare_confer(
    litellm: Any, url: str, key: str, *, members: int, stages: int, question: str, stream: bool
) -> None:
    """confer's stages made with `litellm.acompletion` alone: every member answers (streamed,
    its usage at the end, as panel asks on a terminal, when `stream`), then `stages - 1` vote
    rounds whose prompts quote every answer, each stage's calls at once."""

    async def call(member: int, content: str, streamed: bool = False) -> str:
        extra: dict[str, Any] = {"stream": True, "stream_options": {"include_usage": True}} if streamed else {}
        response = await litellm.acompletion(
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
