"""The model's side of tool use: the tools a member is offered (function specs and where each
leads), the tool calls a reply asks for, and how their results go back to the model.

A tool result is untrusted text, like another member's answer: it is fenced with the run's
tag (`tasks.render_labelled`) and handed to the model only. Nothing ever parses it for a vote,
a ranking or a verdict: tools serve free-text stages alone. Which tools exist, and how a call
reaches its server, is `panel_cli.tools`' part.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from panel_cli.tasks import find_task, mark, render_labelled
from panel_cli.untrusted import clean_text, load_json

RESULT_NOUN = "Tool result"
# The one result that stands for every call of a reply past the tool budget.
NOT_RUN_LABEL = "not run"

ToolStatus = Literal["ok", "failed", "timeout"]


@dataclass(frozen=True)
class ToolOutcome:
    """What one tool call gave: `text` (its result, capped, or the error's words) for the
    model; `chars` the size before the cap; `error` None when it worked. `stopped` is set,
    once, when this call found the server gone: the run warns about it."""

    text: str
    chars: int
    truncated: bool
    status: ToolStatus
    error: str | None = None
    stopped: str | None = None


def failed(message: str, status: ToolStatus = "failed") -> ToolOutcome:
    """A tool call that gave no result. The message may quote the server (its error's words,
    its last line on stderr), so it is cleaned as a result is."""
    message = clean_text(message)
    return ToolOutcome(text=f"Error: {message}", chars=0, truncated=False, status=status, error=message)


@dataclass(frozen=True)
class ToolRoute:
    """Where a function offered to a model leads: a server and the tool's own name there."""

    server: str
    tool: str


@dataclass
class ToolSet:
    """The tools one member is offered: the function specs sent with its requests, and the
    server and tool behind each function name."""

    specs: list[dict[str, Any]] = field(default_factory=list)
    routes: dict[str, ToolRoute] = field(default_factory=dict)

    def of_servers(self, servers: list[str]) -> ToolSet:
        """Only the tools of these servers, under the names they have in the whole set."""
        names = [name for name, route in self.routes.items() if route.server in servers]
        specs = [spec for spec in self.specs if spec["function"]["name"] in names]
        return ToolSet(specs=specs, routes={name: self.routes[name] for name in names})


@dataclass(frozen=True)
class RequestedCall:
    """One tool call a reply asks for: the provider's id for it, the function and its
    arguments as the model wrote them (JSON text, not yet trusted)."""

    id: str
    name: str
    arguments: str


def not_run(count: int) -> str:
    """What the model is told of the calls it asked for past its budget: one line for all."""
    calls = "call" if count == 1 else "calls"
    return f"Not run: {count:,} more tool {calls}; your tool budget for this stage is spent."


def requested_calls(message: Any) -> list[RequestedCall]:
    """The tool calls an assistant message (litellm's) asks for, their text without lone
    surrogates; [] when it asks for none."""
    found: list[RequestedCall] = []
    for index, call in enumerate(getattr(message, "tool_calls", None) or []):
        function = getattr(call, "function", None)
        name = getattr(function, "name", None)
        if not isinstance(name, str):
            continue
        arguments = getattr(function, "arguments", None)
        call_id = getattr(call, "id", None)
        found.append(
            RequestedCall(
                id=clean_text(call_id) if isinstance(call_id, str) and call_id else f"call_{index}",
                name=clean_text(name),
                arguments=clean_text(arguments) if isinstance(arguments, str) else _dumped(arguments),
            )
        )
    return found


def _dumped(arguments: Any) -> str:
    """Arguments a provider gave as an object rather than JSON text, as text (nothing ever
    trusts them: `parse_arguments` reads them back, bounded)."""
    try:
        return json.dumps(arguments or {})
    except (TypeError, ValueError, RecursionError):
        return ""


def parse_arguments(text: str) -> dict[str, Any] | None:
    """The arguments as a JSON object (an empty text is no arguments), bounded in depth and
    numbers (`panel_cli.untrusted`); None when they are not one."""
    if not text.strip():
        return {}
    try:
        value = load_json(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def assistant_message(text: str | None, calls: list[RequestedCall]) -> dict[str, Any]:
    """The model's turn asking for tools, as the next request repeats it."""
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls
        ],
    }


def result_label(number: int, name: str) -> str:
    return f"{number}: {name}"


def result_message(call: RequestedCall, number: int, text: str) -> dict[str, Any]:
    """A tool's result (or its error) for the model, fenced like any quoted text."""
    return {
        "role": "tool",
        "tool_call_id": call.id,
        "content": render_labelled({result_label(number, call.name): text}, RESULT_NOUN),
    }


def with_results(messages: list[dict[str, Any]], results: dict[str, str]) -> list[dict[str, Any]]:
    """The first request again, its last message now carrying every tool result (label ->
    text): the final request once the budget is spent, made without tools. Plain text rather
    than tool messages, which several providers refuse in a request that offers no tools. The
    results go before the task marker, so no result can stand in for the request."""
    last = dict(messages[-1])
    content = str(last.get("content") or "")
    task = find_task(content)
    marker = mark("", task) if task is not None else ""
    body = content.removesuffix(marker) if marker and content.endswith(marker) else content
    note = (
        "You called tools for this; their results follow. Your tool budget for this stage is spent, so no "
        "further tool call can be made: answer now, from these results and what you know."
    )
    added = f"{body}\n\n{note}\n\n{render_labelled(results, RESULT_NOUN)}"
    last["content"] = mark(added, task) if task is not None else added
    return [*messages[:-1], last]
