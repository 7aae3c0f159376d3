"""A tool server reached by `url` (streamable HTTP): the fixture server served on 127.0.0.1,
its headers (a token from the environment) sent with every request, nothing started by panel."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from http.client import HTTPConnection

import pytest

from tests.fakes.openai_server import reply, tool_calls
from tests.helpers import HANG_GUARD
from tests.tools.conftest import FIXTURE, answer_once, tool_panel

pytestmark = pytest.mark.subprocess


@pytest.fixture
def http_server() -> Iterator[str]:
    """The fixture server on a port the OS chose, bound here and handed over listening: no
    other test (a parallel worker's) can take it between the choice and the server's start."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        process = subprocess.Popen(
            [sys.executable, str(FIXTURE), "--http", str(sock.fileno())],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=[sock.fileno()],
        )
    try:
        answering = HTTPConnection("127.0.0.1", port, timeout=HANG_GUARD)
        answering.request("GET", "/mcp")  # any answer: the server is up
        answering.getresponse().close()
        answering.close()
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=120)


async def test_a_url_server_is_reached_with_its_headers(fake_server, run_with_tools, http_server):
    servers = {"web": {"url": http_server, "headers": {"X-Token": "from-the-environment"}}}
    panel = tool_panel(fake_server, ["a"], uses={"a": ["web"]}, tools=servers)
    fake_server.script(
        "a-model", tool_calls(("header", {"name": "x-token"}), ("lookup", {"query": "q"})), reply("done")
    )
    result, recorder = await run_with_tools(answer_once, panel)

    assert result.final_answer == "done"
    (started,) = recorder.of("tool_server_started")
    assert (started.transport, started.target) == ("http", http_server)
    assert [e.result for e in recorder.of("tool_call_finished")] == ["from-the-environment", "found: q"]
