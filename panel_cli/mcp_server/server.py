"""The MCP server: a tool per protocol (named as the protocol, its arguments from the protocol's
spec), `list_panels` and `history`, and the stored runs and panel files as resources.

Built on the SDK's low-level `Server`, which takes each tool's JSON Schema as given, so the
tools follow the protocol registry (a protocol registered from Python gets its tool on the next
`tools/list`) and the folder (a panel added is offered at once). Every tool call is one of two
things: a result (a run's, or `list_panels`' and `history`'s data), or one sentence with
`isError` set (bad arguments, a panel that is not there, a run over the cap, a run with no
answer). A run is cancelled as Ctrl-C cancels one: the request's cancellation cancels the run
once, and waits, shielded, for it to record its calls and end `interrupted`.
"""

from __future__ import annotations

import asyncio
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

from panel_cli.errors import PanelError, UserError
from panel_cli.mcp_server import DEFAULT_MAX_COST, results
from panel_cli.mcp_server.arguments import given_options, read_arguments, tool_schema
from panel_cli.mcp_server.catalog import PanelCatalog, cost_range, panel_entry
from panel_cli.mcp_server.folders import FilesFolder, PanelFolder, quoted
from panel_cli.mcp_server.history import history_schema, recent_runs
from panel_cli.mcp_server.progress import RunProgress
from panel_cli.mcp_server.resources import listed, panel_uri, read, templates
from panel_cli.mcp_server.run import FinishedRun, run_for_request
from panel_cli.mcp_server.transports import TOKEN_VARIABLE, Address, say, serve_http, serve_stdio
from panel_cli.protocols.registry import ProtocolSpec, specs
from panel_cli.runs.controls import RunControls
from panel_cli.runs.execute import new_run_id
from panel_cli.runs.panels import RunPanel, panel_for_run

# How long a cancelled run may take to record its calls and close the store (as on Ctrl-C).
CLEANUP_SECONDS = 5.0
# How long the last progress notification may take before the result goes out without it.
PROGRESS_GUARD = 2.0
LIST_PANELS = "list_panels"
HISTORY = "history"
INSTRUCTIONS = (
    "panel puts several language models on a panel and runs a deliberation protocol among them. Each protocol is "
    "a tool: give it a question and a panel's name (list_panels shows them, with members and what a run costs). "
    "A result's structuredContent is the run's JSON result; panel://runs/{run_id} is the whole run as Markdown; "
    "history finds earlier runs."
)


@dataclass(frozen=True)
class ServerSettings:
    """What the person who started `panel mcp` chose: the panel folder, the store, the cap on
    each run, the folder attachments may come from (None: no attachments), whether a member of
    unknown price may run under the cap, and values to scrub from everything sent (the HTTP
    bearer token)."""

    panels: Path
    db: Path
    max_cost: float = DEFAULT_MAX_COST
    files: Path | None = None
    allow_unknown_prices: bool = False
    secrets: tuple[str, ...] = ()


