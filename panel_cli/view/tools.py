"""How the views show tools: the servers a run started, and each member's tool calls on its row
as they happen (tool, short arguments, status). Arguments and results are model and server
text: always plain `Text`, never markup."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from rich.text import Text

from panel_cli.view import fmt

if TYPE_CHECKING:
    from panel_cli.events import ToolCallFinished, ToolCallStarted, ToolServerStarted

ToolState = Literal["running", "ok", "failed", "timeout"]
STATE_STYLES: dict[ToolState, str] = {"running": "dim", "ok": "green", "failed": "red", "timeout": "yellow"}
ARGUMENTS_LIMIT = 40
ARGUMENTS_PREVIEW = 60


def short_arguments(arguments: dict[str, Any] | str, limit: int = ARGUMENTS_PREVIEW) -> str:
    """`query="row level security"`: a call's arguments on one line."""
    if isinstance(arguments, str):
        text = arguments
    else:
        text = ", ".join(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in arguments.items())
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class ToolActivity:
    """One tool call on a member's row."""

    tool_call_id: str
    tool: str
    arguments: str
    state: ToolState = "running"
    duration: float | None = None
    chars: int | None = None

    def update(self, event: ToolCallFinished) -> None:
        self.state, self.duration = event.status, event.duration
        self.chars = event.result_chars if event.status == "ok" else None

    def label(self) -> str:
        return f"{self.tool}({self.arguments})"


def activity(event: ToolCallStarted | ToolCallFinished) -> ToolActivity:
    return ToolActivity(event.tool_call_id, event.tool, short_arguments(event.arguments, ARGUMENTS_LIMIT))


def record(activities: list[ToolActivity], event: ToolCallStarted | ToolCallFinished) -> None:
    """Add a started call to a row's list, or mark how it ended (a finish whose start was not
    seen is added whole)."""
    found = next((entry for entry in activities if entry.tool_call_id == event.tool_call_id), None)
    if found is None:
        found = activity(event)
        activities.append(found)
    if event.type == "tool_call_finished":
        found.update(event)


def tools_cell(activities: list[ToolActivity], width: int) -> Text:
    """One line per call, `lookup(query="tenant isolation") ok`, at most `width` wide: a long
    call is cut before its state, which stays whole."""
    lines = []
    for entry in activities:
        state = Text(f" {entry.state}", style=STATE_STYLES[entry.state])
        label = Text(entry.label())
        label.truncate(max(width - state.cell_len, 1), overflow="ellipsis")
        lines.append(label + state)
    return Text("\n").join(lines)


def server_text(event: ToolServerStarted) -> str:
    """`tools: started notes (python server.py): lookup, search; for sage, engineer`."""
    verb = "started" if event.transport == "stdio" else "connected to"
    tools = ", ".join(event.tools) or "no tools"
    return f"tools: {verb} {event.server} ({fmt.one_line(event.target, 120)}): {tools}; for {', '.join(event.members)}"


def server_line(event: ToolServerStarted) -> Text:
    return Text(server_text(event), style="dim")


def _where(event: ToolCallStarted | ToolCallFinished) -> str:
    return f"[{event.stage}] " if event.round is None else f"[round {event.round}] "


def _tool_call_started_line(event: ToolCallStarted) -> str:
    who = fmt.who(event.member, event.about)
    return f"{_where(event)}tool call  {who}  {event.tool}({short_arguments(event.arguments)})"


def _tool_call_finished_line(event: ToolCallFinished) -> str:
    detail = f"{event.result_chars:,} chars" if event.status == "ok" else fmt.one_line(event.error or event.status, 200)
    who = fmt.who(event.member, event.about)
    return f"{_where(event)}tool {event.status}  {who}  {event.tool}  {fmt.seconds(event.duration)}  {detail}"


# The plain view's line for each tools event.
PLAIN_LINES: dict[str, Callable[[Any], str]] = {
    "tool_server_started": server_text,
    "tool_call_started": _tool_call_started_line,
    "tool_call_finished": _tool_call_finished_line,
}
