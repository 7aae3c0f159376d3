"""The one way engines call models.

litellm reaches every provider, but several of its defaults hurt a deliberation tool: its
SDK retries stretch a short timeout into seconds, and it prints banners. So the gateway owns
the deadline (`asyncio.wait_for`), the retries (backoff with jitter, honouring Retry-After,
never past the call's budget or the stage deadline), a concurrency limit per endpoint,
structured output, the cost of each call and the size of a reply. It reports every call as
events and never raises for a provider failure: the result says what went wrong. A member
that fails for good (a rejected key, an unknown model, a refused connection) is not called
again in the run. A resumed run's gateway holds the replies its earlier run got, by request
hash, and answers those requests from them instead of paying for them again.

The demo personas are served on a route of the gateway's own (`panel_cli.llm.demo_route`),
in-process and with everything above but litellm's request: litellm is imported only when a
member that is not a persona is called (or a check needs its tables), so a run of personas
alone never pays for the import. Each call may carry a brief (`panel_cli.llm.brief`), which
the personas answer from and which no provider ever receives.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import gc
import os
import random
import sys
import time
import uuid
import warnings
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from panel_cli.config import DEFAULT_IDLE_TIMEOUT, Defaults, Member
from panel_cli.events import (
    BaseEvent,
    CallFailed,
    CallFinished,
    CallRoute,
    CallStarted,
    ErrorKind,
    MemberSkipped,
    ToolCallFinished,
    ToolCallRoute,
    ToolCallStarted,
    WarningRaised,
)
from panel_cli.llm.brief import RequestBrief, plain, with_voter
from panel_cli.llm.budget import Budget, Hold, known_price, model_info, output_bound, prompt_tokens, worst_case
from panel_cli.llm.demo_route import Read, demo_call
from panel_cli.llm.errors import RETRYABLE, ClassifiedError, Failure, describe, retry_after_seconds
from panel_cli.llm.key_hosts import endpoint_of, key_source
from panel_cli.llm.request_hash import request_hash
from panel_cli.llm.stream import StreamedReply, TextGrowth, read_stream, stalling_after, within_idle
from panel_cli.llm.structured import json_instructions, one_answer_prompt, parse_structured
from panel_cli.llm.usage import reported_usage
from panel_cli.models.routes import is_demo, needs_litellm
from panel_cli.tasks import find_task, mark
from panel_cli.tools.calls import (
    NOT_RUN_LABEL,
    RequestedCall,
    ToolSet,
    assistant_message,
    failed,
    not_run,
    parse_arguments,
    requested_calls,
    result_label,
    result_message,
    with_results,
)
from panel_cli.untrusted import clean_text
from panel_cli.wording import plural

if TYPE_CHECKING:
    from panel_cli.tools.servers import Toolbox

Emit = Callable[[BaseEvent], Awaitable[Any]]

BACKOFF_BASE = 0.5
BACKOFF_CAP = 20.0
# The longest single wait a provider's Retry-After can impose; asked for more, the call fails.
MAX_RETRY_WAIT = 60.0


# Set while the gateway awaits litellm: litellm then skips the work whose result we never read.
_QUIET: ContextVar[bool] = ContextVar("panel_quiet_litellm_call", default=False)


@cache
def load_litellm() -> ModuleType:
    """Import litellm once, quietly and offline-safe; only commands that call models get here.

    Besides the settings, two things make it cheaper (bench/startup.py, bench/overhead.py):
    the import runs without the garbage collector and its objects are then frozen out of
    the collector's way, and litellm's own per-call cost and success logging are skipped
    for the gateway's calls (`_skip_litellm_bookkeeping`). The first call's one-time work
    (lazy imports, a tokenizer for some providers) is left to that call: done here it only
    delayed the first request, while during a run much of it overlaps the wait for the
    other members' replies."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "True")
    import logging

    # The import builds ~400k objects that live as long as the process. The collector walked
    # the growing heap again and again while they were built (a quarter of the import's
    # time), and every full collection after it walked them all again (half a second per
    # pause, some 15% of a burst of calls). Frozen, they are never walked.
    gc.disable()
    try:
        import litellm
    finally:
        gc.freeze()
        gc.enable()

    litellm.suppress_debug_info = True
    litellm.drop_params = True
    litellm.telemetry = False
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm"):
        logging.getLogger(name).setLevel(logging.ERROR)
    _skip_litellm_bookkeeping()
    # The first call's schema builds warn about TypedDict `ReadOnly` items; litellm filters
    # that warning at import, but a test harness may have reset the filters since.
    warnings.filterwarnings("ignore", message=r".*`ReadOnly` qualifier.*")
    return litellm


