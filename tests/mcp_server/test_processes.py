"""`python -m panel_cli mcp` as a real process, driven by the MCP SDK's own client session
(`mcp.ClientSession`) over stdio and over streamable HTTP with the bearer token it prints: the
protocol tools, a confer run on a demo panel and its result, the run read back as a resource,
a panel outside the folder refused with no run started, a request without the token refused
with 401, a cancelled request leaving an `interrupted` run that `panel resume` finishes, and
SIGTERM keeping the run in flight.

These start processes (the helper `suite` may register a `subprocess` marker for them; none is
registered yet)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import IO, Any

import anyio
import httpx
import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from panel_cli.store.reader import TranscriptReader
from tests.fakes.openai_server import FakeOpenAIServer, hang, reply
from tests.helpers import HANG_GUARD, ROOT, cli_json, eventually, stored_count, write_panel

pytestmark = pytest.mark.subprocess

PROTOCOLS = ["confer", "council", "decide", "delphi", "ensemble", "orchestrate", "supervise", "vote"]


def mcp_args(panels: Path, db: Path, *more: str) -> list[str]:
    return ["-m", "panel_cli", "mcp", "--panels", str(panels), "--db", str(db), *more]


@contextlib.asynccontextmanager
async def over_stdio(panels: Path, db: Path, errors: IO[str], *more: str) -> AsyncIterator[ClientSession]:
    """A session with `panel mcp` started over stdio, in this test's isolated environment."""
    args = mcp_args(panels, db, *more)
    server = StdioServerParameters(command=sys.executable, args=args, env=dict(os.environ), cwd=ROOT)
    async with stdio_client(server, errlog=errors) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def runs_in(db: Path, status: str | None = None) -> int:
    if status is None:
        return stored_count(db, "SELECT count(*) FROM runs")
    return stored_count(db, "SELECT count(*) FROM runs WHERE status = ?", status)


async def check_confer_and_refusal(session: ClientSession, db: Path) -> str:
    """The checks both transports pass: eight protocol tools, a confer run and its result, the
    run as a resource, and `../x` refused with no run started. The run's id."""
    tools = await session.list_tools()
    assert [tool.name for tool in tools.tools] == [*PROTOCOLS, "list_panels", "history"]

    result = await session.call_tool("confer", {"question": "Tabs or spaces?", "panel": "demo", "max_rounds": 1})
    envelope = result.structured_content
    assert result.is_error is False
    assert envelope["protocol"] == "confer" and envelope["reached_answer"] is True
    assert envelope["calls_by_status"]["answered"] == envelope["calls"] == 8
    assert result.content[0].text.endswith(f"· 8 calls · simulated, free · run {envelope['run_id']}")

    markdown = await session.read_resource(f"panel://runs/{envelope['run_id']}")
    assert markdown.contents[0].text.startswith("# panel confer · demo\n\n> Tabs or spaces?")

    refused = await session.call_tool("confer", {"question": "Q", "panel": "../x"})
    assert refused.is_error is True
    assert refused.content[0].text == "panel: '../x' is not a panel this tool runs; choose one of: demo."
    assert runs_in(db) == 1
    return str(envelope["run_id"])