class PanelServer:
    """The handlers of one `panel mcp`; `lowlevel()` is the SDK server that calls them."""

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        self.folder = PanelFolder(settings.panels)
        self.files = FilesFolder(settings.files) if settings.files is not None else None

    def lowlevel(self) -> Server[Any]:
        return Server(
            "panel",
            version=version("panel-cli"),
            instructions=INSTRUCTIONS,
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_list_resources=self.list_resources,
            on_list_resource_templates=self.list_resource_templates,
            on_read_resource=self.read_resource,
        )

    # -- tools -----------------------------------------------------------------------------

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        catalog = await asyncio.to_thread(PanelCatalog, self.folder)
        return types.ListToolsResult(tools=self.tools(catalog))

    def tools(self, catalog: PanelCatalog) -> list[types.Tool]:
        """Every protocol's tool, then `list_panels` and `history`."""
        tools = [self.protocol_tool(protocol, catalog) for protocol in specs()]
        clash = {tool.name for tool in tools} & {LIST_PANELS, HISTORY}
        if clash:
            raise ValueError(f"protocol {sorted(clash)[0]}: its tool's name is taken by panel's own")
        looking = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)
        return [
            *tools,
            types.Tool(
                name=LIST_PANELS,
                title="panel list_panels",
                description=f"The panels in {self.folder.path}: each one's name, protocol and members, and what a "
                "run would take (calls and cost, low to high, from panel estimate). Calls no model.",
                input_schema={"type": "object", "properties": {}, "additionalProperties": False},
                annotations=looking,
            ),
            types.Tool(
                name=HISTORY,
                title="panel history",
                description="Stored runs, newest first (panel history list): id, protocol, status, question, "
                "outcome, calls and cost, and the URI that reads the whole run. Calls no model.",
                input_schema=history_schema(),
                annotations=looking,
            ),
        ]

    def protocol_tool(self, protocol: ProtocolSpec, catalog: PanelCatalog) -> types.Tool:
        cap = self.settings.max_cost
        description = "\n\n".join(
            text
            for text in (
                protocol.summary,
                protocol.description,
                catalog.describe(protocol.name),
                f"Each run spends at most ${cap:g} (the server's --max-cost; max_cost lowers it); a run whose lowest "
                "estimate is above that is refused with the estimate. The result's structuredContent is the run's "
                "JSON result (run_id, final_answer, cost, calls_by_status, …); panel://runs/{run_id} reads the "
                "whole run.",
            )
            if text
        )
        return types.Tool(
            name=protocol.name,
            title=f"panel {protocol.name}",
            description=description,
            input_schema=self.schema(protocol, catalog),
            output_schema=results.envelope_schema(),
            annotations=types.ToolAnnotations(
                read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True
            ),
        )

    def schema(self, protocol: ProtocolSpec, catalog: PanelCatalog) -> dict[str, Any]:
        return tool_schema(
            protocol, catalog.choice(protocol.name), cap=self.settings.max_cost, attachments=self.files is not None
        )

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        """A tool's result, or one sentence with `isError`: never a transport error for what
        the arguments or the run did."""
        secrets = self.settings.secrets
        try:
            if params.name == LIST_PANELS:
                return await self.list_panels(params.arguments)
            if params.name == HISTORY:
                payload, text = await asyncio.to_thread(
                    recent_runs, self.settings.db, read_arguments(history_schema(), params.arguments)
                )
                return results.data(payload, text, secrets)
            protocol = next((each for each in specs() if each.name == params.name), None)
            if protocol is None:
                raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {quoted(params.name)}.")
            return await self.run_protocol(ctx, protocol, params.arguments)
        except PanelError as error:
            return results.refusal(error.message, secrets)
        except MCPError:
            raise
        except Exception as error:
            message = f"unexpected error: {type(error).__name__}: {error}"
            refused = results.refusal(message, secrets)
            said = refused.content[0]  # a refusal is one text, scrubbed
            if isinstance(said, types.TextContent):
                sys.stderr.write(f"panel mcp: {params.name}: {said.text}\n")
            return refused

    async def list_panels(self, arguments: Mapping[str, Any] | None) -> types.CallToolResult:
        read_arguments({"type": "object", "properties": {}, "additionalProperties": False}, arguments)
        catalog = await asyncio.to_thread(PanelCatalog, self.folder)
        entries = [await asyncio.to_thread(panel_entry, entry, panel_uri(entry.name)) for entry in catalog.panels]
        lines = [
            f"{entry.name}: {entry.problem}"
            if entry.problem
            else f"{entry.name} ({entry.protocol or 'any protocol'}: {', '.join(m.name for m in entry.members)})"
            + (f": {entry.estimate.calls}, {entry.estimate.cost}" if entry.estimate else "")
            for entry in entries
        ]
        text = "\n".join(lines) if lines else f"No panel in {self.folder.path}."
        payload = {"folder": str(self.folder.path), "panels": [entry.model_dump(mode="json") for entry in entries]}
        return results.data(payload, text, self.settings.secrets)

    async def run_protocol(
        self, ctx: ServerRequestContext[Any], protocol: ProtocolSpec, arguments: Mapping[str, Any] | None
    ) -> types.CallToolResult:
        """Check the request whole, then run: nothing is started for a request refused."""
        catalog = await asyncio.to_thread(PanelCatalog, self.folder)
        given = read_arguments(self.schema(protocol, catalog), arguments)
        question = given["question"]
        if not question.strip():
            raise UserError("question: it is blank.")
        path = catalog.file_for(protocol.name, given.get("panel"))
        attach = [self.files.file(entry) for entry in given.get("attach", [])] if self.files is not None else []
        chosen = await asyncio.to_thread(panel_for_run, protocol, path, given_options(protocol, given), attach=attach)
        cap = self.cap(given.get("max_cost"), chosen)
        await asyncio.to_thread(within_cap, chosen, question, cap)
        controls = RunControls(max_cost=cap, allow_unknown_prices=self.settings.allow_unknown_prices)
        finished = await self.execute(ctx, chosen, question, controls)
        return results.run_result(finished, chosen.panel, self.settings.secrets)

    def cap(self, asked: float | None, chosen: RunPanel) -> float:
        """The run's cap: the server's, lowered by the request's `max_cost` and the panel's own."""
        caps = [self.settings.max_cost, asked, chosen.panel.defaults.max_cost]
        return min(cap for cap in caps if cap is not None)

    async def execute(
        self, ctx: ServerRequestContext[Any], chosen: RunPanel, question: str, controls: RunControls
    ) -> FinishedRun:
        """The run, its progress sent as it goes. Cancelled (the client cancelled the request,
        or the server is stopping), the run is cancelled once and gets CLEANUP_SECONDS,
        shielded, to store its calls and end `interrupted`."""

        async def report(progress: float, message: str) -> None:
            await ctx.session.report_progress(progress, None, message)

        progress = RunProgress(report)
        sender = asyncio.create_task(progress.deliver())
        run_id = new_run_id()
        run = asyncio.create_task(
            run_for_request(
                chosen, question, controls=controls, db_path=self.settings.db, progress=progress, run_id=run_id
            )
        )
        try:
            finished = await asyncio.shield(run)
        except asyncio.CancelledError:
            run.cancel()
            with anyio.CancelScope(shield=True):
                await asyncio.wait({run}, timeout=CLEANUP_SECONDS)
            sender.cancel()
            raise
        except BaseException as error:
            sender.cancel()
            if isinstance(error, Exception) and not isinstance(error, PanelError):
                raise PanelError(f"The run {run_id} failed: {type(error).__name__}: {error}") from error
            raise
        await progress.finish(sender, PROGRESS_GUARD)
        return finished

    # -- resources -------------------------------------------------------------------------

    async def list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        catalog = await asyncio.to_thread(PanelCatalog, self.folder)
        try:
            resources = await asyncio.to_thread(listed, self.settings.db, catalog)
        except PanelError as error:
            raise MCPError(code=types.INTERNAL_ERROR, message=error.message) from None
        return types.ListResourcesResult(resources=resources)

    async def list_resource_templates(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=templates())

    async def read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        try:
            return await asyncio.to_thread(
                read, str(params.uri), db=self.settings.db, folder=self.folder, secrets=self.settings.secrets
            )
        except PanelError as error:
            raise MCPError(code=types.INTERNAL_ERROR, message=error.message) from None