def _skip_litellm_bookkeeping() -> None:
    """Skip litellm's per-call cost calculation during the gateway's calls.

    After every reply litellm prices it for `response._hidden_params` (model-info lookups
    through its generalisation rules, then a zero-cost diagnostic): a quarter of its
    Python work per call. The gateway prices calls itself from `litellm.model_cost` and
    never reads litellm's figure, so within `_quiet_call` the calculator answers None at
    once. Any other caller in the process keeps litellm's behaviour. Private API: if a
    litellm release moves it, calls take the slow path again, and tests/llm/test_litellm_hooks.py
    fails."""
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
    Private API, imported here so that importing this module stays free of litellm; a litellm
    release that moves it fails tests/llm/test_litellm_hooks.py."""
    try:
        from litellm._internal_context import internal_sub_call
    except ImportError:  # another litellm release: calls just log as usual
        return None
    return internal_sub_call


@contextlib.contextmanager
def _quiet_call() -> Iterator[None]:
    """Around the gateway's own litellm calls: skip the bookkeeping whose results we never read,
    and keep pydantic's serializer warnings off stderr. litellm dumps the provider's reply
    through its own models, so a reply whose content is a list or whose counts are floats
    makes pydantic warn before litellm refuses the reply (which the call then reports). The
    filter is set again each call: a test harness, or anyone, may have reset the filters."""
    warnings.filterwarnings("ignore", message="Pydantic serializer warnings", category=UserWarning)
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


async def _astream(
    litellm: ModuleType, request: dict[str, Any], grow: TextGrowth, cap: int, idle: float | None
) -> StreamedReply:
    """The request streamed (`panel_cli.llm.stream`), read to its end unless it stalls for
    `idle` seconds; closed however it ends, so a deadline mid-stream hangs up on the provider."""
    with _quiet_call():
        opened = litellm.acompletion(**request, stream=True, stream_options={"include_usage": True})
        chunks = await within_idle(opened, idle)
        try:
            return await read_stream(stalling_after(chunks, idle), grow, cap)
        finally:
            close = getattr(chunks, "aclose", None)
            if close is not None:
                await close()


# The failures that may come of sending the wrong key, or sending it to the wrong place.
SENT_WRONG = frozenset({"auth", "bad_request"})


class AnsweredCall(Protocol):
    """A reply the run being resumed got, as the store reads it back (`CallRecord`)."""

    @property
    def response(self) -> str | None: ...

    @property
    def truncated(self) -> bool: ...

    @property
    def tokens_in(self) -> int | None: ...

    @property
    def tokens_out(self) -> int | None: ...

    @property
    def cost(self) -> float | None: ...


class CallResult(BaseModel):
    """What one call produced. `ok` is False when the call itself failed; a reply that is
    not the structured object asked for is still `ok`, with `parse_error` set. `truncated`:
    the reply was longer than `max_response_chars` and `text` is its beginning. `skipped`:
    no request was made because the member failed for good earlier in the run. `reused`: no
    request was made because the run this one resumes got this very request answered. `late`:
    the reply came after the call's race was won (`Gateway.call`'s `race`): not to be used."""

    call_id: str
    member: str
    model: str
    ok: bool
    text: str = ""
    parsed: dict[str, Any] | None = None
    parse_error: str | None = None
    error_kind: ErrorKind | None = None
    error: str | None = None
    truncated: bool = False
    skipped: bool = False
    reused: bool = False
    late: bool = False
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None
    latency: float = 0.0
    attempts: int = 0


def table_price(litellm: ModuleType, model: str) -> tuple[float, float] | None:
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


def _seconds(value: float) -> str:
    return f"{value:.0f}s" if value >= 10 or value == int(value) else f"{value:.1f}s"


@dataclasses.dataclass
class _Reply:
    """One model request's outcome inside a call: its text and the tool calls it asks for, or
    the failure that ended it."""

    text: str = ""
    calls: list[RequestedCall] = dataclasses.field(default_factory=list)
    failure: Failure | None = None
    # When a structured reply was asked for once more (`Gateway._one_answer`): what to add to
    # its problem if it still cannot be used.
    again: str | None = None


@dataclasses.dataclass
class _Exchange:
    """What a call's requests add up to: the messages of the last one sent (what the store
    keeps), attempts, tokens (None until a reply reports them), its reservation against the
    run's budget, if it has one, its brief, and what its tool calls have found so far (both
    for a demo persona, which reads no prompt)."""

    messages: list[dict[str, Any]]
    brief: RequestBrief
    attempts: int = 0
    tokens_in: int | None = None
    tokens_out: int | None = None
    hold: Hold | None = None
    found: list[str] = dataclasses.field(default_factory=list)
    # Whether any request got a reply, and why its usage is unknown when a provider reported
    # counts that cannot be counts (`panel_cli.llm.usage`): the call's tokens are then unknown.
    replied: bool = False
    bad_usage: str | None = None
    # Set once the call's final event (finished, failed, refused, reused) is on its way, so a
    # cancellation arriving after it adds no second one.
    ended: bool = False

    def count(self, tokens_in: Any, tokens_out: Any) -> None:
        """Add one reply's counts, as its provider reported them."""
        self.replied = True
        usage = reported_usage(tokens_in, tokens_out)
        if usage.problem is not None:
            self.bad_usage = usage.problem
        if usage.tokens_in is not None:
            self.tokens_in = (self.tokens_in or 0) + usage.tokens_in
        if usage.tokens_out is not None:
            self.tokens_out = (self.tokens_out or 0) + usage.tokens_out

    @property
    def tokens(self) -> tuple[int | None, int | None]:
        """The call's counts: unknown both when any of its replies reported impossible ones."""
        return (None, None) if self.bad_usage is not None else (self.tokens_in, self.tokens_out)


