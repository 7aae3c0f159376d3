"""A scriptable fake of the OpenAI chat-completions API for tests and benchmarks.

It is a real HTTP/1.1 server on 127.0.0.1 so that litellm, the openai SDK, httpx and
aiohttp talk to it exactly as they would to a provider: no monkeypatching of client code.
It runs its own asyncio loop in a daemon thread, so sync tests and async tests (whatever
their loop) can share it, and it keeps per-request work small so that hundreds of
concurrent keep-alive calls stay fast.

A request with `"stream": true` gets its reply as server-sent events, the way OpenAI streams:
the headers at once, the first piece of text after the step's `latency` (its time to first
token), then a piece every `spacing` seconds, and the usage last when the request asked for
it (`stream_options.include_usage`). Each stream is recorded (`streams`) with the moment its
first token was sent, for benchmarks that time what a client does with it. A server made with
`streaming = False` is an endpoint that cannot stream: it answers a streamed request with the
whole completion as plain JSON, as several local servers and proxies do.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

__all__ = [
    "ErrorStep",
    "FakeOpenAIServer",
    "GatedStep",
    "HangStep",
    "MalformedStep",
    "RecordedRequest",
    "ReplyStep",
    "ResetStep",
    "SentStream",
    "Step",
    "error",
    "after",
    "hang",
    "invalid_utf8",
    "malformed",
    "malformed_json",
    "refused_url",
    "reply",
    "reply_json",
    "reset_mid_body",
    "responder",
    "tool_calls",
    "tool_responder",
    "ToolCallStep",
    "DripStep",
    "drip",
]

_PATHS = frozenset({"/v1/chat/completions", "/chat/completions"})
_READ_CHUNK = 65536
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    413: "Payload Too Large",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}
# OpenAI's (type, code) for the statuses tests use; anything else is a generic API error.
_ERROR_KINDS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", None),
}


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it, so tests can assert on prompts and headers."""

    model: str
    messages: list[dict[str, Any]]
    body: dict[str, Any]
    headers: dict[str, str]  # lower-case names
    path: str
    received_at: float  # time.monotonic(), comparable across requests of one process

    @property
    def streamed(self) -> bool:
        """Whether the client asked for the reply as a stream of events."""
        return bool(self.body.get("stream"))


@dataclass
class SentStream:
    """One streamed reply as the server sent it: its pieces, when the first went out
    (time.monotonic(), None until then), and whether the stream ran to its end."""

    model: str
    pieces: list[str]
    first_token_at: float | None = None
    finished: bool = False


@dataclass(frozen=True)
class ReplyStep:
    """A successful chat.completion whose content is computed from the request. Streamed,
    `latency` is the time to the first token, and the content goes out `chunk_chars`
    characters at a time, `spacing` seconds apart."""

    content: Callable[[RecordedRequest], str]
    latency: float = 0.0
    prompt_tokens: int = 10
    completion_tokens: int = 20
    spacing: float = 0.0
    chunk_chars: int = 8


@dataclass(frozen=True)
class ErrorStep:
    """An OpenAI-style error response with the given HTTP status. A text `retry_after` is
    sent as written, so tests can send values a provider should never send (`soon`)."""

    status: int
    message: str
    retry_after: float | str | None = None
    latency: float = 0.0


@dataclass(frozen=True)
class MalformedStep:
    """A response whose body is not a valid completion, to exercise parse failures; bytes
    are sent as they are (a body that is not UTF-8)."""

    body: str | bytes
    status: int = 200


@dataclass(frozen=True)
class HangStep:
    """Never answer: wait until the client disconnects or the server stops."""


@dataclass(frozen=True)
class ResetStep:
    """Announce a full completion, send its first `sent` bytes, then reset the connection:
    a provider or proxy dying in the middle of the body. Streamed: one piece, then the reset."""

    sent: int = 40


