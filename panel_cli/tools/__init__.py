"""Members with tools (MCP servers) and attached files.

`equip.equipped` wraps a run; `calls` is the model's side of tool use (function specs, tool
calls, results); `servers` talks to the servers through the MCP SDK, imported only by a run
whose panel names a server; `attachments` reads and fences attached files; `checks` is what
`panel validate` and every run check first. This package imports nothing heavy itself: the
views import `calls`, and `panel history` must stay light.
"""