def _call_end(now: float, call_timeout: float | None, retries: int, deadline: float | None) -> float | None:
    """When a call must be over: its own budget (every attempt at the per-call timeout,
    from its first request) or the stage deadline, whichever comes first; None when
    neither is set. Retries and waits never stretch a call past it."""
    ends = [
        end
        for end in (deadline, None if call_timeout is None else now + call_timeout * (retries + 1))
        if end is not None
    ]
    return min(ends) if ends else None


class Gateway:
    def __init__(
        self,
        emit: Emit,
        *,
        defaults: Defaults | None = None,
        concurrency: dict[str, int] | None = None,
        rng: random.Random | None = None,
        answered: Mapping[str, Sequence[AnsweredCall]] | None = None,
        limits: dict[str, asyncio.Semaphore] | None = None,
        budget: Budget | None = None,
        stream: bool = False,
        idle: float | None = DEFAULT_IDLE_TIMEOUT,
    ) -> None:
        """`answered`: the replies the run being resumed got, by request hash, oldest first.
        Each answers one request: a run that asked the same thing twice (two members on one
        model, a round whose prompt did not change) got two samples, and so does its resume.
        `limits`: the per-endpoint semaphores, when runs in flight at once (a batch) share
        them, so an endpoint's concurrency limit holds across the runs, not within each.
        `budget`: the run's spending cap (`panel_cli.llm.budget`), which every call reserves
        its worst case from before its request. `idle`: how long a streamed reply may go
        without a new piece before its call ends as a timeout (None: as long as its deadline)."""
        self.emit = emit
        self.idle = idle
        self.budget = budget
        # Set only when the live view draws the run: its answers then stream into their rows.
        self.stream = stream
        self.defaults = defaults or Defaults()
        self.concurrency = dict(concurrency or {})
        self._rng = rng or random.Random()
        self._limits: dict[str, asyncio.Semaphore] = limits if limits is not None else {}
        self._prices: dict[str, tuple[float, float] | None] = {}
        self._infos: dict[str, Mapping[str, Any] | None] = {}
        self._native_schema: dict[str, bool] = {}
        # Members that failed for good, with the reason (`auth: the provider rejected the
        # key (401)`); the run's result reports them.
        self.excluded: dict[str, str] = {}
        self._excluded_kind: dict[str, ErrorKind] = {}
        self._answered: dict[str, deque[AnsweredCall]] = {
            digest: deque(calls) for digest, calls in (answered or {}).items()
        }
        # What the run gives its calls (`equip`): the attachments' fenced block, and the tool
        # servers with the tools each member is offered.
        self._attachments = ""
        self._toolbox: Toolbox | None = None
        self._offered: dict[str, ToolSet] = {}
        # A follow-up's earlier turns (`follow`), before each call's own messages.
        self._prior: list[dict[str, Any]] = []

    @property
    def _litellm(self) -> ModuleType:
        """litellm, imported the first time a real member's call or a check needs it."""
        return load_litellm()

    def prepare(self, members: Sequence[Member]) -> None:
        """Import litellm now if any of `members` needs it, so that the import (seconds of
        CPU, blocking) never eats into a stage's time or a call's deadline."""
        if needs_litellm(members):
            load_litellm()

    def follow(self, turns: Sequence[Mapping[str, Any]]) -> None:
        """Give every call of the run a follow-up's earlier turns first (after the member's
        system prompt), as a chat does: each earlier question as the user's, its final answer
        as the assistant's. The attachments still go to the new question's first prompt."""
        self._prior = [dict(turn) for turn in turns]

    def equip(
        self, *, attachments: str = "", toolbox: Toolbox | None = None, offered: dict[str, ToolSet] | None = None
    ) -> None:
        """Set what every call of the run gets: `attachments` go before the first prompt of
        each call; `offered` (member -> its tools) are served by `toolbox` in free-text calls."""
        self._attachments = attachments
        self._toolbox = toolbox
        self._offered = dict(offered or {}) if toolbox is not None else {}

    def supports_tools(self, model: str) -> bool:
        """Whether a model may be offered tools: litellm's model table says it has function
        calling, or does not know the model (a new one, a local endpoint), which is then tried.
        The demo personas call tools."""
        if model.startswith("demo/"):
            return True
        try:
            info = self._litellm.get_model_info(model)
        except Exception:
            return True
        return info.get("supports_function_calling") is not False

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
        """Whether litellm says the model takes a response schema; a demo persona is asked in
        the prompt, as a model without one is (its replies carry the same JSON either way)."""
        if is_demo(model):
            return False
        if model not in self._native_schema:
            try:
                self._native_schema[model] = bool(self._litellm.supports_response_schema(model=model))
            except Exception:
                self._native_schema[model] = False
        return self._native_schema[model]

    def _price(self, model: str) -> tuple[float, float] | None:
        """A model's price per token from litellm's table, looked up once per run. A demo
        persona has none: its calls are simulated, and a view says so rather than show money."""
        if is_demo(model):
            return None
        if model not in self._prices:
            self._prices[model] = table_price(self._litellm, model)
        return self._prices[model]

    def _info(self, model: str) -> Mapping[str, Any] | None:
        """litellm's table entry for a model (its output limit), looked up once per run."""
        if model not in self._infos:
            self._infos[model] = model_info(self._litellm, model)
        return self._infos[model]

    def _usage(self, member: Member, exchange: _Exchange) -> dict[str, Any]:
        """The tokens and cost of a call that ended without an answer, as far as its replies
        reported them (nothing when no reply came)."""
        if not exchange.replied:
            return {}
        tokens_in, tokens_out = exchange.tokens
        return {
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "cost": self._cost(member.model, tokens_in, tokens_out),
        }

    def _cost(self, model: str, tokens_in: int | None, tokens_out: int | None) -> float | None:
        """A call's cost from its provider's counts and litellm's table; a demo persona's is
        nothing (simulated); None when the price or the counts are unknown, never 0."""
        if is_demo(model):
            return 0.0
        price = self._price(model)
        if price is None or tokens_in is None or tokens_out is None:
            return None
        return tokens_in * price[0] + tokens_out * price[1]

    def _request(
        self, member: Member, messages: list[dict[str, Any]], schema: type[BaseModel] | None
    ) -> dict[str, Any]:
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

    def _messages(
        self, member: Member, messages: list[dict[str, Any]], schema: type[BaseModel] | None, native: bool
    ) -> list[dict[str, Any]]:
        given = [dict(m) for m in messages]
        first_user = next((index for index, message in enumerate(given) if message.get("role") == "user"), None)
        if self._attachments and first_user is not None:
            given[first_user]["content"] = f"{self._attachments}\n\n{given[first_user]['content']}"
        prior = [dict(turn) for turn in self._prior]
        full = ([{"role": "system", "content": member.system}] if member.system else []) + prior + given
        if schema is not None and not native:
            last = full[-1]
            last["content"] = f"{last['content']}\n\n{_instructions(schema)}"
        return full

    def _hash(
        self,
        member: Member,
        messages: list[dict[str, Any]],
        request: Mapping[str, Any],
        schema: type[BaseModel] | None,
        *,
        stage: str,
        round: int | None,
        about: str | None,
        brief: RequestBrief | None,
    ) -> str:
        """The request's identity (see `request_hash`): what the gateway adds to the engine's
        messages goes in as context, with the engine's messages before its last; that last one,
        the prompt the engine built from its brief, is stood for by the brief when it gave one
        (all the messages go in without one)."""
        context = [{"role": "system", "content": member.system}] if member.system else []
        context += self._prior
        if self._attachments:
            context.append({"role": "attachments", "content": self._attachments})
        context += messages[:-1] if brief is not None else messages
        settings = {**request, "response_format": schema} if schema is not None else request
        return request_hash(
            settings, member=member.name, stage=stage, round=round, about=about, context=context, brief=brief
        )

    def messages_for(
        self, member: Member, messages: list[dict[str, Any]], schema: type[BaseModel] | None = None
    ) -> list[dict[str, Any]]:
        """The messages a call would send, system prompt, attachments and JSON instructions
        included, so that `panel estimate` counts exactly what a run sends."""
        return self._messages(member, messages, schema, schema is not None and self._supports_schema(member.model))

    async def call(
        self,
        member: Member,
        messages: list[dict[str, Any]],
        *,
        stage: str,
        round: int | None = None,
        about: str | None = None,
        deadline: float | None = None,
        schema: type[BaseModel] | None = None,
        tools: bool = False,
        brief: RequestBrief | None = None,
        race: asyncio.Event | None = None,
    ) -> CallResult:
        """One model call with our deadline and retries. `deadline` is a `loop.time()` instant:
        the stage's end, which no attempt, wait or tool call may pass. `about` says what the
        call is about when a member makes several in one stage. `tools`: a free-text call (an
        answer, a contribution, an output, a synthesis), in which a member with tools may use
        them: model, tool calls, results, model again, until it answers or its `tool_budget`
        is spent, and then once more without tools. A structured call never gets tools. It is
        still one call: one request hash (its first request's), one result, summed tokens.
        `brief`: what the request is about, for a demo persona (a call without one is a plain
        question, its last message); it is never sent or stored, and it stands for that last
        message in the request hash. `race`: the finish line of a race the call is in. The
        first call to answer sets it; a call answering once it is set is `late` (its stage no
        longer waits for it): it is paid for and kept, not used."""
        if member.name in self.excluded:
            return await self._skip(member, stage, round, about)
        self.prepare([member])
        native = schema is not None and self._supports_schema(member.model)
        full = self._messages(member, messages, schema, native)
        request = self._request(member, full, schema if native else None)
        offered = self._offered.get(member.name) if tools and schema is None else None
        if offered is not None and offered.specs:
            request["tools"] = offered.specs
        else:
            offered = None
        digest = self._hash(member, messages, request, schema, stage=stage, round=round, about=about, brief=brief)
        call_id = uuid.uuid4().hex[:16]
        common = CallRoute(
            call_id=call_id, member=member.name, model=member.model, stage=stage, round=round, about=about
        )
        earlier = self._take_answered(digest)
        # Reserved before the first await, so the calls of a stage reserve one after another.
        hold = self._reserve(member, request) if earlier is None else None
        exchange = _Exchange(
            messages=full, brief=brief or plain(messages), hold=None if isinstance(hold, str) else hold
        )
        started = time.perf_counter()
        try:
            # From here on a call always ends with an event of its own, even when it is
            # cancelled at its first step: every call started has its row and final status.
            await self.emit(CallStarted(**common))
            if earlier is not None:
                exchange.ended = True
                return await self._reuse(member, common, full, digest, earlier, schema)
            if isinstance(hold, str):
                exchange.ended = True
                return await self._refuse(member, common, full, hold)
            grow = TextGrowth(self.emit, common) if self.stream and schema is None and offered is None else None
            reply = await self._complete(member, request, deadline, exchange, tool_calls=offered is not None, grow=grow)
            if offered is not None and reply.failure is None and reply.calls:
                reply = await self._use_tools(member, common, offered, request, reply, deadline, exchange)
            if schema is not None and reply.failure is None:
                reply = await self._one_answer(member, request, reply, schema, deadline, exchange)
            if reply.failure is not None:
                exchange.ended = True
                return await self._fail(member, common, exchange, reply.failure, time.perf_counter() - started)
        except asyncio.CancelledError:
            if not exchange.ended:
                exchange.ended = True
                await self.emit(
                    CallFailed(
                        **common,
                        messages=exchange.messages,
                        kind="cancelled",
                        message="cancelled",
                        latency=time.perf_counter() - started,
                        attempts=exchange.attempts,
                        **self._usage(member, exchange),
                    )
                )
            raise
        finally:
            if exchange.hold is not None and self.budget is not None:
                self.budget.settle(exchange.hold, self._spent(member, exchange, exchange.hold))
        latency = time.perf_counter() - started
        text, attempts = reply.text, exchange.attempts
        tokens_in, tokens_out = exchange.tokens
        if exchange.bad_usage is not None:
            await self.emit(WarningRaised(member=member.name, message=exchange.bad_usage))
        # The cut happens once the whole reply is in memory: litellm reads the body off the
        # socket itself, and bounding that read would take an HTTP client of our own. It still
        # keeps a runaway reply out of the store, the view and every other member's prompt.
        cap = self.defaults.max_response_chars
        truncated = len(text) > cap
        if truncated:
            text = text[:cap]
        cost = self._cost(member.model, tokens_in, tokens_out)
        parsed, parse_error = _parse(text, schema)
        if parse_error is not None and reply.again is not None:
            parse_error = f"{parse_error}{reply.again}"
        # Read and set with no await between, so exactly one call of a race wins it.
        late = race is not None and race.is_set()
        if race is not None:
            race.set()
        exchange.ended = True
        await self.emit(
            CallFinished(
                **common,
                messages=exchange.messages,
                text=text,
                truncated=truncated,
                request_hash=digest,
                late=late,
                tokens_in=tokens_in,
                tokens_out=tokens_out,
                cost=cost,
                latency=latency,
                attempts=attempts,
            )
        )
        if truncated:
            await self._warn_truncated(member)
        return CallResult(
            call_id=call_id,
            member=member.name,
            model=member.model,
            ok=True,
            text=text,
            parsed=parsed,
            parse_error=parse_error,
            truncated=truncated,
            late=late,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost=cost,
            latency=latency,
            attempts=attempts,
        )

    async def _complete(
        self,
        member: Member,
        request: dict[str, Any],
        deadline: float | None,
        exchange: _Exchange,
        *,
        tool_calls: bool,
        grow: TextGrowth | None = None,
    ) -> _Reply:
        """One request, with the retries and limits every request gets: the per-call timeout
        (every attempt within its budget from the first), the stage deadline, the endpoint's
        concurrency limit, backoff and Retry-After. `tool_calls`: a reply may ask for tools.
        `grow`: stream the reply, reporting its text as it grows."""
        loop = asyncio.get_running_loop()
        retries = member.retries if member.retries is not None else self.defaults.retries
        call_timeout = member.timeout or self.defaults.timeout
        end, per_try = deadline, None
        attempts = 0
        while True:
            attempts += 1
            exchange.attempts += 1
            try:
                async with self._limit(member):
                    # Timed once through the concurrency limit: a call queued behind
                    # other calls to the same endpoint has not started yet.
                    now = loop.time()
                    if attempts == 1:
                        end = _call_end(now, call_timeout, retries, deadline)
                    limits = [t for t in (call_timeout, None if end is None else end - now) if t is not None]
                    per_try = min(limits) if limits else None
                    if per_try is not None and per_try <= 0:
                        raise TimeoutError
                    if grow is not None:
                        grow.restart()
                    read = await asyncio.wait_for(
                        self._send(member, request, exchange, tool_calls=tool_calls, grow=grow), per_try
                    )
                text, calls, tokens_in, tokens_out = read
                exchange.count(tokens_in, tokens_out)
                return _Reply(text=text, calls=calls)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failure = describe(exc)
                if isinstance(exc, TimeoutError) and per_try is not None:
                    failure = dataclasses.replace(failure, message=f"no reply within {max(per_try, 0.0):.1f}s")
                if failure.kind in RETRYABLE and attempts <= retries:
                    asked = retry_after_seconds(exc) if failure.kind == "rate_limited" else None
                    delay = _backoff(attempts, self._rng) if asked is None else asked
                    fits = delay <= MAX_RETRY_WAIT and (end is None or loop.time() + delay < end)
                    if fits:
                        await asyncio.sleep(delay)
                        continue
                    if asked is not None:
                        failure = dataclasses.replace(
                            failure,
                            message=f"rate limited; the provider asked to wait {_seconds(asked)}, longer than this call may take",
                        )
                return _Reply(failure=failure)

    async def _send(
        self,
        member: Member,
        request: dict[str, Any],
        exchange: _Exchange,
        *,
        tool_calls: bool,
        grow: TextGrowth | None,
    ) -> Read:
        """One request on the member's route: a demo persona answers in-process from the
        call's brief (with what eval told it, if anything); any other model through litellm."""
        cap = self.defaults.max_response_chars
        if is_demo(member.model):
            return await demo_call(request, with_voter(exchange.brief, member.name), exchange.found, grow, cap)
        if grow is None:
            response = await _acompletion(self._litellm, request)
        else:
            response = await _astream(self._litellm, request, grow, cap, self.idle)
        return _read_response(response, tool_calls=tool_calls)

    async def _use_tools(
        self,
        member: Member,
        common: CallRoute,
        offered: ToolSet,
        request: dict[str, Any],
        reply: _Reply,
        deadline: float | None,
        exchange: _Exchange,
    ) -> _Reply:
        """Run the tool calls the model asks for and send it the results, until it answers;
        once `tool_budget` calls are made, ask once more without tools, every result quoted."""
        budget = self.defaults.tool_budget
        conversation = list(request["messages"])
        results: dict[str, str] = {}
        used = 0
        while reply.failure is None and reply.calls:
            conversation.append(assistant_message(reply.text, reply.calls))
            run, dropped = reply.calls[: budget - used], len(reply.calls) - (budget - used)
            for call in run:
                number = len(results) + 1
                used += 1
                text = await self._run_tool(member, common, offered, call, deadline)
                results[result_label(number, call.name)] = text
                exchange.found.append(text)
                conversation.append(result_message(call, number, text))
            if dropped > 0:
                # One note for every call past the budget, however many: a reply asking for
                # 20,000 calls must not become 20,000 results in the prompt and the store.
                note = not_run(dropped)
                results[NOT_RUN_LABEL] = note
                exchange.found.append(note)
                await self.emit(
                    WarningRaised(
                        member=member.name,
                        message=f"asked for {plural(dropped, 'more tool call')} than its tool budget "
                        f"({budget}) allows in one stage; not run",
                    )
                )
            if used >= budget:
                final = {key: value for key, value in request.items() if key != "tools"}
                final["messages"] = with_results(request["messages"], results)
                exchange.messages = final["messages"]
                if (refused := self._extend(member, exchange, final)) is not None:
                    return refused
                return await self._complete(member, final, deadline, exchange, tool_calls=False)
            exchange.messages = list(conversation)
            if (refused := self._extend(member, exchange, {**request, "messages": exchange.messages})) is not None:
                return refused
            reply = await self._complete(
                member, {**request, "messages": exchange.messages}, deadline, exchange, tool_calls=True
            )
        return reply

    async def _run_tool(
        self, member: Member, common: CallRoute, offered: ToolSet, call: RequestedCall, deadline: float | None
    ) -> str:
        """One tool call, reported as it starts and ends; returns what the model is given (the
        result, or the error's words: a failing tool is for the model to work around)."""
        route = offered.routes.get(call.name)
        arguments = parse_arguments(call.arguments)
        identity = ToolCallRoute(
            call_id=common["call_id"],
            tool_call_id=call.id,
            member=common["member"],
            stage=common["stage"],
            round=common["round"],
            about=common["about"],
            server=route.server if route else None,
            tool=route.tool if route else call.name,
            arguments=arguments if arguments is not None else call.arguments,
        )
        await self.emit(ToolCallStarted(**identity))
        started = time.perf_counter()
        try:
            if route is None or self._toolbox is None:
                outcome = failed(
                    f"there is no tool named '{call.name}'; the tools offered are {', '.join(offered.routes)}"
                )
            elif arguments is None:
                outcome = failed("the arguments must be a JSON object")
            else:
                left = None if deadline is None else deadline - asyncio.get_running_loop().time()
                outcome = await self._toolbox.call(route.server, route.tool, arguments, left)
        except asyncio.CancelledError:
            await self.emit(
                ToolCallFinished(**identity, status="failed", error="cancelled", duration=time.perf_counter() - started)
            )
            raise
        await self.emit(
            ToolCallFinished(
                **identity,
                status=outcome.status,
                result=outcome.text,
                result_chars=outcome.chars,
                truncated=outcome.truncated,
                error=outcome.error,
                duration=time.perf_counter() - started,
            )
        )
        if outcome.stopped is not None and route is not None:
            await self.emit(
                WarningRaised(
                    message=f"tool server '{route.server}' stopped during the run ({outcome.stopped}); its tools now fail"
                )
            )
        return outcome.text

    def _worst_case(self, member: Member, request: dict[str, Any]) -> float:
        """The most this request can cost (`panel_cli.llm.budget`); a model of unknown price
        counts as free (a capped run with one starts only with --allow-unknown-prices)."""
        if self.budget is None or not self.budget.prices_matter:
            return 0.0
        price = known_price(member.model, self._price)
        if price is None or price == (0.0, 0.0):
            return 0.0
        tokens = prompt_tokens(self._litellm, member.model, request["messages"], request.get("tools"))
        return worst_case(tokens, output_bound(request.get("max_tokens"), self._info(member.model)), price)

    def _reserve(self, member: Member, request: dict[str, Any]) -> Hold | str | None:
        """The call's reservation against the run's budget, the reason it does not fit, or
        None when the run has no budget."""
        if self.budget is None:
            return None
        return self.budget.reserve(self._worst_case(member, request))

    def _extend(self, member: Member, exchange: _Exchange, request: dict[str, Any]) -> _Reply | None:
        """Before a further request of a tool loop: reserve its worst case too, or end the
        call as refused by the budget (the tools' results are not answered)."""
        if self.budget is None or exchange.hold is None:
            return None
        reason = self.budget.extend(exchange.hold, self._worst_case(member, request))
        return None if reason is None else _Reply(failure=Failure(kind="budget", message=f"not made: {reason}"))

    def _spent(self, member: Member, exchange: _Exchange, hold: Hold) -> float | None:
        """What a call cost the budget: its price from the counts its provider reported, else,
        when a reply came without counts that can be used, its worst case (what it held; 0 for
        a model of unknown price); a call that got no reply at all cost nothing."""
        cost = self._cost(member.model, *exchange.tokens)
        if cost is None and exchange.replied:
            return hold.amount
        return cost

    async def _one_answer(
        self,
        member: Member,
        request: dict[str, Any],
        reply: _Reply,
        schema: type[BaseModel],
        deadline: float | None,
        exchange: _Exchange,
    ) -> _Reply:
        """A structured reply that holds two answers (two votes, two verdicts) is asked for once
        more, in the same conversation, saying why; it is still one call. The answer to that is
        the call's reply; if that request fails, the first reply stands, unusable as it is."""
        text = reply.text[: self.defaults.max_response_chars]
        found = parse_structured(text, schema)
        if not found.conflicting or found.problem is None:
            return reply
        await self.emit(
            WarningRaised(member=member.name, message=f"its reply could not be used ({found.problem}); asked once more")
        )
        task = find_task(str(request["messages"][-1].get("content") or ""))
        again = one_answer_prompt(found.problem)
        messages = [
            *request["messages"],
            {"role": "assistant", "content": text},
            {"role": "user", "content": mark(again, task) if task is not None else again},
        ]
        if self._extend(member, exchange, {**request, "messages": messages}) is not None:
            return dataclasses.replace(reply, again="; the budget left no room to ask once more")
        exchange.messages = messages
        second = await self._complete(member, {**request, "messages": messages}, deadline, exchange, tool_calls=False)
        if second.failure is not None:
            return dataclasses.replace(
                reply, again=f"; asked once more, that request failed ({second.failure.message})"
            )
        return dataclasses.replace(second, again=", again when asked once more")

    async def _refuse(
        self, member: Member, common: CallRoute, messages: list[dict[str, Any]], reason: str
    ) -> CallResult:
        """Record a call the budget does not allow, with kind `budget`: no request is made."""
        message = f"not made: {reason}"
        await self.emit(
            CallFailed(**common, messages=messages, kind="budget", message=message, latency=0.0, attempts=0)
        )
        return CallResult(
            call_id=common["call_id"],
            member=member.name,
            model=member.model,
            ok=False,
            error_kind="budget",
            error=message,
        )

    @property
    def budget_exhausted(self) -> bool:
        """Whether the budget has refused a call of this run: protocols end with what they have."""
        return self.budget is not None and self.budget.exhausted

    def _take_answered(self, digest: str) -> AnsweredCall | None:
        """The next stored reply to this request not used yet, if any (each is used once)."""
        replies = self._answered.get(digest)
        while replies:
            earlier = replies.popleft()
            if earlier.response is not None:
                return earlier
        return None

    async def _reuse(
        self,
        member: Member,
        common: CallRoute,
        messages: list[dict[str, Any]],
        digest: str,
        earlier: AnsweredCall,
        schema: type[BaseModel] | None,
    ) -> CallResult:
        """Answer a request from the run being resumed: reported like a call, marked `reused`,
        with the tokens and cost the earlier run paid for it (a run's total counts every call it
        stands on; `spent_anew` leaves these out); no request is made."""
        text, truncated = earlier.response or "", earlier.truncated
        tokens_in, tokens_out, cost = earlier.tokens_in, earlier.tokens_out, earlier.cost
        await self.emit(
            CallFinished(
                **common,
                messages=messages,
                text=text,
                truncated=truncated,
                request_hash=digest,
                reused=True,
                tokens_in=tokens_in,
                tokens_out=tokens_out,
                cost=cost,
                latency=0.0,
                attempts=0,
            )
        )
        if truncated:
            await self._warn_truncated(member)
        parsed, parse_error = _parse(text, schema)
        return CallResult(
            call_id=common["call_id"],
            member=member.name,
            model=member.model,
            ok=True,
            text=text,
            parsed=parsed,
            parse_error=parse_error,
            truncated=truncated,
            reused=True,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost=cost,
        )

    async def _warn_truncated(self, member: Member) -> None:
        await self.emit(
            WarningRaised(
                member=member.name, message=f"its reply was cut at {self.defaults.max_response_chars:,} characters"
            )
        )

    async def _fail(
        self, member: Member, common: CallRoute, exchange: _Exchange, failure: Failure, latency: float
    ) -> CallResult:
        """Report a failed call, with the tokens its replies reported, if any (a tool loop that
        then failed, a reply asked for once more); a member that failed for good is excluded
        from the rest of the run. A key or a request refused says where it went and with which
        key: a proxy's own words (`No connected db`) rarely say."""
        attempts = exchange.attempts
        if failure.kind in SENT_WRONG and not is_demo(member.model):
            sent = f"{member.name} called {endpoint_of(member)} with {key_source(member)}"
            failure = dataclasses.replace(failure, message=f"{failure.message} ({sent})")
        await self.emit(
            CallFailed(
                **common,
                messages=exchange.messages,
                kind=failure.kind,
                message=failure.message,
                detail=failure.detail,
                latency=latency,
                attempts=attempts,
                **self._usage(member, exchange),
            )
        )
        if failure.permanent and member.name not in self.excluded:
            reason = f"{failure.kind}: {failure.message}"
            self.excluded[member.name] = reason
            self._excluded_kind[member.name] = failure.kind
            await self.emit(
                WarningRaised(
                    member=member.name, message=f"failed for good ({reason}); it is not called again in this run"
                )
            )
        return CallResult(
            call_id=common["call_id"],
            member=member.name,
            model=member.model,
            ok=False,
            error_kind=failure.kind,
            error=failure.message,
            latency=latency,
            attempts=attempts,
        )

    async def _skip(self, member: Member, stage: str, round: int | None, about: str | None) -> CallResult:
        reason = self.excluded[member.name]
        await self.emit(
            MemberSkipped(member=member.name, model=member.model, stage=stage, round=round, about=about, reason=reason)
        )
        return CallResult(
            call_id=uuid.uuid4().hex[:16],
            member=member.name,
            model=member.model,
            ok=False,
            skipped=True,
            error_kind=self._excluded_kind[member.name],
            error=f"not called: failed for good earlier ({reason})",
        )

    async def aclose(self) -> None:
        """Close litellm's pooled HTTP clients, which otherwise warn about unclosed transports,
        and forget them, so a later gateway in the same process opens fresh ones. They belong
        to the process, not to one gateway; a process that never imported litellm has none."""
        litellm = sys.modules.get("litellm")
        if litellm is None:
            return
        close = getattr(litellm, "close_litellm_async_clients", None)
        if close is not None:
            with contextlib.suppress(Exception):
                await close()
        cache = getattr(litellm, "in_memory_llm_clients_cache", None)
        if cache is not None and hasattr(cache, "flush_cache"):
            cache.flush_cache()


