"""A stdio MCP server for the tool tests, written with the MCP SDK: a tool that answers, one
that fails, one that hangs, one that kills the server, and a few that tests use to look at what
the server was given.

Run by panel as `[python, tests/fakes/mcp_server.py]`. `MCP_FIXTURE_PIDFILE`, when the panel
gives it in the server's `env`, names a file where the server writes its pid as it starts, so a
test can check that no server outlives its run. `--http FD` serves streamable HTTP at /mcp
instead, on the listening socket FD the test bound on 127.0.0.1 (to a port the OS chose, held
from the start, so no other test can take it first); its `header` tool returns a request
header, to see what panel sent.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("fixture")


@server.tool()
def lookup(query: str) -> str:
    """Look something up."""
    return f"found: {query}"


@server.tool()
def fail(query: str) -> str:
    """Always fails."""
    raise RuntimeError(f"the index for {query} is gone")


@server.tool()
async def hang(query: str) -> str:
    """Never answers."""
    await asyncio.sleep(3600)
    return "never"


@server.tool()
def crash(query: str) -> str:
    """Kills the server in the middle of the call."""
    sys.stderr.write("fixture: crashing on purpose\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool()
def echo(text: str) -> str:
    """Returns its text as it is."""
    return text


@server.tool()
def huge(size: int) -> str:
    """A result of `size` characters."""
    return "x" * size


@server.tool()
def env(name: str) -> str:
    """The value of an environment variable in the server, or <unset>."""
    return os.environ.get(name, "<unset>")


@server.tool()
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


@server.tool()
def header(name: str, ctx: Context) -> str:
    """A header of the HTTP request that carried this call, or <none>."""
    request = ctx.request_context.request
    return request.headers.get(name, "<none>") if request is not None else "<none>"


async def serve_http(listening: socket.socket) -> None:
    """As `server.run("streamable-http")` serves, on a socket already listening."""
    import uvicorn

    config = uvicorn.Config(server.streamable_http_app(host="127.0.0.1"), log_level="warning")
    await uvicorn.Server(config).serve(sockets=[listening])


if __name__ == "__main__":
    pidfile = os.environ.get("MCP_FIXTURE_PIDFILE")
    if pidfile:
        Path(pidfile).write_text(str(os.getpid()))
    if sys.argv[1:2] == ["--http"]:
        anyio.run(serve_http, socket.socket(fileno=int(sys.argv[2])))
    else:
        server.run()