async def test_over_stdio_a_client_runs_confer_reads_the_run_and_is_refused_outside_the_folder(
    panels: Path, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    with (tmp_path / "stderr.txt").open("w", encoding="utf-8") as errors:
        with anyio.fail_after(HANG_GUARD):
            async with over_stdio(panels, db, errors) as session:
                await check_confer_and_refusal(session, db)
    logged = (tmp_path / "stderr.txt").read_text(encoding="utf-8")
    assert f"panel mcp: serving over stdio (panels in {panels}, each run capped at $1)." in logged


class HttpServer:
    """`panel mcp --http 127.0.0.1:0` started, its URL and token read from what it says on stderr."""

    def __init__(self, panels: Path, db: Path, *more: str, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, *mcp_args(panels, db, "--http", "127.0.0.1:0", *more)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
        )
        assert self.process.stderr is not None
        self.said = [self.process.stderr.readline(), self.process.stderr.readline()]
        serving = re.search(r"serving (http://127\.0\.0\.1:\d+/mcp) ", self.said[0])
        assert serving and self.said[1].startswith("panel mcp: every request needs the header: "), self.said
        self.url, self.token = serving.group(1), self.said[1].rstrip("\n").rsplit("Bearer ", 1)[1]

    @contextlib.asynccontextmanager
    async def session(self, token: str) -> AsyncIterator[ClientSession]:
        async with (
            # A run takes a while to answer: no read timeout shorter than the test's own guard.
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=HANG_GUARD) as http,
            streamable_http_client(self.url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session

    def stop(self) -> tuple[int, str, str]:
        """SIGTERM, then its exit code, stdout and the rest of its stderr."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            stdout, stderr = self.process.communicate(timeout=HANG_GUARD)
        except subprocess.TimeoutExpired:
            self.process.kill()
            stdout, stderr = self.process.communicate()
        return self.process.returncode, stdout, stderr


@pytest.fixture
def http_server(panels: Path, tmp_path: Path) -> Iterator[HttpServer]:
    server = HttpServer(panels, tmp_path / "runs.db")
    try:
        yield server
    finally:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait()


async def test_over_http_only_a_request_with_the_printed_token_is_served(
    http_server: HttpServer, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    call["params"] = {"name": "confer", "arguments": {"question": "Q", "panel": "demo"}}  # type: ignore[assignment]
    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient() as plain:
        for given in ({}, {"Authorization": "Bearer not-the-token"}, {"Authorization": http_server.token}):
            response = await plain.post(http_server.url, json=call, headers={**headers, **given})
            assert response.status_code == 401
    assert runs_in(db) == 0

    with anyio.fail_after(HANG_GUARD):
        async with http_server.session(http_server.token) as session:
            await check_confer_and_refusal(session, db)

    code, stdout, _ = http_server.stop()
    assert (code, stdout) == (143, "")


async def test_a_token_from_the_variable_is_never_printed(panels: Path, tmp_path: Path) -> None:
    token = "token-from-the-environment"
    server = HttpServer(panels, tmp_path / "runs.db", env={"PANEL_MCP_TOKEN": token})
    try:
        assert server.token == "<the token in PANEL_MCP_TOKEN>" and token not in "".join(server.said)
        with anyio.fail_after(HANG_GUARD):
            async with server.session(token) as session:
                assert len((await session.list_tools()).tools) == 10
    finally:
        server.stop()


@pytest.fixture
def slow_panel(fake_server: FakeOpenAIServer, panels: Path, monkeypatch: pytest.MonkeyPatch) -> FakeOpenAIServer:
    """`slow`: a confer panel on the fake server whose `slow` member's first call never answers.
    Its models have no price: the server runs with --allow-unknown-prices."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-for-the-fake")
    write_panel(panels / "slow.yaml", fake_server, ["fast", "slow"], "protocol: confer", "max_rounds: 1")
    fake_server.script("slow", hang())
    return fake_server


async def call_until_first_progress(session: ClientSession, arguments: dict[str, Any]) -> str:
    """Call confer, wait for its first progress notification, then cancel the request; the message."""
    first = anyio.Event()
    said: list[str] = []

    async def progressed(progress: float, total: float | None, message: str | None) -> None:
        said.append(message or "")
        first.set()

    async def call() -> None:
        result = await session.call_tool("confer", arguments, progress_callback=progressed)
        raise AssertionError(f"the call ended before it could be cancelled: {result}")

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        await first.wait()
        group.cancel_scope.cancel()
    return said[0]


@contextlib.asynccontextmanager
async def served(transport: str, panels: Path, db: Path, errors: IO[str], *more: str) -> AsyncIterator[ClientSession]:
    """A session with `panel mcp` over `transport` (stdio, or HTTP with its printed token)."""
    if transport == "stdio":
        async with over_stdio(panels, db, errors, *more) as session:
            yield session
        return
    server = HttpServer(panels, db, *more)
    try:
        async with server.session(server.token) as session:
            yield session
    finally:
        server.stop()


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_cancelled_call_leaves_an_interrupted_run_that_resume_finishes(
    slow_panel: FakeOpenAIServer, panels: Path, tmp_path: Path, transport: str
) -> None:
    db = tmp_path / "runs.db"
    with (tmp_path / "stderr.txt").open("w", encoding="utf-8") as errors, anyio.fail_after(HANG_GUARD):
        async with served(transport, panels, db, errors, "--allow-unknown-prices") as session:
            said = await call_until_first_progress(session, {"question": "Ship on Friday?", "panel": "slow"})
            await eventually(lambda: runs_in(db, "interrupted") == 1, "the cancelled run to be stored interrupted")

    assert said == "confer answer: 1 of 2 calls"
    with TranscriptReader.open(db) as reader:
        (run,) = reader.list_runs()
        calls = {call.member: call.error_kind or "answered" for call in reader.run_calls(run.id)}
    assert calls == {"fast": "answered", "slow": "cancelled"}
    run_id = run.id

    slow_panel.script("slow", reply("Ship on Monday."))
    resumed = await anyio.to_thread.run_sync(lambda: cli_json("resume", run_id, "--db", str(db)))
    assert resumed["reached_answer"] is True
    assert resumed["calls_by_status"]["reused"] == 1
    assert len(slow_panel.requests_for("fast")) == 2  # its answer, then its one vote: never asked twice


async def test_sigterm_keeps_the_run_in_flight_as_interrupted(
    slow_panel: FakeOpenAIServer, panels: Path, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    server = HttpServer(panels, db, "--allow-unknown-prices")
    try:
        first = anyio.Event()

        async def progressed(progress: float, total: float | None, message: str | None) -> None:
            first.set()

        with anyio.fail_after(HANG_GUARD):
            async with server.session(server.token) as session, anyio.create_task_group() as group:

                async def call() -> None:
                    with contextlib.suppress(Exception):  # the server goes away mid-call
                        await session.call_tool(
                            "confer", {"question": "Ship?", "panel": "slow"}, progress_callback=progressed
                        )

                group.start_soon(call)
                await first.wait()
                server.process.send_signal(signal.SIGTERM)
                await anyio.to_thread.run_sync(server.process.wait)
                group.cancel_scope.cancel()
    finally:
        code, stdout, stderr = server.stop()
    assert (code, stdout) == (143, "")
    assert "panel: interrupted by SIGTERM." in stderr
    assert runs_in(db, "interrupted") == 1 and runs_in(db) == 1


def test_stdout_is_the_protocol_alone(panels: Path, tmp_path: Path) -> None:
    """Over stdio every line panel writes on stdout is a JSON-RPC message, progress included; its
    notices go to stderr. Read raw, without a client that might skip a stray line."""
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    arguments = {"question": "Q", "panel": "demo", "max_rounds": 1}
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "confer", "arguments": arguments, "_meta": {"progressToken": "p"}},
        },
    ]
    process = subprocess.Popen(
        [sys.executable, *mcp_args(panels, tmp_path / "runs.db")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    guard = threading.Timer(HANG_GUARD, process.kill)  # a server that never answers fails, never hangs
    guard.start()
    try:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write("".join(json.dumps(request) + "\n" for request in requests))
        process.stdin.flush()
        lines: list[dict[str, Any]] = []
        while not lines or lines[-1].get("id") != 2:
            line = process.stdout.readline()
            assert line, f"stdout ended before the result: {lines}"
            lines.append(json.loads(line))
        process.stdin.close()  # the client leaves: the server ends
        process.wait(HANG_GUARD)
        assert process.stderr is not None
        stderr = process.stderr.read()
    finally:
        guard.cancel()
    assert process.returncode == 0, stderr
    assert [line.get("id") for line in lines if "id" in line] == [1, 2]
    progress = [line["params"] for line in lines if line.get("method") == "notifications/progress"]
    assert progress and all(params["progressToken"] == "p" for params in progress)
    assert lines[-1]["result"]["structuredContent"]["reached_answer"] is True
    assert stderr.startswith("panel mcp: serving over stdio")