def _parse(text: str, schema: type[BaseModel] | None) -> tuple[dict[str, Any] | None, str | None]:
    """The structured object a reply holds, or why it holds none; (None, None) without a schema."""
    if schema is None:
        return None, None
    found = parse_structured(text, schema)
    return (found.value.model_dump() if found.value is not None else None), found.problem


def _read_response(
    response: Any, *, tool_calls: bool = False
) -> tuple[str, list[RequestedCall], int | None, int | None]:
    """The reply's text, lone surrogates replaced, and, when tools were offered, the tool calls
    it asks for (a reply that asks for tools may have no text). The counts are as the provider
    reported them, whatever they are: `_Exchange.count` judges them. A streamed reply was read
    as it came."""
    if isinstance(response, StreamedReply):
        return response.text, [], response.tokens_in, response.tokens_out
    try:
        message = response.choices[0].message
        content = message.content
    except (AttributeError, IndexError, TypeError):
        raise ClassifiedError("malformed", "the reply had no message") from None
    calls = requested_calls(message) if tool_calls else []
    if not calls and (not isinstance(content, str) or not content.strip()):
        raise ClassifiedError("malformed", "the reply was empty")
    usage = getattr(response, "usage", None)
    tokens_in = getattr(usage, "prompt_tokens", None) if usage else None
    tokens_out = getattr(usage, "completion_tokens", None) if usage else None
    return (clean_text(content) if isinstance(content, str) else ""), calls, tokens_in, tokens_out
