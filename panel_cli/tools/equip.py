"""The run's tools and attachments.

`equipped` wraps a run: it reads the attachments, starts the MCP servers the panel's members
name (only those), tells the run what it started, hands both to the gateway, and stops every
server when the run ends, however it ends. The SDK is imported only when a server is named.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from panel_cli.config import Panel
from panel_cli.events import BaseEvent, ToolServerStarted, WarningRaised
from panel_cli.tools.attachments import read_attachments, render_attachments
from panel_cli.tools.calls import tool_set

if TYPE_CHECKING:
    from panel_cli.llm.gateway import Gateway

Emit = Callable[[BaseEvent], Awaitable[Any]]


@asynccontextmanager
async def equipped(panel: Panel, gateway: Gateway, emit: Emit) -> AsyncIterator[None]:
    """The run's attachments and tool servers, for as long as the block runs. Call it inside
    the run's fence tag, so the attachments are fenced with it."""
    attachments = render_attachments(read_attachments(panel))
    users: dict[str, list[str]] = {}
    holders = [member for member in panel.callable_members() if member.tools] if panel.defaults.tool_budget else []
    for member in holders:
        if not gateway.supports_tools(member.model):
            await emit(
                WarningRaised(
                    member=member.name, message=f"{member.model} has no function calling, so it gets no tools"
                )
            )
            continue
        for name in member.tools:
            users.setdefault(name, []).append(member.name)
    servers = {name: panel.tools[name] for name in panel.tools if name in users}
    if not servers:
        gateway.equip(attachments=attachments)
        yield
        return
    from panel_cli.tools.servers import Toolbox

    toolbox = await Toolbox.start(servers)
    try:
        # One name per tool in the whole run, whichever members are offered it; a clash stops
        # the run before it says a server started.
        every_tool = tool_set(toolbox.listings(list(servers)))
        for name, config in servers.items():
            tools = [spec.name for spec in toolbox.servers[name].tools]
            await emit(
                ToolServerStarted(
                    server=name, transport=config.transport, target=config.target, tools=tools, members=users[name]
                )
            )
        offered = {
            member.name: every_tool.of_servers(member.tools)
            for member in panel.callable_members()
            if any(member.name in names for names in users.values())
        }
        gateway.equip(attachments=attachments, toolbox=toolbox, offered=offered)
        yield
    finally:
        gateway.equip(attachments=attachments)
        await toolbox.aclose()
