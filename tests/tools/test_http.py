"""A tool server reached by `url` (streamable HTTP): the fixture server served on 127.0.0.1,
its headers (a token from the environment) sent with every request, nothing started by panel."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.fakes.openai_server import reply, tool_calls
from tests.tools.conftest import FIXTURE, answer_once, tool_panel

pytestmark = pytest.mark.subprocess


@pytest.fixture
def http_server() -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, str(FIXTURE), "--http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 120  # a hang guard
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, "the HTTP fixture server did not start"
                time.sleep(0.05)
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
