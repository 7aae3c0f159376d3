"""The one way engines call models.

litellm reaches every provider, but several of its defaults hurt a deliberation tool: its
SDK retries stretch a short timeout into seconds, custom providers ignore `timeout`, and
it prints banners. So the gateway owns the deadline (`asyncio.wait_for`), the retries
(backoff with jitter, honouring Retry-After, never past the stage deadline), a concurrency
limit per endpoint, structured output and the cost of each call. It reports every call as
events and never raises for a provider failure: the result says what went wrong.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import os
import random
import threading
import time
import uuid
import warnings
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextvars import ContextVar
from functools import cache
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from panel_cli.config import Defaults, Member
from panel_cli.errors import MissingKeyError
from panel_cli.events import BaseEvent, CallFailed, CallFinished, CallStarted, ErrorKind
from panel_cli.llm.errors import RETRYABLE, ClassifiedError, classify, provider_message, retry_after_seconds
from panel_cli.llm.providers import KEYLESS
from panel_cli.llm.structured import json_instructions, parse_structured

Emit = Callable[[BaseEvent], Awaitable[Any]]

BACKOFF_BASE = 0.5
BACKOFF_CAP = 20.0


# Set while the gateway awaits litellm: litellm then skips the work whose result we never read.
_QUIET: ContextVar[bool] = ContextVar("panel_quiet_litellm_call", default=False)
WARM_UP_TIMEOUT = 30.0


@cache
def load_litellm() -> ModuleType:
    """Import litellm once, quietly and offline-safe; only commands that call models get here.

    Besides the settings, three things make calls cheaper (see bench/overhead.py):
    litellm's own per-call cost and success logging are skipped for the gateway's calls
    (`_skip_litellm_bookkeeping`), the first call's one-time work is done here instead
    (`_warm_up`), and the objects of the import are frozen out of the garbage collector."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "True")
    import logging

    import litellm

    litellm.suppress_debug_info = True
    litellm.drop_params = True
    litellm.telemetry = False
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm"):
        logging.getLogger(name).setLevel(logging.ERROR)
    from panel_cli.llm.demo import register_demo_provider

    register_demo_provider(litellm)
    _skip_litellm_bookkeeping()
    _warm_up(litellm)
    # litellm leaves ~400k long-lived objects behind; every full collection walked them all
    # (about half a second per pause here, some 15% of a burst of calls). Freezing moves
    # them out of the collector's way for good; they live as long as the process anyway.
    gc.freeze()
    return litellm


def _skip_litellm_bookkeeping() -> None:
    """Skip litellm's per-call cost calculation during the gateway's calls.

    After every reply litellm prices it for `response._hidden_params` (model-info lookups
    through its generalisation rules, then a zero-cost diagnostic): a quarter of its
    Python work per call. The gateway prices calls itself from `litellm.model_cost` and
    never reads litellm's figure, so within `_quiet_call` the calculator answers None at
    once. Any other caller in the process keeps litellm's behaviour. Private API: if a
    litellm release moves it, calls simply take the slow path again."""
    try:
        from litellm.litellm_core_utils.litellm_logging import Logging
    except ImportError:
        return
    original = getattr(Logging, "response_cost_calculator", None)
    if original is None or getattr(original, "_panel_quiet", False):
        return

    @functools.wraps(original)
    def response_cost_calculator(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _QUIET.get():
            return None
        return original(self, *args, **kwargs)

    response_cost_calculator._panel_quiet = True  # type: ignore[attr-defined]
    Logging.response_cost_calculator = response_cost_calculator


@cache
def _litellm_internal_call() -> Callable[[], contextlib.AbstractContextManager[None]] | None:
    """litellm's mark for a nested call whose caller does the logging and billing: litellm
    then skips its success logging for it (building the standard logging payload and a
    background task per call, for callbacks we never register): another tenth of its work.
    Private API, imported here so that importing this module stays free of litellm."""
    try:
        from litellm._internal_context import internal_sub_call
    except ImportError:  # another litellm release: calls just log as usual
        return None
    return internal_sub_call


@contextlib.contextmanager
def _quiet_call() -> Iterator[None]:
    """Around the gateway's own litellm calls: skip the bookkeeping whose results we never read."""
    token = _QUIET.set(True)
    try:
        internal = _litellm_internal_call()
        if internal is None:
            yield
        else:
            with internal():
                yield
    finally:
        _QUIET.reset(token)


async def _acompletion(litellm: ModuleType, request: dict[str, Any]) -> Any:
    with _quiet_call():
        return await litellm.acompletion(**request)


def _warm_up(litellm: ModuleType) -> None:
    """Do the first call's one-time work now, offline, so round 0 does not pay for it.

    A process's first litellm call took ~0.4 s (openai-compatible) to ~1.3 s (`demo/`,
    anthropic, and most other providers): lazy imports (litellm.proxy._types alone is
    half a second), deferred pydantic schema builds, and, for every provider except
    openai, tiktoken's cl100k_base read from litellm's bundled copy. No network is
    involved. A mock completion and the encoding cover it. It runs in a thread of its own
    because the caller may already be inside an event loop; a failure only means the first
    call pays as before."""

    def work() -> None:
        with contextlib.suppress(Exception), _quiet_call():
            litellm.completion(
                model="openai/gpt-4o-mini", messages=[{"role": "user", "content": "warm-up"}],
                mock_response="ok", api_key="warm-up",
            )
        with contextlib.suppress(Exception):
            litellm.encoding  # noqa: B018 - the attribute loads and caches the tokenizer

    # The schema builds warn about TypedDict `ReadOnly` items; litellm filters that warning
    # at import, but a test harness may have reset the filters since: keep it filtered.
    warnings.filterwarnings("ignore", message=r".*`ReadOnly` qualifier.*")
    thread = threading.Thread(target=work, name="panel-litellm-warm-up", daemon=True)
    thread.start()
    thread.join(WARM_UP_TIMEOUT)


class CallResult(BaseModel):
    """What one call produced. `ok` is False when the call itself failed; a reply that is
    not the structured object asked for is still `ok`, with `parse_error` set."""

    call_id: str
    member: str
    model: str
    ok: bool
    text: str = ""
    parsed: dict[str, Any] | None = None
    parse_error: str | None = None
    error_kind: ErrorKind | None = None
    error: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None
    latency: float = 0.0
    attempts: int = 0


def _price(litellm: ModuleType, model: str) -> tuple[float, float] | None:
    table = litellm.model_cost
    for key in (model, model.split("/", 1)[-1]):
        info = table.get(key)
        if info and info.get("input_cost_per_token") is not None and info.get("output_cost_per_token") is not None:
            return float(info["input_cost_per_token"]), float(info["output_cost_per_token"])
    return None


@functools.lru_cache(maxsize=64)
def _instructions(schema: type[BaseModel]) -> str:
    """The JSON-schema prompt for a schema; building the schema costs ~0.7 ms, so once each."""
    return json_instructions(schema)


def _backoff(attempt: int, rng: random.Random) -> float:
    """Full jitter: a random wait up to an exponentially growing cap."""
    return rng.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1)))


