"""Which tools a run offers: the servers' listings as function specs under names providers
accept and no two tools share; and the cap on a result's size.

What a model asks of those tools and gets back (`ToolSet`, the tool calls, their results) is
the gateway's side, `panel_cli.llm.tool_calls`; this package serves the calls.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from panel_cli.errors import UserError
from panel_cli.llm.tool_calls import ToolRoute, ToolSet

# A result longer than this is cut (and says so) before the model, the store or a view sees it.
RESULT_CHARS = 20_000
# OpenAI's rule for a function's name, which most providers share.
_FUNCTION_NAME = re.compile(r"[^A-Za-z0-9_-]")
FUNCTION_NAME_LENGTH = 64


@dataclass(frozen=True)
class ToolSpec:
    """A tool as its server lists it."""

    name: str
    description: str
    parameters: dict[str, Any]


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


def capped(text: str, limit: int = RESULT_CHARS) -> tuple[str, bool]:
    """The result as the model may see it, and whether it was cut."""
    if len(text) <= limit:
        return text, False
    return f"{text[:limit]}\n[cut at {limit:,} of {len(text):,} characters]", True
