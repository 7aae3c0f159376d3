"""Every stage of a stored run drawn once, as the live view drew it while the run went.

The stages are the live view's own tables (`view/tables.py`), filled from the stored payloads
as they are: each read by attribute (`Stored`), never rebuilt as its event model. Building
the models, and the live view with every protocol's tables, would cost `panel history show`
most of its time, and a stored run needs none of it: no live area, no timing, nothing that
streams. A run holding an event this module does not draw (a vote's ballots, orchestrate's
plan) is drawn by the live view itself (`view/replay.py`), as is one whose payloads this
module cannot read. tests/cli/test_history_protocols.py checks
that every protocol is drawn exactly as the live view drew it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rich.console import Console, RenderableType
from rich.text import Text

from panel_cli.view.final import render_final
from panel_cli.view.summary import ViewTotals
from panel_cli.view.tables import RunSoFar, StageState, render_aggregate, warning_line


class Stored(dict[str, Any]):
    """A stored payload read as the event it was: its fields as attributes, a nested object as
    another `Stored`, and still a dict for what the views read as one (a tally's scores, an
    aggregate ranking's entries)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return _stored(self[name])
        except KeyError:
            raise AttributeError(name) from None


def _stored(value: Any) -> Any:
    if isinstance(value, dict) and not isinstance(value, Stored):
        return Stored(value)
    if isinstance(value, list):
        return [_stored(item) for item in value]
    return value


class StaticDrawing:
    """The live view's drawing of a run, without its live area: each stage printed once it
    ends, then the final answer and its summary (`LiveView` with `animate=False` and
    `header=False` draws the same)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.totals = ViewTotals()
        self._labels: dict[str, str] = {}
        self._stage: StageState | None = None
        self._seen: set[tuple[str, int | None]] = set()
        self._so_far = RunSoFar()
        self._stage_views: Mapping[str, Any] = {}

    def draw(self, payloads: Sequence[Stored]) -> None:
        for event in payloads:
            self.totals.update(event)  # type: ignore[arg-type]
            HANDLERS[event.type](self, event)
        self.close()

    def close(self) -> None:
        self._finish_stage(None)

    def _print(self, renderable: RenderableType) -> None:
        self.console.print(renderable)

    def _on_run_started(self, event: Stored) -> None:
        from panel_cli.protocols.registry import is_protocol, spec

        self._labels = {member.name: member.label for member in event.members if member.label}
        self._stage_views = spec(event.protocol).stage_views if is_protocol(event.protocol) else {}

    def _on_stage(self, event: Stored) -> None:
        self._open_stage(event.stage, event.round, event.members)

    def _on_call(self, event: Stored) -> None:
        stage = self._stage
        if stage is None or stage.key != (event.stage, event.round):
            if (event.stage, event.round) in self._seen:
                return
            stage = self._open_stage(event.stage, event.round, [])
        label = self._labels.get(event.member)
        if event.type == "member_skipped":
            stage.skip(event, label)  # type: ignore[arg-type]
            return
        row = stage.call_row(event.call_id, event.member, label, event.about)
        if event.type == "call_finished":
            row.finish(event)  # type: ignore[arg-type]
        elif event.type == "call_failed":
            row.fail(event)  # type: ignore[arg-type]

    def _on_text(self, event: Stored) -> None:
        stage = self._stage
        if stage is not None and stage.key == (event.stage, event.round):
            stage.call_row(event.call_id, event.member, self._labels.get(event.member), event.about).grow(event.text)

    def _on_vote(self, event: Stored) -> None:
        if self._stage and self._stage.round == event.round:
            self._stage.member_row(event.voter, self._labels.get(event.voter)).vote = event  # type: ignore[assignment]

    def _on_tally(self, event: Stored) -> None:
        if self._stage and self._stage.round == event.round:
            self._stage.tally = event  # type: ignore[assignment]

    def _on_ranking(self, event: Stored) -> None:
        if event.reviewer is not None:
            if self._stage is not None:
                self._stage.member_row(event.reviewer, self._labels.get(event.reviewer)).ranking = event.ranking
        elif self._stage is not None:
            self._stage.aggregate = event.aggregate
        else:
            self._print(render_aggregate(event.aggregate))

    def _on_warning(self, event: Stored) -> None:
        if self._stage:
            self._stage.warnings.append(event)  # type: ignore[arg-type]
        else:
            self._print(warning_line(event))  # type: ignore[arg-type]

    def _on_contribution(self, event: Stored) -> None:
        from panel_cli.view.delphi import ContributionStage

        if isinstance(self._stage, ContributionStage) and self._stage.round == event.round:
            self._stage.contribute(event)  # type: ignore[arg-type]

    def _on_delphi_round_ended(self, event: Stored) -> None:
        from panel_cli.view.delphi import ContributionStage

        if isinstance(self._stage, ContributionStage) and self._stage.round == event.round:
            self._stage.ended = event  # type: ignore[assignment]

    def _on_verdict(self, event: Stored) -> None:
        self._so_far.verdicts.append(event)  # type: ignore[arg-type]

    def _on_tool_server(self, event: Stored) -> None:
        from panel_cli.view.tools import server_line

        self._print(server_line(event))  # type: ignore[arg-type]

    def _on_tool(self, event: Stored) -> None:
        from panel_cli.view.tools import record

        stage = self._stage
        if stage is not None and stage.key == (event.stage, event.round):
            row = stage.call_row(event.call_id, event.member, self._labels.get(event.member), event.about)
            record(row.tools, event)  # type: ignore[arg-type]

    def _on_run_finished(self, event: Stored) -> None:
        self.close()
        render_final(self.console, event, self.totals)  # type: ignore[arg-type]

    def _on_run_failed(self, event: Stored) -> None:
        self.close()
        self._print(Text(f"Run failed: {event.message}", style="bold red"))

    def _on_run_interrupted(self, event: Stored) -> None:
        self.close()
        self._print(Text(f"Interrupted — the run is kept as interrupted (run id {event.run_id})", style="yellow"))

    def _ignore(self, event: Stored) -> None:
        return None

    def _open_stage(self, stage: str, round_: int | None, members: list[str]) -> StageState:
        from panel_cli.protocols.registry import resolve

        table = self._stage_views.get(stage)
        new = resolve(table)(stage, round_, self._so_far) if table is not None else StageState(stage, round_)
        for name in members:
            new.announce(name, self._labels.get(name))
        self._seen.add(new.key)
        self._finish_stage(new)
        return new

    def _finish_stage(self, following: StageState | None) -> None:
        finished, self._stage = self._stage, following
        if finished is not None:
            self._print(finished.render())
            self._print(Text(""))


# What the static drawing does with each event type, by `type`; every other type (a protocol's
# own tables) is drawn by the live view. tests/test_event_consumers.py checks that each type
# is here or in LIVE_VIEW_ONLY.
HANDLERS: dict[str, Callable[[StaticDrawing, Stored], None]] = {
    "run_started": StaticDrawing._on_run_started,
    "stage_started": StaticDrawing._on_stage,
    "call_started": StaticDrawing._on_call,
    "call_finished": StaticDrawing._on_call,
    "call_failed": StaticDrawing._on_call,
    "member_skipped": StaticDrawing._on_call,
    "call_text_grew": StaticDrawing._on_text,
    "vote_cast": StaticDrawing._on_vote,
    "round_tallied": StaticDrawing._on_tally,
    "ranking_parsed": StaticDrawing._on_ranking,
    "warning": StaticDrawing._on_warning,
    "run_finished": StaticDrawing._on_run_finished,
    "run_failed": StaticDrawing._on_run_failed,
    "run_interrupted": StaticDrawing._on_run_interrupted,
    "delphi_contribution": StaticDrawing._on_contribution,
    "delphi_round_ended": StaticDrawing._on_delphi_round_ended,
    "supervise_verdict": StaticDrawing._on_verdict,
    "tool_server_started": StaticDrawing._on_tool_server,
    "tool_call_started": StaticDrawing._on_tool,
    "tool_call_finished": StaticDrawing._on_tool,
    "plan_proposed": StaticDrawing._ignore,  # the live view draws nothing for either
    "decision_recorded": StaticDrawing._ignore,
}
# A vote's board and orchestrate's plan are drawn from their event models (a vote's tally is
# read by the vote's own model), so a run holding these goes to the live view.
LIVE_VIEW_ONLY: frozenset[str] = frozenset(
    {
        "plan_rejected",
        "plan_accepted",
        "task_started",
        "task_finished",
        "task_failed",
        "task_skipped",
        "vote_opened",
        "vote_received",
        "quorum_reached",
        "vote_tallied",
        "leader_chose",
    }
)


def draw_stages(console: Console, payloads: Sequence[dict[str, Any]]) -> None:
    """The stages as the protocol's own tables, then the final answer and its summary."""
    stored = [Stored(payload) for payload in payloads]
    if _static(stored):
        # Drawn aside first: a payload the tables cannot read (a damaged row) sends the whole
        # run to the live view's path, which skips it, rather than print half of it twice.
        try:
            with console.capture() as captured:
                StaticDrawing(console).draw(stored)
        except (AttributeError, KeyError, TypeError, ValueError):
            pass
        else:
            console.file.write(captured.get())
            return
    from panel_cli.view.replay import draw, stored_events

    draw(console, stored_events(payloads))


def _static(payloads: Sequence[Stored]) -> bool:
    """Whether every event is one this module draws."""
    return all(isinstance(payload.get("type"), str) and payload["type"] in HANDLERS for payload in payloads)
