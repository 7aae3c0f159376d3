"""Over stdio, a line the MCP SDK cannot read (valid JSON to most parsers, past the SDK's) gets
a JSON-RPC error addressed to its request, as over HTTP, and the server goes on serving: the
SDK alone drops such a line, and the client waits for its reply forever."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from panel_cli.mcp_server.server import PanelServer, ServerSettings
from panel_cli.mcp_server.transports import serve_stdio
from panel_cli.mcp_server.unreadable import request_id

DEEP = "[" * 100_000 + "]" * 100_000


def call(request_id: Any, arguments: str) -> str:
    return (
        f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "tools/call", '
        f'"params": {{"name": "confer", "arguments": {arguments}}}}}'
    )


@pytest.mark.parametrize(
    ("line", "found"),
    [
        (call(7, '{"question": "\\ud800"}'), 7),
        (call('"deep"', f'{{"question": {DEEP}}}'), "deep"),
        ('{"params": {"id": 3, "x": "}"}, "id" : "top"}', "top"),
        (call(9, '{"max_rounds": ' + "9" * 5_000 + "}"), 9),
        (call("9" * 5_000, "{}"), None),
        (call("true", "{}"), None),
        ('{"jsonrpc": "2.0", "params": {"id": 4}}', None),
        ("not json", None),
        ('{"id": "unclosed', None),
    ],
)
def test_the_request_id_is_found_at_the_top_level_of_a_line_that_does_not_parse(line: str, found: Any) -> None:
    assert request_id(line) == found


class Client:
    """The client's end of stdio: gives the server `lines`, then holds stdin open until the
    server has answered `last_id`, so the server is seen to go on serving after each line."""

    def __init__(self, lines: list[str], last_id: int) -> None:
        self.lines = lines
        self.last_id = last_id
        self.replies: dict[Any, dict[str, Any]] = {}
        self.answered = anyio.Event()

    async def __aiter__(self) -> AsyncIterator[str]:
        for line in self.lines:
            yield line + "\n"
        await self.answered.wait()

    async def write(self, text: str) -> None:
        reply = json.loads(text)
        self.replies[reply.get("id")] = reply
        if reply.get("id") == self.last_id:
            self.answered.set()

    async def flush(self) -> None:
        pass


async def test_an_unreadable_line_is_answered_and_the_server_goes_on(panels: Path, tmp_path: Path) -> None:
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        call(2, '{"question": "\\ud800", "panel": "demo"}'),
        call(3, f'{{"question": {DEEP}, "panel": "demo"}}'),
        "not json",
        '{"jsonrpc": "2.0", "id": 4}',
        json.dumps({"jsonrpc": "2.0", "id": 5, "method": "ping"}),
    ]
    client = Client(lines, last_id=5)
    with anyio.fail_after(60):
        await serve_stdio(PanelServer(ServerSettings(panels=panels, db=tmp_path / "mcp.db")).lowlevel(), client, client)

    replies = client.replies
    assert replies[2]["error"] == {
        "code": -32700,
        "message": "Parse error: unexpected end of hex escape at line 1 column 115",
    }
    assert replies[3]["error"]["code"] == -32700 and "recursion limit exceeded" in replies[3]["error"]["message"]
    assert replies[None]["error"] == {"code": -32700, "message": "Parse error: expected ident at line 1 column 2"}
    assert replies[4]["error"] == {
        "code": -32600,
        "message": "Invalid request: not a JSON-RPC request, notification or response.",
    }
    assert replies[5] == {"jsonrpc": "2.0", "id": 5, "result": {}}
