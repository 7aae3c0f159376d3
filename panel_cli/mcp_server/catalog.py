"""The panel folder as the tools see it: which panels each protocol can run, the one run when
the agent names none, and `list_panels`' entries with what a run would cost.

A panel can run a protocol when its file declares that protocol or none. The folder is read
again for each request, so a panel the user adds is offered at once; a file that does not
load is left out of every tool and shown, with its problem, by `list_panels`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from panel_cli.config import Panel, load_panel
from panel_cli.errors import UserError
from panel_cli.mcp_server.arguments import PanelChoice
from panel_cli.mcp_server.folders import DEFAULT_PANEL, PanelFolder
from panel_cli.protocols.registry import empty_options, spec
from panel_cli.runs.panels import declared_protocol, default_panel_file, panel_for_run
from panel_cli.view import fmt
from panel_cli.wording import plural

# What a panel with no question of its own is estimated on.
SAMPLE_QUESTION = "A question of one line?"
# A tool's description lists this many panels at most.
LISTED = 30


@dataclass(frozen=True)
class ListedPanel:
    """A panel file of the folder (or the user's default panel): loaded, or why it did not load."""

    name: str
    path: Path
    panel: Panel | None
    problem: str | None = None

    @property
    def declared(self) -> str | None:
        return declared_protocol(self.panel) if self.panel is not None else None

    def runs(self, protocol: str) -> bool:
        return self.panel is not None and self.declared in (None, protocol)

    def summary(self) -> str:
        """`demo (confer: sage, skeptic, engineer)`"""
        assert self.panel is not None
        return f"{self.name} ({self.declared or 'any protocol'}: {', '.join(self.panel.member_names)})"


def listed(name: str, path: Path) -> ListedPanel:
    try:
        return ListedPanel(name=name, path=path, panel=load_panel(path))
    except UserError as error:
        return ListedPanel(name=name, path=path, panel=None, problem=error.message)


class PanelCatalog:
    """The folder's panels, read once for one request."""

    def __init__(self, folder: PanelFolder) -> None:
        self.folder = folder
        self.panels = [listed(name, path) for name, path in folder.files().items()]
        self.default = self._default()

    def _default(self) -> ListedPanel | None:
        """The folder's `default` panel, else the user's default panel (`panel init` writes it)."""
        found = next((entry for entry in self.panels if entry.name == DEFAULT_PANEL), None)
        if found is not None:
            return found
        path = default_panel_file()
        return listed(DEFAULT_PANEL, path) if path.is_file() else None

    def runnable(self, protocol: str) -> list[ListedPanel]:
        return [entry for entry in self.panels if entry.runs(protocol)]

    def choice(self, protocol: str) -> PanelChoice:
        """The `panel` argument of `protocol`'s tool."""
        names = [entry.name for entry in self.runnable(protocol)]
        has_default = self.default is not None and self.default.runs(protocol)
        where = f"a panel file in {self.folder.path}, named without its extension"
        default = f"; default: {self.default.name} ({self.default.path})" if has_default and self.default else ""
        return PanelChoice(names=names, has_default=has_default, description=f"The panel to run: {where}{default}.")

    def describe(self, protocol: str) -> str:
        """The panels a tool's description lists."""
        runnable = self.runnable(protocol)
        if not runnable:
            return f"No panel in {self.folder.path} runs {protocol}."
        shown = "; ".join(entry.summary() for entry in runnable[:LISTED])
        more = f"; and {len(runnable) - LISTED} more (list_panels)" if len(runnable) > LISTED else ""
        return f"Panels: {shown}{more}."

    def file_for(self, protocol: str, name: str | None) -> Path:
        """The file of the panel the agent named, else of the default panel. UserError naming
        the panels there for a name that is not one of them, or when there is no default."""
        if name is None:
            if self.default is None or not self.default.runs(protocol):
                raise UserError(f"Name a panel to run {protocol}: {self.folder.listing()}.")
            return self.default.path
        entry = next((entry for entry in self.panels if entry.name == name), None)
        if entry is None:
            raise self.folder.not_a_panel(name, {entry.name: entry.path for entry in self.panels})
        if entry.problem is not None:
            raise UserError(entry.problem)
        if not entry.runs(protocol):
            raise UserError(f"The panel {name} is written for {entry.declared}, not {protocol}.")
        return entry.path


class MemberEntry(BaseModel):
    name: str
    model: str


class EstimateEntry(BaseModel):
    """What a run of the panel would take (`panel estimate`), low to high; `cost` as a person reads it."""

    question: str
    calls_low: int
    calls_high: int
    cost_low: float | None
    cost_high: float | None
    complete: bool
    cost: str

    @property
    def calls(self) -> str:
        """`12 calls`, or `12 to 16 calls`."""
        if self.calls_low == self.calls_high:
            return plural(self.calls_high, "call")
        return f"{self.calls_low:,} to {plural(self.calls_high, 'call')}"


class PanelEntry(BaseModel):
    """A panel of `list_panels`. `protocol` null: the file declares none, and every protocol's
    tool can run it (it is then estimated by the tool that runs it, not here). `problem`: why
    the file cannot be run."""

    name: str
    uri: str
    protocol: str | None
    members: list[MemberEntry]
    estimate: EstimateEntry | None = None
    problem: str | None = None


def panel_entry(entry: ListedPanel, uri: str) -> PanelEntry:
    """One panel as `list_panels` gives it: blocks (litellm's import, its token counter)."""
    if entry.panel is None:
        return PanelEntry(name=entry.name, uri=uri, protocol=None, members=[], problem=entry.problem)
    members = [MemberEntry(name=member.name, model=member.model) for member in entry.panel.members]
    listed_entry = PanelEntry(name=entry.name, uri=uri, protocol=entry.declared, members=members)
    if entry.declared is None:
        return listed_entry
    try:
        estimate = estimate_entry(entry.path, entry.declared)
    except UserError as error:
        return listed_entry.model_copy(update={"problem": error.message})
    return listed_entry.model_copy(update={"estimate": estimate})


def estimate_entry(path: Path, protocol: str) -> EstimateEntry:
    """The estimate of a run of the panel file on its own question (else a one-line one)."""
    from panel_cli.estimate.build import estimate_run
    from panel_cli.llm.litellm_setup import load_litellm
    from panel_cli.runs.prepare import check_routable

    protocol_spec = spec(protocol)
    panel = panel_for_run(protocol_spec, path, empty_options(protocol_spec)).panel
    question = panel.question or SAMPLE_QUESTION
    check_routable(load_litellm(), panel)
    estimate = estimate_run(panel, question)
    return EstimateEntry(
        question="the panel's own" if panel.question else SAMPLE_QUESTION,
        calls_low=estimate.calls_low,
        calls_high=estimate.calls_high,
        cost_low=estimate.cost_low,
        cost_high=estimate.cost_high,
        complete=estimate.complete,
        cost=cost_range(estimate.cost_low, estimate.cost_high, estimate.complete, simulated=_simulated(panel)),
    )


def cost_range(low: float | None, high: float | None, complete: bool, *, simulated: bool) -> str:
    """`simulated, free`; `$0.0012 to $0.0340`; `at least $0.0012` when a part is unknown."""
    if simulated:
        return fmt.SIMULATED_COST
    if low is None:
        return "unknown (no price for its models)"
    if not complete or high is None:
        return f"at least {fmt.cost(low)}"
    return f"{fmt.cost(low)} to {fmt.cost(high)}"


def _simulated(panel: Panel) -> bool:
    return fmt.simulated(member.model for member in panel.callable_members())
