"""What litellm really sends to an `api_base`, for every provider it lists: run by
`test_key_probe.py` in a network namespace of its own (`unshare --net`, only loopback up), with
every key variable litellm's source names set to `truth-NAME-`. Each provider's call goes to a
server here; the variables whose values the request carried are printed, as JSON, per provider.
A provider that ignores `api_base` fails to reach its own host (there is no network), sending
nothing here."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

seen: list[str] = []


class Capture(BaseHTTPRequestHandler):
    def _any(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length).decode("utf-8", "replace") if length else ""
        seen.append(f"{self.path}\n{self.headers}\n{body}")
        reply = b'{"error": {"message": "no", "type": "invalid_request_error"}}'
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    do_GET = do_POST = do_PUT = _any

    def log_message(self, *args: object) -> None:
        pass


async def sent_by(litellm, provider: str, url: str) -> list[str]:
    seen.clear()
    with contextlib.suppress(Exception):  # only what arrived matters
        await asyncio.wait_for(
            litellm.acompletion(
                model=f"{provider}/m",
                api_base=url,
                messages=[{"role": "user", "content": "hi"}],
                max_retries=0,
                num_retries=0,
                timeout=5,
            ),
            8,
        )
    return sorted({part.split("-", 1)[0] for part in "\n".join(seen).split("truth-")[1:]})


async def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Capture)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    import litellm

    litellm.suppress_debug_info = True
    found = {}
    for provider in litellm.provider_list:
        name = getattr(provider, "value", provider)
        found[name] = await sent_by(litellm, name, url)
    print(json.dumps(found))


if __name__ == "__main__":
    asyncio.run(main())
