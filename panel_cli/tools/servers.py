"""The MCP servers of one run, through the official MCP SDK (`mcp`).

Each server runs in a task of its own that holds its SDK client open from start to stop, so
the SDK's own shutdown (close stdin, wait, then end the server's process group) runs in the
task that started it, whatever way the run ends: an answer, an error, Ctrl-C or SIGTERM. A
started server is in a session of its own, so a Ctrl-C at the terminal reaches panel alone,
and panel decides when the server stops. It runs under `group_leader`, which ends the server's
children with it, and the whole group when panel dies, even by SIGKILL. Its stderr goes to a
temporary file (a server must not draw over the live view), whose last line explains a server
that fails.

Importing this module imports the SDK (half a second): only a run with tools does.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import IO, Any

import httpx2
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, Implementation, TextContent
from mcp_types import CONNECTION_CLOSED

from panel_cli.config import ToolServer
from panel_cli.errors import UserError
from panel_cli.llm.tool_calls import ToolOutcome, failed
from panel_cli.tools.calls import ToolSpec, capped
from panel_cli.tools.checks import command_line
from panel_cli.untrusted import clean_text

# How long a server may take to start and list its tools.
START_SECONDS = 30.0
# The most pages of `tools/list` read from one server (a server that pages forever cannot hang a run).
LIST_PAGES = 20
# How long a server may take to stop before its task is cancelled (the SDK's own escalation,
# stdin closed, SIGTERM to its group, then SIGKILL, takes at most about six seconds).
STOP_SECONDS = 7.0
STDERR_TAIL = 4000
HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
GROUP_LEADER = Path(__file__).with_name("group_leader.py")


def _quiet_sdk_logs() -> None:
    """The SDK logs a server's misbehaviour; unhandled, Python would print it over the view."""
    for name in ("mcp", "client"):
        logger = logging.getLogger(name)
        logger.addHandler(logging.NullHandler())
        logger.propagate = False


class RunningServer:
    """One MCP server, from `start` to `stop`."""

    def __init__(self, name: str, config: ToolServer) -> None:
        self.name = name
        self.config = config
        self.tools: list[ToolSpec] = []
        self._client: Client | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._failure: str | None = None
        self._gone: str | None = None
        self._log: IO[bytes] | None = None

    async def start(self) -> None:
        """Start the server and read its tools; raise UserError with the reason if it cannot."""
        self._task = asyncio.create_task(self._serve(), name=f"panel-tool-server-{self.name}")
        try:
            await asyncio.wait_for(self._ready.wait(), START_SECONDS)
        except TimeoutError:
            self._failure = f"it did not start within {START_SECONDS:.0f}s"
        if self._failure is not None or self._client is None:
            await self.stop()
            raise UserError(
                f"Tool server '{self.name}' ({self.config.target}) could not start: {self._failure or 'it stopped at once'}."
            )

    async def _serve(self) -> None:
        with tempfile.TemporaryFile() as log:
            self._log = log
            try:
                async with (
                    self._transport() as transport,
                    Client(transport, client_info=Implementation(name="panel", version="1")) as client,
                ):
                    self.tools = await _listing(client)
                    self._client = client
                    self._ready.set()
                    await self._stop.wait()
            except Exception as exc:
                self._failure = self._reason(exc)
            finally:
                self._client = None
                self._ready.set()

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        """The SDK transport: the server's process over stdio, or its URL over HTTP."""
        config = self.config
        if config.command is not None:
            command, *args = _led(command_line(config))
            params = StdioServerParameters(command=command, args=args, env=dict(config.env), cwd=config.cwd)
            yield stdio_client(params, errlog=self._log)  # type: ignore[arg-type]  # a file with a fileno, as the SDK needs
        else:
            async with httpx2.AsyncClient(headers=dict(config.headers), timeout=HTTP_TIMEOUT) as http:
                yield streamable_http_client(str(config.url), http_client=http)

    async def call(self, tool: str, arguments: dict[str, Any], timeout: float | None) -> ToolOutcome:
        """Call one tool; never raises for the server's or the tool's failure."""
        client = self._client
        if client is None:
            return failed(
                f"the tool server '{self.name}' has stopped ({self._gone or self._failure or 'it is not running'})"
            )
        if timeout is not None and timeout <= 0:
            return failed("no time was left in the stage for this tool call", "timeout")
        try:
            result = await asyncio.wait_for(client.call_tool(tool, arguments), timeout)
        except TimeoutError:
            return failed(f"no result within {timeout:.1f}s", "timeout")
        except Exception as exc:
            if not _connection_lost(exc):
                return failed(f"the call failed: {_words(exc)}")
            reason = self._reason(exc)
            first = self._gone is None
            self._gone = reason
            self._client = None
            outcome = failed(f"the tool server '{self.name}' has stopped ({reason})")
            return dataclasses.replace(outcome, stopped=reason if first else None)
        text = _result_text(result)
        shown, truncated = capped(text)
        if result.is_error:
            return ToolOutcome(
                text=f"Error: {shown}",
                chars=len(text),
                truncated=truncated,
                status="failed",
                error=text[:500] or "the tool failed",
            )
        return ToolOutcome(text=shown, chars=len(text), truncated=truncated, status="ok")

    async def stop(self) -> None:
        """End the server; the SDK closes its stdin, then ends its process group if it lingers.
        A server still starting is cancelled, and so is one whose stop outlasts STOP_SECONDS:
        the SDK's shutdown is shielded from that cancel and still ends the process."""
        self._stop.set()
        task = self._task
        if task is not None and not task.done():
            if self._client is None:
                task.cancel()
            done, _ = await asyncio.wait({task}, timeout=STOP_SECONDS)
            if not done:
                task.cancel()
                await asyncio.wait({task})

    def _reason(self, exc: BaseException) -> str:
        """Why the server failed: its last line on stderr, else the error's own words."""
        last = self._stderr_tail()
        return clean_text(last or _words(exc))

    def _stderr_tail(self) -> str:
        log = self._log
        if log is None or log.closed:
            return ""
        # pread, not seek: the server writes through the same open file, and its offset must stay.
        with contextlib.suppress(OSError, ValueError):
            size = os.fstat(log.fileno()).st_size
            start = max(0, size - STDERR_TAIL)
            tail = os.pread(log.fileno(), size - start, start)
            lines = [line.strip() for line in tail.decode("utf-8", "replace").splitlines() if line.strip()]
            return lines[-1][:300] if lines else ""
        return ""


