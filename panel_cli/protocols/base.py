"""What every protocol shares: the engine signature, its result's first fields, the rules a
protocol reads from a panel, stage deadlines and labels. The run around an engine is the run
core's (`panel_cli.runs.execute`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from panel_cli.config import Member, Panel
from panel_cli.events import BaseEvent
from panel_cli.protocols.registry import part_of, spec

if TYPE_CHECKING:
    from panel_cli.llm.gateway import Gateway

Emit = Callable[[BaseEvent], Awaitable[Any]]

# A field a check has something to say about: its location in the panel, and the problem.
Finding = tuple[tuple[str | int, ...], str]

# A stage of answers, votes or reviews waits at most 5 minutes unless the panel says otherwise
# (docs/protocols.md#stages-and-time-limits).
DEFAULT_STAGE_TIMEOUT = 300.0
# A synthesis reads everything before it and writes the longest text of the run: 10 minutes.
# No stage is left without a limit, so an endpoint that never finishes cannot hold a run open.
DEFAULT_SYNTHESIS_TIMEOUT = 600.0


class ProtocolResult(BaseModel):
    """Every result says what the final answer is, or (when there is none) why not."""

    final_answer: str | None
    failure_reason: str | None = None

    @property
    def reached_answer(self) -> bool:
        return self.final_answer is not None


@dataclass(frozen=True)
class ProtocolRules:
    """What a protocol reads from a panel: `panel validate` shows it, and a check warns about
    what a run would ignore.

    `fields` are the panel's own fields it uses beyond those every protocol shares (a role:
    `chairman`, `critic`, `planner`; the `weights` file), its settings being its spec's; `timeouts` its
    stages and each one's default limit (None: no limit); `member_fields` the member fields
    beyond the common ones (`weight`); `check` raises UserError for a panel it cannot run and
    returns the fields it will ignore all the same, each as (location, problem); `settings`
    are what `panel validate` shows of a panel, as (name, value) pairs, and `headline` names
    those a run's start line repeats: the roles beside the members (critic, planner, chairman)
    and the rules that decide the outcome (confer's tally and answer order). `draw` returns the
    panel with whatever the run would otherwise draw at random (council's shuffle seed) drawn
    up front, so the run's config records it and a resumed run draws the same."""

    fields: frozenset[str]
    timeouts: Mapping[str, float | None]
    member_fields: frozenset[str] = frozenset()
    check: Callable[[Panel], list[Finding]] | None = None
    settings: Callable[[Panel], list[tuple[str, str]]] | None = None
    headline: tuple[str, ...] = ()
    draw: Callable[[Panel], Panel] | None = None

    def limit(self, panel: Panel, stage: str) -> float | None:
        """A stage's time limit: the panel's, else this protocol's default."""
        return panel.timeouts.get(stage, self.timeouts[stage])

    def headline_of(self, panel: Panel) -> dict[str, str]:
        """The settings a run's start line names (`headline`), in the order `settings` gives them."""
        own = self.settings(panel) if self.settings and self.headline else []
        return {name: value for name, value in own if name in self.headline}

    def describe(self, panel: Panel) -> list[tuple[str, str]]:
        own = self.settings(panel) if self.settings else []
        limits = ", ".join(f"{stage} {describe_duration(self.limit(panel, stage))}" for stage in self.timeouts)
        return [*own, ("timeouts", limits)]


def yes_no(value: bool) -> str:
    return "yes" if value else "no"


def chairman_setting(panel: Panel, chairmen: Sequence[Member]) -> tuple[str, str]:
    """The `chairman` line of `panel validate`: the chairman and its backups, and whether the
    file named one, since a first member standing in by default surprises."""
    named = "" if panel.chairman is not None else " (the first member; none is named)"
    return ("chairman", ", ".join(chair.name for chair in chairmen) + named)


def describe_duration(seconds: float | None) -> str:
    """`90s`, `5m`, `1h30m`, or `none`: durations as a panel file writes them."""
    if seconds is None:
        return "none"
    if seconds < 60 or seconds % 60:
        return f"{seconds:g}s"
    minutes = int(seconds // 60)
    hours, minutes = divmod(minutes, 60)
    return (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes or not hours else "")


class Engine(Protocol):
    async def __call__(self, panel: Panel, question: str, gateway: Gateway, emit: Emit) -> ProtocolResult: ...


def labels_for(count: int) -> list[str]:
    """A, B, …, Z, then AA, AB, … so a panel of any size has labels."""
    out = []
    for index in range(count):
        label, n = "", index
        while True:
            label = chr(ord("A") + n % 26) + label
            n = n // 26 - 1
            if n < 0:
                break
        out.append(label)
    return out


def engine_of(name: str) -> Engine:
    """The engine of the protocol called `name` (`panel_cli.protocols.registry`)."""
    engine: Engine = part_of(spec(name), "engine", f"engine:{name}")
    return engine


def rules_of(name: str) -> ProtocolRules:
    """The rules of the protocol called `name` (`panel_cli.protocols.registry`)."""
    rules: ProtocolRules = part_of(spec(name), "rules", "engine:RULES")
    return rules


def drawn(panel: Panel) -> Panel:
    """The panel with what its protocol draws at random drawn now (`ProtocolRules.draw`)."""
    draw = rules_of(panel.protocol).draw
    return draw(panel) if draw is not None else panel