def within_cap(chosen: RunPanel, question: str, cap: float) -> None:
    """Refuse, with the estimate, a run whose lowest estimate is above `cap`. A panel of demo
    personas costs nothing and is not estimated. Blocks (litellm's import, its token counter)."""
    from panel_cli.models.routes import needs_litellm

    panel = chosen.panel
    if not needs_litellm(panel.callable_members()):
        return
    from panel_cli.estimate.build import estimate_run
    from panel_cli.llm.litellm_setup import load_litellm
    from panel_cli.runs.prepare import check_routable

    check_routable(load_litellm(), panel)
    estimate = estimate_run(panel, question)
    low = estimate.cost_low
    if low is not None and not math.isclose(low, cap) and low > cap:
        figures = cost_range(low, estimate.cost_high, estimate.complete, simulated=False)
        raise UserError(
            f"This run would cost {figures} ({estimate.calls_low} to {estimate.calls_high} calls, by panel estimate), "
            f"more than the cap of ${cap:g} a run; nothing was started."
        )


async def serve(
    settings: ServerSettings, address: Address | None = None, token: str | None = None, *, show_token: bool = True
) -> None:
    """Serve until the client leaves (stdio: it closes stdin) or the task is cancelled (a signal).
    Over HTTP (`address`), every request must carry `token`; the URL goes to stderr, and the
    token too when `show_token` (not when it came from PANEL_MCP_TOKEN)."""
    server = PanelServer(settings).lowlevel()
    where = f"panels in {settings.panels}, each run capped at ${settings.max_cost:g}"
    if address is None:
        say(f"serving over stdio ({where}).")
        await serve_stdio(server)
        return
    assert token is not None

    def announce(url: str) -> None:
        say(f"serving {url} ({where}).")
        shown = token if show_token else f"<the token in {TOKEN_VARIABLE}>"
        say(f"every request needs the header: Authorization: Bearer {shown}")

    await serve_http(server, address, token, announce)
