"""The one way engines call models.

litellm reaches every provider, but several of its defaults hurt a deliberation tool: its
SDK retries stretch a short timeout into seconds, and it prints banners. So the gateway owns
the deadline and the retries (`retries`), a concurrency limit per endpoint, structured output,
the cost of each call (`prices`) and the size of a reply. It reports every call as events and
never raises for a provider failure: the result says what went wrong. A member that fails for
good is not called again in the run (`exclusion`). A resumed run's gateway holds the replies
its earlier run got, by request hash, and answers those requests from them instead of paying
for them again (`reuse`).

`Gateway.call` puts the steps of one call in order; each step is a module of its own:
building the request (`request`), the budget's hold on it (`holds`), sending it on its route
(`send`: a demo persona in-process, anything else through litellm, which only a member that is
not a persona imports, `litellm_setup`), tools (`tool_loop`) and a structured reply asked for
once more (`one_answer`). Each call may carry a brief (`panel_cli.llm.brief`), which the
personas answer from and which no provider ever receives.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import random
import time
import uuid
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from panel_cli.config import DEFAULT_IDLE_TIMEOUT, Defaults, Member
from panel_cli.events import CallFailed, CallFinished, CallRoute, CallStarted, WarningRaised
from panel_cli.llm.brief import RequestBrief, plain
from panel_cli.llm.budget import Budget, model_info
from panel_cli.llm.errors import Failure
from panel_cli.llm.exchange import Emit, Exchange, Reply
from panel_cli.llm.exclusion import Exclusions
from panel_cli.llm.holds import CallHolds
from panel_cli.llm.key_hosts import endpoint_of, key_source
from panel_cli.llm.litellm_setup import close_litellm_clients, load_litellm
from panel_cli.llm.one_answer import ask_for_one_answer
from panel_cli.llm.prices import Prices, table_price
from panel_cli.llm.request import Requests
from panel_cli.llm.result import CallResult, cut_warning, parse_reply
from panel_cli.llm.retries import Attempts, with_retries
from panel_cli.llm.reuse import AnsweredCall, AnsweredCalls, reuse
from panel_cli.llm.send import send
from panel_cli.llm.stream import TextGrowth
from panel_cli.llm.tool_calls import ToolSet
from panel_cli.llm.tool_loop import Toolbox, ToolLoop
from panel_cli.models.routes import is_demo, needs_litellm

# The failures that may come of sending the wrong key, or sending it to the wrong place.
SENT_WRONG = frozenset({"auth", "bad_request"})


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
        `limits`: the per-endpoint semaphores, when runs in flight at once (a batch) share
        them, so an endpoint's concurrency limit holds across the runs, not within each.
        `budget`: the run's spending cap (`panel_cli.llm.budget`), which every call reserves
        its worst case from before its request. `stream`: the live view draws the run, so the
        calls of members that stream (`Member.stream`) report their text as it grows. `idle`:
        how long a streamed reply may go without a new piece before its call ends as a timeout
        (None: as long as its deadline)."""
        self.emit = emit
        self.idle = idle
        self.budget = budget
        self.stream = stream
        self.defaults = defaults or Defaults()
        self.concurrency = dict(concurrency or {})
        self._rng = rng or random.Random()
        self._limits: dict[str, asyncio.Semaphore] = limits if limits is not None else {}
        self._prices = Prices(
            lambda model: table_price(self._litellm, model), lambda model: model_info(self._litellm, model)
        )
        self._holds = CallHolds(budget, self._prices, load_litellm)
        self._requests = Requests(self.defaults, load_litellm)
        self._exclusions = Exclusions()
        self._answered = AnsweredCalls(answered)
        # The run's tool servers and the tools each member is offered (`equip`).
        self._toolbox: Toolbox | None = None
        self._offered: dict[str, ToolSet] = {}

    @property
    def _litellm(self) -> ModuleType:
        """litellm, imported the first time a real member's call or a check needs it."""
        return load_litellm()

    @property
    def excluded(self) -> dict[str, str]:
        """The members that failed for good, with the reason; the run's result reports them."""
        return self._exclusions.reasons

    @property
    def budget_exhausted(self) -> bool:
        """Whether the budget has refused a call of this run: protocols end with what they have."""
        return self._holds.exhausted

    def prepare(self, members: Sequence[Member]) -> None:
        """Import litellm now if any of `members` needs it, so that the import (seconds of
        CPU, blocking) never eats into a stage's time or a call's deadline."""
        if needs_litellm(members):
            load_litellm()

    def follow(self, turns: Sequence[Mapping[str, Any]]) -> None:
        """Give every call of the run a follow-up's earlier turns first (after the member's
        system prompt), as a chat does: each earlier question as the user's, its final answer
        as the assistant's. The attachments still go to the new question's first prompt."""
        self._requests.follow(turns)

    def equip(
        self, *, attachments: str = "", toolbox: Toolbox | None = None, offered: dict[str, ToolSet] | None = None
    ) -> None:
        """Set what every call of the run gets: `attachments` go before the first prompt of
        each call; `offered` (member -> its tools) are served by `toolbox` in free-text calls."""
        self._requests.attachments = attachments
        self._toolbox = toolbox
        self._offered = dict(offered or {}) if toolbox is not None else {}

    def supports_tools(self, model: str) -> bool:
        """Whether a model may be offered tools: litellm's model table says it has function
        calling, or does not know the model (a new one, a local endpoint), which is then tried.
        The demo personas call tools."""
        if is_demo(model):
            return True
        try:
            info = self._litellm.get_model_info(model)
        except Exception:
            return True
        return info.get("supports_function_calling") is not False

    def messages_for(
        self, member: Member, messages: list[dict[str, Any]], schema: type[BaseModel] | None = None
    ) -> list[dict[str, Any]]:
        """The messages a call would send, system prompt, attachments and JSON instructions
        included, so that `panel estimate` counts exactly what a run sends."""
        return self._requests.messages(member, messages, schema, self._requests.native(member.model, schema))

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
        them (`panel_cli.llm.tool_loop`); a structured call never gets tools. `brief`: what the
        request is about, for a demo persona (a call without one is a plain question, its last
        message); it is never sent or stored, and it stands for that last message in the
        request hash. `race`: the finish line of a race the call is in. The first call to
        answer sets it; a call answering once it is set is `late` (its stage no longer waits
        for it): it is paid for and kept, not used."""
        if member.name in self._exclusions:
            return await self._exclusions.skip(self.emit, member, stage, round, about)
        self.prepare([member])
        native = self._requests.native(member.model, schema)
        full = self._requests.messages(member, messages, schema, native)
        request = self._requests.request(member, full, schema if native else None)
        offered = self._offered.get(member.name) if tools and schema is None else None
        if offered is not None and offered.specs:
            request["tools"] = offered.specs
        else:
            offered = None
        digest = self._requests.identity(
            member, messages, request, schema, stage=stage, round=round, about=about, brief=brief
        )
        route = CallRoute(
            call_id=uuid.uuid4().hex[:16], member=member.name, model=member.model, stage=stage, round=round, about=about
        )
        earlier = self._answered.take(digest)
        # Reserved before the first await, so the calls of a stage reserve one after another.
        hold = self._holds.reserve(member.model, request) if earlier is None else None
        exchange = Exchange(messages=full, brief=brief or plain(messages), hold=None if isinstance(hold, str) else hold)
        complete = functools.partial(self._complete, member, deadline, exchange)
        extend = functools.partial(self._holds.extend, exchange, member.model)
        started = time.perf_counter()
        try:
            # From here on a call always ends with an event of its own, even when it is
            # cancelled at its first step: every call started has its row and final status.
            await self.emit(CallStarted(**route))
            if earlier is not None:
                exchange.ended = True
                cap = self.defaults.max_response_chars
                return await reuse(self.emit, member, route, full, digest, earlier, schema, cap)
            if isinstance(hold, str):
                exchange.ended = True
                return await self._refuse(member, route, full, hold)
            streams = self.stream and member.stream and schema is None and offered is None
            grow = TextGrowth(self.emit, route) if streams else None
            reply = await complete(request, offered is not None, grow)
            if offered is not None and reply.failure is None and reply.calls:
                tool_loop = ToolLoop(
                    self.emit, self._toolbox, offered, budget=self.defaults.tool_budget, route=route, deadline=deadline
                )
                reply = await tool_loop.run(request, reply, exchange, complete=complete, extend=extend)
            if schema is not None and reply.failure is None:
                reply = await ask_for_one_answer(
                    reply,
                    request,
                    schema,
                    exchange,
                    member=member.name,
                    cap=self.defaults.max_response_chars,
                    emit=self.emit,
                    complete=complete,
                    extend=extend,
                )
            if reply.failure is not None:
                exchange.ended = True
                return await self._fail(member, route, exchange, reply.failure, time.perf_counter() - started)
        except asyncio.CancelledError:
            if not exchange.ended:
                exchange.ended = True
                failure = Failure(kind="cancelled", message="cancelled")
                await self._report_failed(member, route, exchange, failure, time.perf_counter() - started)
            raise
        finally:
            self._holds.settle(exchange, member.model)
        return await self._finish(member, route, exchange, reply, digest, schema, race, time.perf_counter() - started)

    async def _complete(
        self,
        member: Member,
        deadline: float | None,
        exchange: Exchange,
        request: dict[str, Any],
        tool_calls: bool,
        grow: TextGrowth | None = None,
    ) -> Reply:
        """One request of the call, with the retries and limits every request gets
        (`panel_cli.llm.retries`). `tool_calls`: its reply may ask for tools. `grow`: stream
        the reply, reporting its text as it grows."""
        cap = self.defaults.max_response_chars
        return await with_retries(
            lambda: send(member.name, request, exchange, tool_calls=tool_calls, grow=grow, cap=cap, idle=self.idle),
            rules=Attempts(
                retries=member.retries if member.retries is not None else self.defaults.retries,
                timeout=member.timeout or self.defaults.timeout,
            ),
            limit=self._limit(member),
            deadline=deadline,
            exchange=exchange,
            rng=self._rng,
            grow=grow,
        )

    def _limit(self, member: Member) -> asyncio.Semaphore:
        """The member's endpoint's concurrency limit (its `api_base`, else its provider)."""
        key = member.api_base or member.provider
        if key not in self._limits:
            size = self.concurrency.get(key) or self.concurrency.get(member.provider) or self.defaults.concurrency
            self._limits[key] = asyncio.Semaphore(size)
        return self._limits[key]

    async def _finish(
        self,
        member: Member,
        route: CallRoute,
        exchange: Exchange,
        reply: Reply,
        digest: str,
        schema: type[BaseModel] | None,
        race: asyncio.Event | None,
        latency: float,
    ) -> CallResult:
        """Report an answered call: its text cut at `max_response_chars`, its cost, the object it
        holds when one was asked for, and whether it came after its race was won."""
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
        cost = self._prices.cost(member.model, tokens_in, tokens_out)
        parsed, parse_error = parse_reply(text, schema)
        if parse_error is not None and reply.again is not None:
            parse_error = f"{parse_error}{reply.again}"
        # Read and set with no await between, so exactly one call of a race wins it.
        late = race is not None and race.is_set()
        if race is not None:
            race.set()
        exchange.ended = True
        await self.emit(
            CallFinished(
                **route,
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
            await self.emit(cut_warning(member.name, cap))
        return CallResult(
            call_id=route["call_id"],
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

    async def _fail(
        self, member: Member, route: CallRoute, exchange: Exchange, failure: Failure, latency: float
    ) -> CallResult:
        """Report a failed call; a member that failed for good is excluded from the rest of the
        run. A key or a request refused says where it went and with which key: a proxy's own
        words (`No connected db`) rarely say."""
        if failure.kind in SENT_WRONG and not is_demo(member.model):
            sent = f"{member.name} called {endpoint_of(member)} with {key_source(member)}"
            failure = dataclasses.replace(failure, message=f"{failure.message} ({sent})")
        await self._report_failed(member, route, exchange, failure, latency)
        await self._exclusions.exclude(self.emit, member, failure)
        return CallResult(
            call_id=route["call_id"],
            member=member.name,
            model=member.model,
            ok=False,
            error_kind=failure.kind,
            error=failure.message,
            latency=latency,
            attempts=exchange.attempts,
        )

    async def _report_failed(
        self, member: Member, route: CallRoute, exchange: Exchange, failure: Failure, latency: float
    ) -> None:
        """The call's failure, with the tokens and cost its replies reported, if any (a tool loop
        that then failed, a reply asked for once more); nothing of them when no reply came."""
        usage: dict[str, Any] = {}
        if exchange.replied:
            tokens_in, tokens_out = exchange.tokens
            cost = self._prices.cost(member.model, tokens_in, tokens_out)
            usage = {"tokens_in": tokens_in, "tokens_out": tokens_out, "cost": cost}
        await self.emit(
            CallFailed(
                **route,
                messages=exchange.messages,
                kind=failure.kind,
                message=failure.message,
                detail=failure.detail,
                latency=latency,
                attempts=exchange.attempts,
                **usage,
            )
        )

    async def _refuse(
        self, member: Member, route: CallRoute, messages: list[dict[str, Any]], reason: str
    ) -> CallResult:
        """Record a call the budget does not allow, with kind `budget`: no request is made."""
        message = f"not made: {reason}"
        await self.emit(CallFailed(**route, messages=messages, kind="budget", message=message, latency=0.0, attempts=0))
        return CallResult(
            call_id=route["call_id"],
            member=member.name,
            model=member.model,
            ok=False,
            error_kind="budget",
            error=message,
        )

    async def aclose(self) -> None:
        """Close litellm's pooled HTTP clients (`panel_cli.llm.litellm_setup`)."""
        await close_litellm_clients()