@dataclass(frozen=True)
class ToolCallStep:
    """A completion that asks for tools instead of answering: each (function name, arguments)
    pair the function returns becomes one tool call (arguments as a dict, or raw text to send
    as written); an empty list makes it an ordinary reply with `text`."""

    calls: Callable[[RecordedRequest], list[tuple[str, dict[str, Any] | str]]]
    text: str | None = None
    latency: float = 0.0
    prompt_tokens: int = 10
    completion_tokens: int = 20


@dataclass(frozen=True)
class GatedStep:
    """Hold the request until `until()` holds (polled on the server's loop), then answer with
    `then`; after `guard` seconds, answer anyway, so a caller that never makes `until` true
    fails its assertions instead of hanging. For a test that orders events by what the server
    saw (a reply held until another request has arrived) rather than by a latency."""

    until: Callable[[], object]
    then: Step
    guard: float = 30.0


@dataclass(frozen=True)
class DripStep:
    """Answer `text`, its headers at once, then its body (streamed: the events) one byte
    every `every` seconds: an endpoint that is never quite silent and never done."""

    text: str
    every: float = 1.0


Step = ReplyStep | ErrorStep | MalformedStep | HangStep | ResetStep | ToolCallStep | GatedStep | DripStep


def reply(
    text: str,
    *,
    latency: float = 0.0,
    prompt_tokens: int = 10,
    completion_tokens: int = 20,
    spacing: float = 0.0,
    chunk_chars: int = 8,
) -> ReplyStep:
    """Answer with a fixed text (streamed: `chunk_chars` at a time, `spacing` apart)."""
    return ReplyStep(lambda _request: text, latency, prompt_tokens, completion_tokens, spacing, chunk_chars)


def reply_json(obj: Any, *, latency: float = 0.0, prompt_tokens: int = 10, completion_tokens: int = 20) -> ReplyStep:
    """Answer with ``json.dumps(obj)`` as content, for structured-output callers."""
    return reply(
        json.dumps(obj),
        latency=latency,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
    )


def responder(
    fn: Callable[[RecordedRequest], str],
    *,
    latency: float = 0.0,
    prompt_tokens: int = 10,
    completion_tokens: int = 20,
    spacing: float = 0.0,
    chunk_chars: int = 8,
) -> ReplyStep:
    """Answer with text computed from the request (e.g. vote for a label in the prompt)."""
    return ReplyStep(fn, latency, prompt_tokens, completion_tokens, spacing, chunk_chars)


def tool_calls(*calls: tuple[str, dict[str, Any] | str], text: str | None = None, latency: float = 0.0) -> ToolCallStep:
    """Ask for these tool calls, e.g. ``tool_calls(("lookup", {"query": "x"}))``."""
    return ToolCallStep(lambda _request: list(calls), text, latency)


def tool_responder(
    fn: Callable[[RecordedRequest], list[tuple[str, dict[str, Any] | str]]], *, text: str = "ok", latency: float = 0.0
) -> ToolCallStep:
    """Tool calls computed from the request (none: answer with ``text``)."""
    return ToolCallStep(fn, text, latency)


def error(
    status: int,
    message: str = "fake provider error",
    *,
    retry_after: float | str | None = None,
    latency: float = 0.0,
) -> ErrorStep:
    """Fail with ``status``; ``retry_after`` adds a Retry-After header (seconds, or a raw value)."""
    return ErrorStep(status, message, retry_after, latency)


def malformed(body: str | bytes = "not json at all", status: int = 200) -> MalformedStep:
    """Answer with a raw body that is not JSON at all."""
    return MalformedStep(body, status)


def invalid_utf8() -> MalformedStep:
    """Answer with a completion whose content holds bytes that are not UTF-8."""
    head = b'{"id": "chatcmpl-bad", "object": "chat.completion", "created": 0, "model": "m", "choices": '
    choice = (
        b'[{"index": 0, "message": {"role": "assistant", "content": "caf\xe9 \xff\xfe"}, "finish_reason": "stop"}]}'
    )
    return MalformedStep(head + choice)


