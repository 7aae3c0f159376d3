"""A call whose member has tools: model, tool calls, results, model again, until it answers or
its `tool_budget` is spent, and then once more without tools, every result quoted. It is still
one call: one request hash (its first request's), one result, summed tokens.

The tools themselves are served by whatever implements `Toolbox` (the run's MCP servers,
`panel_cli.tools.servers`); the gateway knows them only through it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Protocol

from panel_cli.events import CallRoute, ToolCallFinished, ToolCallRoute, ToolCallStarted, WarningRaised
from panel_cli.llm.exchange import Complete, Emit, Exchange, Extend, Reply
from panel_cli.llm.tool_calls import (
    NOT_RUN_LABEL,
    RequestedCall,
    ToolOutcome,
    ToolSet,
    assistant_message,
    failed,
    not_run,
    parse_arguments,
    result_label,
    result_message,
    with_results,
)
from panel_cli.wording import plural


class Toolbox(Protocol):
    """What serves a run's tool calls: a tool of a server, called with its arguments, within
    `timeout` seconds (None: the server's own limit); never raises for a tool that fails."""

    async def call(self, server: str, tool: str, arguments: dict[str, Any], timeout: float | None) -> ToolOutcome: ...


class ToolLoop:
    """One call's use of tools: the tools its member is `offered`, served by `toolbox`, at most
    `budget` tool calls, within the stage's `deadline` (a `loop.time()` instant)."""

    def __init__(
        self,
        emit: Emit,
        toolbox: Toolbox | None,
        offered: ToolSet,
        *,
        budget: int,
        route: CallRoute,
        deadline: float | None,
    ) -> None:
        self.emit = emit
        self.toolbox = toolbox
        self.offered = offered
        self.budget = budget
        self.route = route
        self.deadline = deadline

    async def run(
        self, request: dict[str, Any], reply: Reply, exchange: Exchange, *, complete: Complete, extend: Extend
    ) -> Reply:
        """Run the tool calls the model asks for and send it the results (`complete`, each
        request reserved first by `extend`), until it answers; once `budget` calls are made,
        ask once more without tools, every result quoted."""
        conversation = list(request["messages"])
        results: dict[str, str] = {}
        used = 0
        while reply.failure is None and reply.calls:
            conversation.append(assistant_message(reply.text, reply.calls))
            run, dropped = reply.calls[: self.budget - used], len(reply.calls) - (self.budget - used)
            for call in run:
                number = len(results) + 1
                used += 1
                text = await self._run_tool(call)
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
                        member=self.route["member"],
                        message=f"asked for {plural(dropped, 'more tool call')} than its tool budget "
                        f"({self.budget}) allows in one stage; not run",
                    )
                )
            if used >= self.budget:
                final = {key: value for key, value in request.items() if key != "tools"}
                final["messages"] = with_results(request["messages"], results)
                exchange.messages = final["messages"]
                if (refused := extend(final)) is not None:
                    return refused
                return await complete(final, False)
            exchange.messages = list(conversation)
            if (refused := extend({**request, "messages": exchange.messages})) is not None:
                return refused
            reply = await complete({**request, "messages": exchange.messages}, True)
        return reply

    async def _run_tool(self, call: RequestedCall) -> str:
        """One tool call, reported as it starts and ends; returns what the model is given (the
        result, or the error's words: a failing tool is for the model to work around)."""
        route = self.offered.routes.get(call.name)
        arguments = parse_arguments(call.arguments)
        identity = ToolCallRoute(
            call_id=self.route["call_id"],
            tool_call_id=call.id,
            member=self.route["member"],
            stage=self.route["stage"],
            round=self.route["round"],
            about=self.route["about"],
            server=route.server if route else None,
            tool=route.tool if route else call.name,
            arguments=arguments if arguments is not None else call.arguments,
        )
        await self.emit(ToolCallStarted(**identity))
        started = time.perf_counter()
        try:
            if route is None or self.toolbox is None:
                outcome = failed(
                    f"there is no tool named '{call.name}'; the tools offered are {', '.join(self.offered.routes)}"
                )
            elif arguments is None:
                outcome = failed("the arguments must be a JSON object")
            else:
                left = None if self.deadline is None else self.deadline - asyncio.get_running_loop().time()
                outcome = await self.toolbox.call(route.server, route.tool, arguments, left)
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
