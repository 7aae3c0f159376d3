"""Over HTTP: the address is this machine's unless the person allows otherwise, and a request
reaches the MCP session only with the bearer token (compared in constant time)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from panel_cli.errors import UserError
from panel_cli.mcp_server.transports import Address, BearerToken, bearer_token, parse_address

TOKEN = "a-token-that-is-long-enough"


@pytest.mark.parametrize(
    ("text", "address", "loopback"),
    [
        ("127.0.0.1:8765", Address("127.0.0.1", 8765), True),
        ("localhost:0", Address("localhost", 0), True),
        ("[::1]:9000", Address("::1", 9000), True),
        ("127.8.9.10:80", Address("127.8.9.10", 80), True),
    ],
)
def test_loopback_addresses_need_no_permission(text: str, address: Address, loopback: bool) -> None:
    parsed = parse_address(text, allow_remote=False)
    assert parsed == address and parsed.loopback is loopback


def test_an_ipv6_url_is_bracketed() -> None:
    assert Address("::1", 9000).url() == "http://[::1]:9000/mcp"
    assert Address("127.0.0.1", 0).url(4242) == "http://127.0.0.1:4242/mcp"


@pytest.mark.parametrize("text", ["0.0.0.0:8765", "192.168.1.20:80", "example.com:443", "[::]:1"])
def test_other_addresses_need_allow_remote(text: str) -> None:
    with pytest.raises(UserError, match="is not this machine's loopback address; add --allow-remote"):
        parse_address(text, allow_remote=False)
    assert parse_address(text, allow_remote=True).loopback is False


@pytest.mark.parametrize("text", ["8765", "127.0.0.1", "127.0.0.1:port", "127.0.0.1:70000", ":80", "127.0.0.1:-1"])
def test_a_malformed_address_is_one_sentence(text: str) -> None:
    with pytest.raises(UserError, match=r"^--http: give HOST:PORT, like 127\.0\.0\.1:8765, not "):
        parse_address(text, allow_remote=False)


def test_the_token_comes_from_the_variable_else_is_drawn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PANEL_MCP_TOKEN", raising=False)
    first, from_variable = bearer_token()
    assert not from_variable and len(first) >= 40 and bearer_token()[0] != first
    monkeypatch.setenv("PANEL_MCP_TOKEN", TOKEN)
    assert bearer_token() == (TOKEN, True)


@pytest.mark.parametrize("token", ["short", "x" * 15, "has a space in it here", "ünïcödé-token-long-enough"])
def test_a_guessable_or_unsendable_token_is_refused(monkeypatch: pytest.MonkeyPatch, token: str) -> None:
    monkeypatch.setenv("PANEL_MCP_TOKEN", token)
    with pytest.raises(UserError, match="PANEL_MCP_TOKEN must be at least 16 printable characters"):
        bearer_token()


class Reached:
    """The app behind the token check: counts the requests that got through."""

    def __init__(self) -> None:
        self.requests = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.requests += 1
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"reached"})


@pytest.mark.parametrize(
    ("headers", "path", "status"),
    [
        ({}, "/mcp", 401),
        ({"Authorization": "Bearer wrong"}, "/mcp", 401),
        ({"Authorization": f"Bearer {TOKEN}x"}, "/mcp", 401),
        ({"Authorization": TOKEN}, "/mcp", 401),
        ({"Authorization": f"bearer {TOKEN}"}, "/mcp", 401),
        ({}, "/elsewhere", 401),
        ({"Authorization": f"Bearer {TOKEN}"}, "/elsewhere", 404),
        ({"Authorization": f"Bearer {TOKEN}"}, "/mcp", 200),
        ({"Authorization": f"Bearer {TOKEN}"}, "/mcp/", 200),
    ],
)
async def test_only_a_request_with_the_token_reaches_the_session(
    headers: dict[str, str], path: str, status: int
) -> None:
    reached = Reached()
    transport = httpx.ASGITransport(app=BearerToken(reached, TOKEN))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        response = await client.post(path, json={"jsonrpc": "2.0", "id": 1, "method": "initialize"}, headers=headers)

    assert response.status_code == status
    assert reached.requests == (1 if status == 200 else 0)
    if status == 401:
        assert response.headers["www-authenticate"] == 'Bearer realm="panel"'
        assert response.json() == {"error": "this server needs the header Authorization: Bearer <token>"}