class Toolbox:
    """The run's servers by name; only the servers some member may use are started."""

    def __init__(self, servers: dict[str, RunningServer]) -> None:
        self.servers = servers

    @classmethod
    async def start(cls, configs: dict[str, ToolServer]) -> Toolbox:
        """Start every server at once; if one cannot start, stop the others and raise UserError."""
        _quiet_sdk_logs()
        servers = {name: RunningServer(name, config) for name, config in configs.items()}
        box = cls(servers)
        try:
            results = await asyncio.gather(*(server.start() for server in servers.values()), return_exceptions=True)
        except BaseException:
            await box.aclose()
            raise
        problems = [result for result in results if isinstance(result, BaseException)]
        if problems:
            await box.aclose()
            raise problems[0]
        return box

    def listings(self, names: Sequence[str]) -> dict[str, list[ToolSpec]]:
        return {name: self.servers[name].tools for name in names if name in self.servers}

    async def call(self, server: str, tool: str, arguments: dict[str, Any], timeout: float | None) -> ToolOutcome:
        running = self.servers.get(server)
        if running is None:
            return failed(f"no tool server '{server}' is running")
        limit = (
            running.config.timeout
            if timeout is None
            else timeout
            if running.config.timeout is None
            else min(timeout, running.config.timeout)
        )
        return await running.call(tool, arguments, limit)

    async def aclose(self) -> None:
        """Stop every server at once (each stop is bounded by the SDK's own limits)."""
        await asyncio.gather(*(server.stop() for server in self.servers.values()), return_exceptions=True)


def _led(command: list[str]) -> list[str]:
    """The command as panel starts it: on POSIX under `group_leader`, which ends the server's
    whole process group when the server ends, when the SDK stops it, or when panel dies (the
    SDK's Windows job object already ends the whole tree there)."""
    if os.name != "posix":
        return command
    return [sys.executable, "-I", "-S", str(GROUP_LEADER), str(os.getpid()), *command]


async def _listing(client: Client) -> list[ToolSpec]:
    specs: list[ToolSpec] = []
    cursor: str | None = None
    for _ in range(LIST_PAGES):
        page = await client.list_tools(cursor=cursor)
        specs += [
            ToolSpec(tool.name, tool.description or tool.title or "", dict(tool.input_schema or {}))
            for tool in page.tools
        ]
        cursor = page.next_cursor
        if cursor is None:
            break
    return specs


def _result_text(result: CallToolResult) -> str:
    """A result's text parts, in order; other kinds of content are named, not shown; with no
    text at all, its structured content as JSON. Cleaned (`clean_text`) as a reply is: a tool
    is as untrusted as a model."""
    parts: list[str] = []
    for item in result.content:
        if isinstance(item, TextContent):
            parts.append(item.text)
        else:
            parts.append(f"[{getattr(item, 'type', 'other')} content, not shown]")
    if not any(isinstance(item, TextContent) for item in result.content) and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return clean_text("\n".join(parts))


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _connection_lost(exc: BaseException) -> bool:
    import anyio

    for leaf in _leaves(exc):
        if isinstance(leaf, MCPError) and leaf.code == CONNECTION_CLOSED:
            return True
        if isinstance(
            leaf, anyio.ClosedResourceError | anyio.BrokenResourceError | anyio.EndOfStream | ConnectionError
        ):
            return True
    return False


def _words(exc: BaseException) -> str:
    """One line for a person: a missing command named, else the first real error's words."""
    leaf = _leaves(exc)[0]
    if isinstance(leaf, FileNotFoundError):
        return f"no such command: {leaf.filename}" if leaf.filename else "no such command"
    if isinstance(leaf, PermissionError):
        return f"not allowed to run {leaf.filename}" if leaf.filename else "not allowed to run the command"
    text = " ".join(str(leaf).split())
    return f"{type(leaf).__name__}: {text}" if text and not isinstance(leaf, MCPError) else text or type(leaf).__name__
