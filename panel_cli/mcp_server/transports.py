"""How `panel mcp` is reached: over stdio (the client starts it and owns its stdin and stdout),
or over streamable HTTP at `http://HOST:PORT/mcp`.

Over HTTP every request must carry `Authorization: Bearer TOKEN`, compared in constant time;
one without it gets 401 before it reaches the MCP session, so it can start nothing. The
server listens on this machine only (a loopback address) unless the person allows otherwise,
and the SDK's DNS-rebinding check then holds the `Host` and `Origin` headers to loopback too.
Over stdio, stdout is the protocol: nothing else is ever written there (the SDK points file
descriptor 1 at stderr while it serves, so even a stray write from a library lands there).
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
import os
import secrets
import socket
import sys
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any

from panel_cli.errors import UserError

TOKEN_VARIABLE = "PANEL_MCP_TOKEN"
MIN_TOKEN_LENGTH = 16
ENDPOINT = "/mcp"
# How long open HTTP connections get to close once the server stops.
SHUTDOWN_SECONDS = 2
LOOPBACK_NAMES = ("localhost",)

# ASGI's types, as the MCP SDK's app (and Starlette) spell them.
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


@dataclass(frozen=True)
class Address:
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        if self.host in LOOPBACK_NAMES:
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    def url(self, port: int | None = None) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port if port is None else port}{ENDPOINT}"


def parse_address(text: str, *, allow_remote: bool) -> Address:
    """`HOST:PORT` (`[::1]:8765` for IPv6; port 0 picks a free one). A host that is not this
    machine is refused unless `allow_remote`."""
    host, colon, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not colon or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UserError(f"--http: give HOST:PORT, like 127.0.0.1:8765, not {text!r}.")
    address = Address(host, int(port))
    if not address.loopback and not allow_remote:
        raise UserError(
            f"--http: {host} is not this machine's loopback address; add --allow-remote to serve other machines "
            "(every request still needs the token)."
        )
    return address


def bearer_token() -> tuple[str, bool]:
    """The token every HTTP request must carry: `PANEL_MCP_TOKEN`, else a new random one; and
    whether it came from the variable (then it is never printed)."""
    given = os.environ.get(TOKEN_VARIABLE)
    if given is None:
        return secrets.token_urlsafe(32), False
    if len(given) < MIN_TOKEN_LENGTH or not given.isascii() or not given.isprintable() or " " in given:
        raise UserError(
            f"{TOKEN_VARIABLE} must be at least {MIN_TOKEN_LENGTH} printable characters without spaces, hard to guess."
        )
    return given, True


class BearerToken:
    """ASGI: only a request carrying the token, at the MCP endpoint, reaches `app`; without the
    token, 401; with it, anywhere else, 404."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        given = next((value for name, value in scope["headers"] if name == b"authorization"), b"")
        if not hmac.compare_digest(given, self.expected):
            await _respond(send, 401, "this server needs the header Authorization: Bearer <token>", bearer=True)
        elif scope["path"].rstrip("/") != ENDPOINT:
            await _respond(send, 404, f"the MCP endpoint is {ENDPOINT}")
        else:
            await self.app(scope, receive, send)


async def _respond(send: Send, status: int, message: str, *, bearer: bool = False) -> None:
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if bearer:
        headers.append((b"www-authenticate", b'Bearer realm="panel"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def serve_stdio(server: Any, stdin: Any = None, stdout: Any = None) -> None:
    """Serve one client over stdin and stdout (the process's, unless given as async text
    files) until it closes stdin. A line the SDK cannot read gets a JSON-RPC error, as over HTTP."""
    from mcp.server.stdio import stdio_server

    from panel_cli.mcp_server.unreadable import AnswersUnreadable

    async with stdio_server(stdin, stdout) as (read, write):
        await server.run(AnswersUnreadable(read, write), write, server.create_initialization_options())


def listening_socket(address: Address) -> socket.socket:
    """The bound socket, so a port of 0 is known before the address is announced."""
    family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address.host, address.port))
        sock.listen(128)
    except OSError as error:
        sock.close()
        raise UserError(f"--http: cannot listen on {address.host}:{address.port} ({error.strerror}).") from None
    sock.setblocking(False)
    return sock


async def serve_http(server: Any, address: Address, token: str, announce: Callable[[str], None]) -> None:
    """Serve streamable HTTP at `address` until cancelled; `announce` gets the URL once it listens.
    Cancelled (a signal), the MCP sessions end first, so every run in flight is cancelled once and
    stored `interrupted`; then the HTTP connections close, within SHUTDOWN_SECONDS."""
    import asyncio

    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

    security = None
    if address.loopback:
        security = TransportSecuritySettings(
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    manager = StreamableHTTPSessionManager(app=server, security_settings=security)
    app = BearerToken(StreamableHTTPASGIApp(manager), token)
    sock = listening_socket(address)
    http = leaving_signals(app)
    async with manager.run():
        serving = asyncio.create_task(http.serve(sockets=[sock]))
        announce(address.url(sock.getsockname()[1]))
        try:
            await asyncio.shield(serving)
            return
        except asyncio.CancelledError:
            pass
    http.should_exit = True
    await serving
    raise asyncio.CancelledError


def leaving_signals(app: Any) -> Any:
    """uvicorn's server for `app`, leaving signals to `panel` (which stops the runs in flight on
    the first and records them) instead of catching them itself, and logging nothing but
    warnings, on stderr."""
    import uvicorn

    class LeavesSignals(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    config = uvicorn.Config(
        app,
        lifespan="off",
        log_config=None,
        access_log=False,
        log_level="warning",
        timeout_graceful_shutdown=SHUTDOWN_SECONDS,
    )
    return LeavesSignals(config)


def say(line: str) -> None:
    """One line about the server on stderr (stdout may be the protocol)."""
    sys.stderr.write(f"panel mcp: {line}\n")
    sys.stderr.flush()
