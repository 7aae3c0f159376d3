"""`panel mcp`'s command line: what it refuses before it serves anything (one sentence, exit 2).
The server itself: tests/mcp_server/."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.helpers import cli, cli_refused


def test_help_states_the_default_cap_and_every_option() -> None:
    shown = cli("mcp", "--help").output
    for option in ("--panels", "--db", "--max-cost", "--files", "--allow-unknown-prices", "--http", "--allow-remote"):
        assert option in shown
    assert "[default: 1.0]" in shown and "PANEL_MCP_TOKEN" in shown


@pytest.mark.parametrize(
    ("args", "sentence"),
    [
        (["--allow-remote"], "--allow-remote goes with --http."),
        (["--http", "0.0.0.0:8765"], "--http: 0.0.0.0 is not this machine's loopback address; add --allow-remote"),
        (["--http", "8765"], "--http: give HOST:PORT, like 127.0.0.1:8765, not '8765'."),
    ],
)
def test_an_address_it_will_not_serve_is_refused(tmp_path: Path, args: list[str], sentence: str) -> None:
    assert cli_refused("mcp", "--panels", str(tmp_path), *args).startswith(sentence)


def test_a_short_token_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PANEL_MCP_TOKEN", "hunter2")
    assert cli_refused("mcp", "--panels", str(tmp_path), "--http", "127.0.0.1:0").startswith(
        "PANEL_MCP_TOKEN must be at least 16 printable characters"
    )


def test_a_port_in_use_is_one_sentence(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        sentence = cli_refused("mcp", "--panels", str(tmp_path), "--http", f"127.0.0.1:{port}")
    assert sentence.startswith(f"--http: cannot listen on 127.0.0.1:{port} (")


def test_a_panel_folder_that_is_not_there_is_a_usage_error(tmp_path: Path) -> None:
    outcome = cli("mcp", "--panels", str(tmp_path / "nowhere"))
    assert outcome.exit_code == 2 and "does not exist" in outcome.output