def reset_mid_body(sent: int = 40) -> ResetStep:
    """Start a completion, then reset the connection after ``sent`` bytes of its body."""
    return ResetStep(sent)


def malformed_json() -> MalformedStep:
    """Answer with valid JSON that lacks ``choices``."""
    return MalformedStep(json.dumps({"id": "chatcmpl-broken", "object": "chat.completion"}))


def after(until: Callable[[], object], then: Step, *, guard: float = 30.0) -> GatedStep:
    """Answer with `then` once `until()` is true (or `guard` seconds have passed)."""
    return GatedStep(until, then, guard)


def drip(text: str = "a reply that takes for ever", *, every: float = 1.0) -> DripStep:
    """Answer one byte every `every` seconds, to exercise deadlines and idle streams."""
    return DripStep(text, every)


def hang() -> HangStep:
    """Never answer, to exercise timeouts and cancellation."""
    return HangStep()


@contextlib.contextmanager
def refused_url() -> Iterator[str]:
    """A base URL on 127.0.0.1 where every connection is refused.

    The port stays bound but never listens for as long as the block runs, so no other
    process can take it meanwhile: connecting gets ECONNREFUSED, as from a stopped server."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


class _ClientGone(Exception):
    """The client closed its connection while a request was pending."""


class _Connection:
    """One keep-alive connection: a byte buffer over the stream so that EOF can be
    watched while a step sleeps without losing any bytes the client sends meanwhile."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self.buf = bytearray()

    async def fill(self) -> bool:
        """Read more bytes into the buffer; False at EOF."""
        data = await self._reader.read(_READ_CHUNK)
        self.buf += data
        return bool(data)

    async def read_request(self) -> tuple[str, str, dict[str, str], bytes] | None:
        """Parse one request (method, path, headers, body); None when the client is done."""
        while (end := self.buf.find(b"\r\n\r\n")) < 0:
            if not await self.fill():
                return None
        lines = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
        method, path, _version = lines[0].split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        start = end + 4
        stop = start + int(headers.get("content-length", "0"))
        while len(self.buf) < stop:
            if not await self.fill():
                return None
        body = bytes(self.buf[start:stop])
        del self.buf[:stop]
        return method, path, headers, body

    async def wait_closed(self) -> None:
        """Return when the client closes the connection (bytes sent meanwhile are kept)."""
        while await self.fill():
            pass

    async def sleep_or_close(self, seconds: float) -> None:
        """Sleep ``seconds``; raise _ClientGone if the client leaves first."""
        watcher = asyncio.ensure_future(self.wait_closed())
        try:
            done, _ = await asyncio.wait({watcher}, timeout=seconds)
        finally:
            # Await the cancellation: until the watcher has unwound, the stream still
            # counts it as the reader and the next read() would raise RuntimeError.
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        if done:
            raise _ClientGone


@dataclass(frozen=True)
class _Stream:
    """A reply to send as server-sent events: `events` are the `data:` payloads after the
    first `wait`, each `spacing` after the one before; `sent` records it as it goes.
    `reset`: the connection is reset after the first event."""

    events: list[bytes]
    wait: float
    spacing: float
    sent: SentStream
    reset: bool = False


@dataclass(frozen=True)
class _Answer:
    """One response to write; `cut_at` sends only that many bytes of the body, then resets.
    `stream`: the body is that stream instead, sent in HTTP chunks."""

    status: int
    body: bytes
    extra_headers: str = ""
    cut_at: int | None = None
    stream: _Stream | None = None
    drip: float | None = None  # seconds between the body's bytes
    events: bool = False  # the body is server-sent events already framed in HTTP chunks


def _response(status: int, body: bytes, extra_headers: str = "", close: bool = False) -> bytes:
    """Serialise one HTTP/1.1 response."""
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}\r\n"
        f"content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        f"connection: {'close' if close else 'keep-alive'}\r\n"
        f"{extra_headers}\r\n"
    )
    return head.encode("latin-1") + body


