"""Members with tools (MCP servers) and attached files.

`equip.equipped` wraps a run; `servers` talks to the servers through the MCP SDK, imported only
by a run whose panel names a server, and serves the gateway's tool calls as its `Toolbox`
(`panel_cli.llm.tool_loop`); `calls` names the tools the servers list, as function specs the
model is offered; `attachments` reads and fences attached files; `checks` is what `panel
validate` and every run check first. This package imports nothing heavy itself.
"""
