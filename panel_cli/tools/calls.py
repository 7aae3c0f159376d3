"""The model's side of tool use: which tools a member is offered (as function specs), the tool
calls a reply asks for, and how their results go back to the model.

A tool result is untrusted text, like another member's answer: it is capped, fenced with the
run's tag (`tasks.render_labelled`) and handed to the model only. Nothing ever parses it for a
vote, a ranking or a verdict: tools serve free-text stages alone.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from panel_cli.errors import UserError
from panel_cli.tasks import find_task, mark, render_labelled
from panel_cli.untrusted import clean_text, load_json

# A result longer than this is cut (and says so) before the model, the store or a view sees it.
RESULT_CHARS = 20_000
RESULT_NOUN = "Tool result"
# OpenAI's rule for a function's name, which most providers share.
_FUNCTION_NAME = re.compile(r"[^A-Za-z0-9_-]")
FUNCTION_NAME_LENGTH = 64
ARGUMENTS_PREVIEW = 60
# The one result that stands for every call of a reply past the tool budget.
NOT_RUN_LABEL = "not run"


def not_run(count: int) -> str:
    """What the model is told of the calls it asked for past its budget: one line for all."""
    calls = "call" if count == 1 else "calls"
    return f"Not run: {count:,} more tool {calls}; your tool budget for this stage is spent."


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
    return ToolOutcome(text=f"Error: {message}", chars=0, truncated=False, status=status, error=message)


@dataclass(frozen=True)
class ToolSpec:
    """A tool as its server lists it."""

    name: str
    description: str
    parameters: dict[str, Any]


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


class ToolNameClash(UserError):
    """Two tools would be offered under one name, so calls meant for one would reach the other."""

    def __init__(self, name: str, first: ToolRoute, second: ToolRoute) -> None:
        rule = "a tool's name must be unique in a run"
        if first.server == second.server:
            super().__init__(
                f"Tool server '{first.server}' has two tools offered as '{name}' "
                f"('{first.tool}', '{second.tool}'): {rule}, so it cannot be used."
            )
        else:
            super().__init__(
                f"Tool servers '{first.server}' and '{second.server}' both have a tool offered as '{name}' "
                f"({first.server}'s '{first.tool}', {second.server}'s '{second.tool}'): {rule}; "
                "rename one of the servers under 'tools:'."
            )


@dataclass(frozen=True)
class RequestedCall:
    """One tool call a reply asks for: the provider's id for it, the function and its
    arguments as the model wrote them (JSON text, not yet trusted)."""

    id: str
    name: str
    arguments: str


def function_name(name: str) -> str:
    return _FUNCTION_NAME.sub("_", name)[:FUNCTION_NAME_LENGTH] or "tool"


def tool_set(listings: dict[str, list[ToolSpec]]) -> ToolSet:
    """Every tool of the given servers (name -> its listing), each offered under its own name,
    made safe for providers; a name two servers share is prefixed by the server's name. Raises
    ToolNameClash when two tools still end with one name (a server's `fix_lookup` beside the
    `lookup` of a server called `fix`; two names made alike by the provider-safe spelling):
    silently keeping one would send the other's calls to it."""
    counts: dict[str, int] = {}
    for specs in listings.values():
        for spec in specs:
            counts[function_name(spec.name)] = counts.get(function_name(spec.name), 0) + 1
    offered = ToolSet()
    for server, specs in listings.items():
        for spec in specs:
            plain = function_name(spec.name)
            name = plain if counts[plain] == 1 else function_name(f"{server}_{spec.name}")
            route = ToolRoute(server, spec.name)
            if name in offered.routes:
                raise ToolNameClash(name, offered.routes[name], route)
            offered.routes[name] = route
            parameters = (
                spec.parameters if spec.parameters.get("type") == "object" else {"type": "object", "properties": {}}
            )
            offered.specs.append(
                {
                    "type": "function",
                    "function": {"name": name, "description": spec.description, "parameters": parameters},
                }
            )
    return offered


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


def short_arguments(arguments: dict[str, Any] | str, limit: int = ARGUMENTS_PREVIEW) -> str:
    """`query="row level security"`: what a view shows of a call's arguments, on one line."""
    if isinstance(arguments, str):
        text = arguments
    else:
        text = ", ".join(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in arguments.items())
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def capped(text: str, limit: int = RESULT_CHARS) -> tuple[str, bool]:
    """The result as the model may see it, and whether it was cut."""
    if len(text) <= limit:
        return text, False
    return f"{text[:limit]}\n[cut at {limit:,} of {len(text):,} characters]", True


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
