"""Which environment variable litellm sends to a member's `api_base`, asked of litellm itself.

litellm reads a provider's key in that provider's own code, and which one depends on the
model and on the base: `custom_openai/`, `xinference/`, `ai21/` and a few dozen other routes
send OPENAI_API_KEY to whatever `api_base` they are given, `datarobot/` sends
DATAROBOT_API_TOKEN, `mistral/` prefers MISTRAL_AZURE_API_KEY when both are set. No table of
ours keeps up with 190 providers, so panel asks: a child process (`python -I THIS_FILE`)
imports litellm, makes each member's call against a server of its own on 127.0.0.1, and
reports which variable's value the request carried (in a header, the URL or the body).

The child never holds a key and cannot reach another machine: every variable named like a
secret is replaced in its environment by a marker naming it (`panel-probe-OPENAI_API_KEY`),
unset ones stay unset so litellm chooses as it would for this user, and an audit hook refuses
any connection or name lookup beyond this machine (a provider that ignores `api_base`, such
as `replicate/`, fails there, sending nothing; its key goes to its own host). Only the
variables' names come back.

It costs litellm's import (about six seconds) in the child, so it runs only for members
whose `api_base` is another host and who name no `api_key_env`: `panel validate` of such a
panel, and a run that sends a key beyond this machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

MARKER = "panel-probe-"
PROXY_VARIABLES = frozenset({"http_proxy", "https_proxy", "all_proxy"})
PROBE_SECONDS = 120.0
# A call that neither reaches the probe's server nor fails within this long sends nothing there.
CALL_SECONDS = 10.0


def variables_sent(
    routes: Iterable[tuple[str, str]], secret_names: Sequence[str]
) -> dict[tuple[str, str], tuple[str, ...]]:
    """For each (model, api_base), the variables whose values litellm's call sends to that base,
    in the order the request carries them: none when it sends none there (no key variable is set, the call fails before sending, or
    the provider sends to its own host whatever the base). `secret_names`: the variables to
    mark; every other variable is passed on as it is. A probe that cannot run (litellm
    missing, the child timed out) answers none for every route it could not judge."""
    wanted = list(dict.fromkeys(routes))
    if not wanted:
        return {}
    # The child talks to its own server on 127.0.0.1 only: a proxy would carry the call away.
    env = {name: value for name, value in os.environ.items() if name.lower() not in PROXY_VARIABLES}
    for name in secret_names:
        if env.get(name):
            env[name] = f"{MARKER}{name}-"
    request = json.dumps([{"model": model, "api_base": base} for model, base in wanted])
    try:
        done = subprocess.run(
            [sys.executable, "-I", str(Path(__file__).resolve())],
            input=request,
            capture_output=True,
            text=True,
            env=env,
            timeout=PROBE_SECONDS,
            check=False,
        )
        found = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else []
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        found = []
    answers: dict[tuple[str, str], tuple[str, ...]] = dict.fromkeys(wanted, ())
    for route, names in zip(wanted, found if isinstance(found, list) else [], strict=False):
        if isinstance(names, list):
            answers[route] = tuple(name for name in names if isinstance(name, str))
    return answers


# -- the child ---------------------------------------------------------------------------------


def _loopback(host: object) -> bool:
    return isinstance(host, str) and (host in ("localhost", "::1") or host.startswith("127."))


def _refuse_other_hosts(event: str, args: tuple[object, ...]) -> None:
    """An audit hook: no connection and no name lookup beyond this machine."""
    if event == "socket.connect":
        address = args[1]
        host = address[0] if isinstance(address, tuple) and address else address
        if not _loopback(host):
            raise ConnectionRefusedError(f"the key probe stays on this machine ({host})")
    elif event == "socket.getaddrinfo" and not _loopback(args[0]) and args[0] is not None:
        raise OSError(f"the key probe looks up no other host ({args[0]})")


def _probe(routes: list[dict[str, str]]) -> list[list[str]]:
    import asyncio
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import urlsplit

    seen: list[str] = []

    class Capture(BaseHTTPRequestHandler):
        def _any(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            seen.append(f"{self.path}\n{self.headers}\n{body.decode('utf-8', 'replace')}")
            reply = b'{"error": {"message": "probe", "type": "invalid_request_error"}}'
            self.send_response(401)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        do_GET = do_POST = do_PUT = _any

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Capture)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{server.server_address[1]}"

    import litellm

    litellm.suppress_debug_info = True

    async def one(model: str, api_base: str) -> list[str]:
        parts = urlsplit(api_base)
        base = origin + parts.path + (f"?{parts.query}" if parts.query else "")
        seen.clear()
        # Every failure is an answer too: whatever reached the server before it is what was sent.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(
                litellm.acompletion(
                    model=model,
                    api_base=base,
                    messages=[{"role": "user", "content": "probe"}],
                    max_retries=0,
                    num_retries=0,
                    timeout=CALL_SECONDS,
                ),
                CALL_SECONDS,
            )
        sent = "\n".join(seen)
        return list(dict.fromkeys(part.split("-", 1)[0] for part in sent.split(MARKER)[1:]))

    async def all_of() -> list[list[str]]:
        return [await one(route["model"], route["api_base"]) for route in routes]

    return asyncio.run(all_of())


def main() -> None:
    """The child's body. Its reply goes to the pipe its parent reads, held apart from stdout,
    which stays on /dev/null for the whole probe: nothing litellm prints can pass for it."""
    sys.addaudithook(_refuse_other_hosts)
    routes = json.loads(sys.stdin.read())
    reply = os.fdopen(os.dup(1), "w")
    with open(os.devnull, "w") as quiet:
        os.dup2(quiet.fileno(), 1)
    with reply:
        reply.write(json.dumps(_probe(routes)) + "\n")


if __name__ == "__main__":
    main()