_STREAM_HEAD = "content-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n"


def _stream_head(close: bool) -> bytes:
    return f"HTTP/1.1 200 OK\r\n{_STREAM_HEAD}connection: {'close' if close else 'keep-alive'}\r\n\r\n".encode(
        "latin-1"
    )


def _http_chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode("latin-1") + data + b"\r\n"


def _retry_after(value: float | str | None) -> str:
    if value is None:
        return ""
    return f"retry-after: {value if isinstance(value, str) else format(value, 'g')}\r\n"


def _reset(writer: asyncio.StreamWriter) -> None:
    """Drop the connection with a TCP reset (SO_LINGER 0) rather than an orderly close."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def _error_body(status: int, message: str) -> bytes:
    kind, code = _ERROR_KINDS.get(status, ("api_error", None))
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}}).encode()


class FakeOpenAIServer:
    """An OpenAI-compatible chat-completions server whose answers each test scripts.

    Each model name has a queue of steps, consumed one per request; the last one repeats
    forever. Models without a script use the default step (reply "ok").
    """

    def __init__(self) -> None:
        self.url = ""
        # False: every reply goes whole as JSON, a streamed request's too.
        self.streaming = True
        self.requests: list[RecordedRequest] = []
        self.streams: list[SentStream] = []
        self.closed_early: list[str] = []
        self.errors: list[Exception] = []  # crashes of a connection handler (server bugs)
        self.in_flight = 0
        self.max_in_flight = 0
        self._scripts: dict[str, deque[Step]] = {}
        self._default: Step = reply("ok")
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> FakeOpenAIServer:
        """Start serving on an ephemeral port in a background thread."""
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="fake-openai", daemon=True)
        self._thread.start()
        port = asyncio.run_coroutine_threadsafe(self._listen(), loop).result(timeout=10)
        self.url = f"http://127.0.0.1:{port}/v1"
        return self

    def stop(self) -> None:
        """Close every connection (ending hanging steps) and stop the thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
        self._loop = self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- scripting ---------------------------------------------------------------

    def script(self, model: str, *steps: Step) -> None:
        """Queue behaviours for ``model`` (the name the server receives, without the
        ``openai/`` prefix litellm strips); the last step repeats forever."""
        if not steps:
            raise ValueError("script() needs at least one step")
        with self._lock:
            self._scripts[model] = deque(steps)

    def default(self, step: Step) -> None:
        """Set the behaviour for models that have no script."""
        self._default = step

    def requests_for(self, model: str) -> list[RecordedRequest]:
        """Requests received for ``model``, in arrival order."""
        return [r for r in self.requests if r.model == model]

    def _next_step(self, model: str) -> Step:
        with self._lock:
            queue = self._scripts.get(model)
            if not queue:
                return self._default
            return queue.popleft() if len(queue) > 1 else queue[0]

    # -- serving -----------------------------------------------------------------

    async def _listen(self) -> int:
        # A large backlog so that a burst of hundreds of connects is never dropped.
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=2048)
        return int(self._server.sockets[0].getsockname()[1])

    async def _shutdown(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        conn = _Connection(reader)
        try:
            while (request := await conn.read_request()) is not None:
                method, path, headers, body = request
                close = headers.get("connection", "").lower() == "close"
                answer = await self._respond(conn, method, path, headers, body)
                if answer is None:
                    return
                if answer.drip is not None:
                    await self._drip(conn, writer, answer, close)
                    return
                if answer.stream is not None:
                    if not await self._send_stream(conn, writer, answer.stream, close) or close:
                        return
                    continue
                raw = _response(answer.status, answer.body, answer.extra_headers, close=close)
                if answer.cut_at is not None:
                    writer.write(raw[: len(raw) - len(answer.body) + answer.cut_at])
                    await writer.drain()
                    _reset(writer)
                    return
                writer.write(raw)
                await writer.drain()
                if close:
                    return
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception as exc:  # kept for the fixture to fail the test with
            self.errors.append(exc)
        finally:
            self._connections.discard(task)
            writer.close()

    async def _respond(
        self, conn: _Connection, method: str, path: str, headers: dict[str, str], raw: bytes
    ) -> _Answer | None:
        """Build the response to one request; None if the client left."""
        if method != "POST" or path.split("?", 1)[0] not in _PATHS:
            return _Answer(404, _error_body(404, f"no route for {method} {path}"))
        try:
            body = json.loads(raw)
            model = str(body["model"])
        except (ValueError, KeyError, TypeError):
            return _Answer(400, _error_body(400, "request body must be JSON with a model"))
        request = RecordedRequest(
            model=model,
            messages=list(body.get("messages", [])),
            body=body,
            headers=headers,
            path=path,
            received_at=time.monotonic(),
        )
        self.requests.append(request)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            # Yield once so requests that arrive together overlap even for instant steps:
            # max_in_flight then shows whether a caller really sent them concurrently.
            await asyncio.sleep(0)
            return await self._run_step(conn, request, self._next_step(model))
        except _ClientGone:
            self.closed_early.append(model)
            return None
        finally:
            self.in_flight -= 1

    async def _run_step(self, conn: _Connection, request: RecordedRequest, step: Step) -> _Answer:
        match step:
            case GatedStep():
                give_up = asyncio.get_running_loop().time() + step.guard
                while not step.until() and asyncio.get_running_loop().time() < give_up:
                    await conn.sleep_or_close(0.01)
                return await self._run_step(conn, request, step.then)
            case HangStep():
                await conn.wait_closed()
                raise _ClientGone
            case ReplyStep():
                if step.latency > 0 and not request.streamed:
                    await conn.sleep_or_close(step.latency)
                try:
                    content = step.content(request)
                except Exception as exc:  # a broken responder should fail loudly, not hang
                    return _Answer(500, _error_body(500, f"responder raised {exc!r}"))
                if request.streamed and self.streaming:
                    return _Answer(200, b"", stream=self._streamed(request, step, content))
                return _Answer(200, self._completion(request, step.prompt_tokens, step.completion_tokens, content))
            case ErrorStep():
                if step.latency > 0:
                    await conn.sleep_or_close(step.latency)
                return _Answer(step.status, _error_body(step.status, step.message), _retry_after(step.retry_after))
            case MalformedStep():
                body = step.body if isinstance(step.body, bytes) else step.body.encode()
                return _Answer(step.status, body)
            case DripStep() if request.streamed:
                stream = self._streamed(request, reply(step.text), step.text)
                events = b"".join(_http_chunk(b"data: " + data + b"\n\n") for data in stream.events)
                body = events + _http_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"
                return _Answer(200, body, drip=step.every, events=True)
            case DripStep():
                return _Answer(200, self._completion(request, 10, 20, step.text), drip=step.every)
            case ResetStep() if request.streamed:
                stream = self._streamed(
                    request, reply("this reply never arrives whole " * 20), "this reply never arrives whole " * 20
                )
                return _Answer(200, b"", stream=dataclasses.replace(stream, reset=True))
            case ResetStep():
                body = self._completion(request, 10, 20, "this reply never arrives whole " * 20)
                return _Answer(200, body, cut_at=min(step.sent, len(body) - 1))
            case ToolCallStep():
                if request.streamed:
                    return _Answer(400, _error_body(400, "the fake server does not stream tool calls"))
                if step.latency > 0:
                    await conn.sleep_or_close(step.latency)
                calls = step.calls(request)
                if not calls:
                    return _Answer(
                        200, self._completion(request, step.prompt_tokens, step.completion_tokens, step.text or "ok")
                    )
                return _Answer(200, self._tool_completion(request, step, calls))

    def _streamed(self, request: RecordedRequest, step: ReplyStep, content: str) -> _Stream:
        """The events of a streamed reply: a role-and-text delta per piece, the finish, then the
        usage when asked for (OpenAI sends it in a last chunk with no choices)."""
        size = max(step.chunk_chars, 1)
        pieces = [content[start : start + size] for start in range(0, len(content), size)] or [""]
        head = {
            "id": f"chatcmpl-fake-{next(self._ids)}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": request.model,
            "system_fingerprint": "fp_fake",
        }

        def event(choices: list[dict[str, Any]], **extra: Any) -> bytes:
            return json.dumps({**head, "choices": choices, **extra}).encode()

        events = [
            event(
                [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": piece} if index == 0 else {"content": piece},
                        "logprobs": None,
                        "finish_reason": None,
                    }
                ]
            )
            for index, piece in enumerate(pieces)
        ]
        events.append(event([{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}]))
        options = request.body.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage"):
            usage = {
                "prompt_tokens": step.prompt_tokens,
                "completion_tokens": step.completion_tokens,
                "total_tokens": step.prompt_tokens + step.completion_tokens,
            }
            events.append(event([], usage=usage))
        sent = SentStream(request.model, pieces)
        self.streams.append(sent)
        return _Stream(events, step.latency, step.spacing, sent)

    async def _send_stream(self, conn: _Connection, writer: asyncio.StreamWriter, stream: _Stream, close: bool) -> bool:
        """Send a stream as its pacing says; False when the client left before its end. The
        request counts as in flight until its stream ends."""
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            writer.write(_stream_head(close))
            await writer.drain()
            for index, data in enumerate(stream.events):
                wait = stream.wait if index == 0 else stream.spacing
                if wait > 0:
                    await conn.sleep_or_close(wait)
                if index == 0:
                    stream.sent.first_token_at = time.monotonic()
                writer.write(_http_chunk(b"data: " + data + b"\n\n"))
                await writer.drain()
                if stream.reset:
                    _reset(writer)
                    return False
            writer.write(_http_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
            await writer.drain()
        except (_ClientGone, ConnectionError):
            self.closed_early.append(stream.sent.model)
            return False
        finally:
            self.in_flight -= 1
        stream.sent.finished = True
        return True

    async def _drip(self, conn: _Connection, writer: asyncio.StreamWriter, answer: _Answer, close: bool) -> None:
        """The headers at once, then the body one byte at a time, until the client leaves."""
        assert answer.drip is not None
        whole = _response(answer.status, answer.body, close=close)
        writer.write(_stream_head(close) if answer.events else whole[: len(whole) - len(answer.body)])
        await writer.drain()
        try:
            for index in range(len(answer.body)):
                await conn.sleep_or_close(answer.drip)
                writer.write(answer.body[index : index + 1])
                await writer.drain()
        except (_ClientGone, ConnectionError):
            self.closed_early.append("drip")

    def _tool_completion(
        self, request: RecordedRequest, step: ToolCallStep, calls: list[tuple[str, dict[str, Any] | str]]
    ) -> bytes:
        tool_calls = [
            {
                "id": f"call_fake_{next(self._ids)}",
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                },
            }
            for name, arguments in calls
        ]
        return json.dumps(
            {
                "id": f"chatcmpl-fake-{next(self._ids)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": request.model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": step.text, "tool_calls": tool_calls},
                        "logprobs": None,
                        "finish_reason": "tool_calls",
                    }
                ],
                "usage": {
                    "prompt_tokens": step.prompt_tokens,
                    "completion_tokens": step.completion_tokens,
                    "total_tokens": step.prompt_tokens + step.completion_tokens,
                },
            }
        ).encode()

    def _completion(self, request: RecordedRequest, prompt_tokens: int, completion_tokens: int, content: str) -> bytes:
        return json.dumps(
            {
                "id": f"chatcmpl-fake-{next(self._ids)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": request.model,
                "system_fingerprint": "fp_fake",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "logprobs": None,
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            }
        ).encode()