class Gateway:
    def __init__(
        self,
        emit: Emit,
        *,
        defaults: Defaults | None = None,
        concurrency: dict[str, int] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.emit = emit
        self.defaults = defaults or Defaults()
        self.concurrency = dict(concurrency or {})
        self._rng = rng or random.Random()
        self._limits: dict[str, asyncio.Semaphore] = {}
        self._prices: dict[str, tuple[float, float] | None] = {}
        self._native_schema: dict[str, bool] = {}
        self._litellm = load_litellm()

    def check_keys(self, members: Iterable[Member]) -> None:
        """Find a missing key before the first call, naming the variable to set."""
        for member in members:
            if member.api_key_env:
                if not os.environ.get(member.api_key_env):
                    raise MissingKeyError(
                        f"Member '{member.name}' ({member.model}) needs the environment variable {member.api_key_env} (its api_key_env); set it and run again."
                    )
                continue
            if member.provider in KEYLESS or (member.api_base and member.provider == "openai"):
                continue
            report = self._litellm.validate_environment(model=member.model, api_base=member.api_base)
            missing = [key for key in report.get("missing_keys", []) if not key.endswith("_API_BASE")]
            if not report.get("keys_in_environment") and missing:
                raise MissingKeyError(
                    f"Member '{member.name}' ({member.model}) needs {' or '.join(missing)} set in the environment"
                    " (or try the panel offline with --demo)."
                )

    def _api_key(self, member: Member) -> str | None:
        if member.api_key_env:
            return os.environ.get(member.api_key_env)
        if member.api_base and member.provider == "openai" and not os.environ.get("OPENAI_API_KEY"):
            return "no-key-needed"
        return None

    def _limit(self, member: Member) -> asyncio.Semaphore:
        key = member.api_base or member.provider
        if key not in self._limits:
            size = self.concurrency.get(key) or self.concurrency.get(member.provider) or self.defaults.concurrency
            self._limits[key] = asyncio.Semaphore(size)
        return self._limits[key]

    def _supports_schema(self, model: str) -> bool:
        if model not in self._native_schema:
            try:
                self._native_schema[model] = bool(self._litellm.supports_response_schema(model=model))
            except Exception:
                self._native_schema[model] = False
        return self._native_schema[model]

    def _cost(self, model: str, tokens_in: int | None, tokens_out: int | None) -> float | None:
        if model not in self._prices:
            self._prices[model] = _price(self._litellm, model)
        price = self._prices[model]
        if price is None or tokens_in is None or tokens_out is None:
            return None
        return tokens_in * price[0] + tokens_out * price[1]

    def _request(self, member: Member, messages: list[dict[str, Any]], schema: type[BaseModel] | None) -> dict[str, Any]:
        request: dict[str, Any] = {"model": member.model, "messages": messages, "max_retries": 0}
        temperature = member.temperature if member.temperature is not None else self.defaults.temperature
        max_tokens = member.max_tokens or self.defaults.max_tokens
        if temperature is not None:
            request["temperature"] = temperature
        if max_tokens is not None:
            request["max_tokens"] = max_tokens
        if member.api_base:
            request["api_base"] = member.api_base
        api_key = self._api_key(member)
        if api_key:
            request["api_key"] = api_key
        if schema is not None:
            request["response_format"] = schema
        return request

    def _messages(self, member: Member, messages: list[dict[str, Any]], schema: type[BaseModel] | None, native: bool) -> list[dict[str, Any]]:
        full = ([{"role": "system", "content": member.system}] if member.system else []) + [dict(m) for m in messages]
        if schema is not None and not native:
            last = full[-1]
            last["content"] = f"{last['content']}\n\n{_instructions(schema)}"
        return full

    async def call(
        self,
        member: Member,
        messages: list[dict[str, Any]],
        *,
        stage: str,
        round: int | None = None,
        deadline: float | None = None,
        schema: type[BaseModel] | None = None,
    ) -> CallResult:
        """One model call with our deadline and retries. `deadline` is a `loop.time()` instant:
        the stage's end, which no attempt or backoff may pass."""
        loop = asyncio.get_running_loop()
        native = schema is not None and self._supports_schema(member.model)
        full = self._messages(member, messages, schema, native)
        request = self._request(member, full, schema if native else None)
        call_id = uuid.uuid4().hex[:16]
        common = {"call_id": call_id, "member": member.name, "model": member.model, "stage": stage, "round": round}
        await self.emit(CallStarted(**common))
        retries = member.retries if member.retries is not None else self.defaults.retries
        call_timeout = member.timeout or self.defaults.timeout
        started = time.perf_counter()
        attempts = 0
        try:
            while True:
                attempts += 1
                remaining = None if deadline is None else deadline - loop.time()
                limits = [t for t in (call_timeout, remaining) if t is not None]
                per_try = min(limits) if limits else None
                try:
                    if per_try is not None and per_try <= 0:
                        raise TimeoutError
                    async with self._limit(member):
                        response = await asyncio.wait_for(_acompletion(self._litellm, request), per_try)
                    text, tokens_in, tokens_out = _read_response(response)
                    break
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    kind = classify(exc)
                    delay = retry_after_seconds(exc) if kind == "rate_limited" else None
                    delay = _backoff(attempts, self._rng) if delay is None else delay
                    fits = deadline is None or loop.time() + delay < deadline
                    if kind in RETRYABLE and attempts <= retries and fits:
                        await asyncio.sleep(delay)
                        continue
                    message = provider_message(exc)
                    if kind == "timeout":
                        message = f"no reply within {per_try:.1f}s" if per_try else message
                    await self.emit(
                        CallFailed(**common, messages=full, kind=kind, message=message, latency=time.perf_counter() - started, attempts=attempts)
                    )
                    return CallResult(
                        call_id=call_id, member=member.name, model=member.model, ok=False, error_kind=kind,
                        error=message, latency=time.perf_counter() - started, attempts=attempts,
                    )
        except asyncio.CancelledError:
            await self.emit(
                CallFailed(**common, messages=full, kind="cancelled", message="cancelled", latency=time.perf_counter() - started, attempts=attempts)
            )
            raise
        latency = time.perf_counter() - started
        cost = self._cost(member.model, tokens_in, tokens_out)
        parsed, parse_error = None, None
        if schema is not None:
            obj, parse_error = parse_structured(text, schema)
            parsed = obj.model_dump() if obj is not None else None
        await self.emit(
            CallFinished(
                **common, messages=full, text=text, tokens_in=tokens_in, tokens_out=tokens_out,
                cost=cost, latency=latency, attempts=attempts,
            )
        )
        return CallResult(
            call_id=call_id, member=member.name, model=member.model, ok=True, text=text, parsed=parsed,
            parse_error=parse_error, tokens_in=tokens_in, tokens_out=tokens_out, cost=cost, latency=latency, attempts=attempts,
        )

    async def aclose(self) -> None:
        """Close litellm's pooled HTTP clients, which otherwise warn about unclosed transports,
        and forget them, so a later gateway in the same process opens fresh ones."""
        close = getattr(self._litellm, "close_litellm_async_clients", None)
        if close is not None:
            with contextlib.suppress(Exception):
                await close()
        cache = getattr(self._litellm, "in_memory_llm_clients_cache", None)
        if cache is not None and hasattr(cache, "flush_cache"):
            cache.flush_cache()


def _read_response(response: Any) -> tuple[str, int | None, int | None]:
    try:
        choices = response.choices
        content = choices[0].message.content
    except (AttributeError, IndexError, TypeError):
        raise ClassifiedError("malformed", "the reply had no message") from None
    if not isinstance(content, str) or not content.strip():
        raise ClassifiedError("malformed", "the reply was empty")
    usage = getattr(response, "usage", None)
    tokens_in = getattr(usage, "prompt_tokens", None) if usage else None
    tokens_out = getattr(usage, "completion_tokens", None) if usage else None
    return content, tokens_in, tokens_out
