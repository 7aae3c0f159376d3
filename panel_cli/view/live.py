"""The terminal view: the stage in progress is a live table, finished stages scroll above it."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from panel_cli.protocols.registry import is_protocol, resolve, spec
from panel_cli.view import delphi, fmt, tools
from panel_cli.view.council import ReviewStage, render_aggregate
from panel_cli.view.final import render_final
from panel_cli.view.frame import Frame
from panel_cli.view.summary import ViewTotals
from panel_cli.view.tables import RunSoFar, StageState, warning_line

if TYPE_CHECKING:
    # Imported when a live area starts: `history show` draws with none, and pays for neither
    # them nor asyncio. The events only name the handlers' types: the view reads an event by
    # its fields, so a stored payload drawn as it is (`view/history_stages.py`) reads alike.
    from rich.live import Live
    from rich.spinner import Spinner

    from panel_cli.events import (
        AskingStopped,
        BaseEvent,
        CallFailed,
        CallFinished,
        CallStarted,
        CallTextGrew,
        ContributionMade,
        DelphiRoundEnded,
        MemberSkipped,
        PlanAccepted,
        PlanRejected,
        RankingParsed,
        RoundTallied,
        RunFailed,
        RunFinished,
        RunInterrupted,
        RunStarted,
        StageStarted,
        TaskFailed,
        TaskFinished,
        TaskSkipped,
        TaskStarted,
        ToolCallFinished,
        ToolCallStarted,
        ToolServerStarted,
        VerdictGiven,
        VoteCast,
        WarningRaised,
    )
    from panel_cli.view.stored import Stored
    from panel_cli.view.vote import VoteEvent


class LiveView:
    """Draws a run on a terminal with Rich `Live`.

    Only the current stage is live; when the next one starts, the finished one is printed
    once to the console, so the scrollback keeps every round and nothing is redrawn twice.
    The console is injected so tests and replays choose where it goes; colour follows the
    console (and so NO_COLOR). `panel history show` draws a stored run with `animate=False`
    (each stage printed once it ends, never a live area) and `header=False` (it prints a
    fuller header of its own). While it animates, a call's row shows how long the call has run
    until it ends (by `clock`); a stored run's rows show only their latency.

    It `follows_text`: a streamed reply grows in its row as it is written. Live redraws on
    its own tick; a call's first words are drawn at once (the calls whose first words arrive
    together share one drawing), since the wait for them is what a person watches."""

    follows_text = True

    def __init__(
        self,
        console: Console,
        *,
        refresh_per_second: float = 8,
        animate: bool = True,
        header: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console = console
        self._clock = clock
        self.totals = ViewTotals()
        self._refresh_per_second = refresh_per_second
        self._animate = animate
        self._header = header
        self._labels: dict[str, str] = {}
        self._stage: StageState | None = None
        # What a protocol's own stage tables draw from (orchestrate's plan, supervise's
        # verdicts), and those tables by stage name, as the run's protocol declares them.
        self._so_far = RunSoFar()
        self._stage_views: Mapping[str, Any] = {}
        self._seen: set[tuple[str, int | None]] = set()
        self._live: Live | None = None
        self._draw_soon = False
        self._frame = Frame()

    async def __call__(self, event: BaseEvent) -> None:
        self.draw(event)

    def draw(self, event: BaseEvent | Stored) -> None:
        """One event into the picture, by its `type`; a stored payload read by attribute draws
        as its event did."""
        self.totals.update(event)
        handle = HANDLERS.get(event.type)
        if handle is not None:
            handle(self, event)
            self._frame.changed()

    def close(self, *, stopped: bool = False) -> None:
        """Print the stage in progress (so an interrupted run still shows it) and stop Live.
        `stopped`: the run ended (or its process died) before the stage did, so a call still
        out in it will never reply, and its row says `no reply` rather than `waiting`."""
        if stopped and self._stage is not None:
            for row in self._stage.rows:
                row.abandon()
        self._finish_stage(None)
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _on_run_started(self, event: RunStarted) -> None:
        self._labels = {m.name: m.label for m in event.members if m.label}
        # A stored run of a protocol this version does not know draws every stage as calls.
        self._stage_views = spec(event.protocol).stage_views if is_protocol(event.protocol) else {}
        if self._header:
            self._print_header(event)

    def _on_stage(self, event: StageStarted) -> None:
        self._open_stage(event.stage, event.round, event.members, list(event.block))

    def _on_vote(self, event: VoteCast) -> None:
        """A vote goes on its voter's row. A stage whose protocol declared no table for it (a
        stored run of a protocol this version does not know) shows votes once one comes."""
        if self._stage and self._stage.round == event.round:
            self._stage.votes = True
            self._stage.member_row(event.voter, self._labels.get(event.voter)).vote = event

    def _on_asking_stopped(self, event: AskingStopped) -> None:
        """The members a stopping rule never asked: their rows in the stage say so; a stage never
        held (confer's vote, when every answer agreed) is said in a line."""
        if self._stage is not None and self._stage.key == (event.stage, event.round):
            self._stage.not_asked(event.not_asked, event.reason)
        else:
            from panel_cli.view.summary import stop_note

            self.console.print(Text(stop_note(event), style="dim"))

    def _on_tally(self, event: RoundTallied) -> None:
        if self._stage and self._stage.round == event.round:
            self._stage.tally = event

    def _on_plan_rejected(self, event: PlanRejected) -> None:
        from panel_cli.view.orchestrate import rejection_note
        from panel_cli.view.stored import Stored

        if self._stage:
            warning = Stored(type="warning", message=rejection_note(event), member=event.planner)
            self._stage.warnings.append(warning)

    def _on_plan_accepted(self, event: PlanAccepted) -> None:
        self._so_far.plan = event

    def _on_task(self, event: TaskStarted | TaskFinished | TaskFailed | TaskSkipped) -> None:
        from panel_cli.view.orchestrate import TaskStage

        if isinstance(self._stage, TaskStage):
            self._stage.update(event)

    def _on_contribution(self, event: ContributionMade) -> None:
        if isinstance(self._stage, delphi.ContributionStage) and self._stage.round == event.round:
            self._stage.contribute(event)

    def _on_delphi_round_ended(self, event: DelphiRoundEnded) -> None:
        if isinstance(self._stage, delphi.ContributionStage) and self._stage.round == event.round:
            self._stage.ended = event

    def _on_verdict(self, event: VerdictGiven) -> None:
        self._so_far.verdicts.append(event)

    def _on_ballot(self, event: VoteEvent) -> None:
        from panel_cli.view.vote import on_event

        self._stage = on_event(self._stage, event, self._labels)

    def _on_tool_server(self, event: ToolServerStarted) -> None:
        self._so_far.equipped.update(event.members)
        self.console.print(tools.server_line(event))

    def _on_warning(self, event: WarningRaised) -> None:
        if self._stage:
            self._stage.warnings.append(event)
        else:
            self.console.print(warning_line(event))

    def _on_run_finished(self, event: RunFinished) -> None:
        self.close()
        render_final(self.console, event, self.totals)

    def _on_run_failed(self, event: RunFailed) -> None:
        self.close(stopped=True)
        self.console.print(Text(f"Run failed: {event.message}", style="bold red"))

    def _on_run_interrupted(self, event: RunInterrupted) -> None:
        self.close(stopped=True)
        self.console.print(
            Text(f"Interrupted — the run is kept as interrupted (run id {event.run_id})", style="yellow")
        )

    def _print_header(self, event: RunStarted) -> None:
        self.console.print(Text.assemble((event.protocol, "bold cyan"), " · ", (event.panel, "bold")))
        self.console.print(Text(fmt.one_line(event.question, 200), style="italic"))
        members = Text(", ", style="dim").join(
            Text.assemble((f"{m.label} ", "cyan") if m.label else "", m.name, (f" ({m.model})", "dim"))
            for m in event.members
        )
        self.console.print(members)
        headline = getattr(event, "headline", None) or {}  # none in a run stored before it was kept
        if headline:
            self.console.print(
                Text(" · ", style="dim").join(
                    Text.assemble((f"{name} ", "dim"), value) for name, value in headline.items()
                )
            )
        self.console.print()

    def _on_call(self, event: CallStarted | CallFinished | CallFailed | MemberSkipped) -> None:
        """Calls land in their stage's table. A call from a stage nobody announced opens a
        table of its own; a late call from a stage already printed only counts in the totals."""
        stage = self._stage
        if stage is None or stage.key != (event.stage, event.round):
            if (event.stage, event.round) in self._seen:
                return
            stage = self._open_stage(event.stage, event.round, [])
        label = self._labels.get(event.member)
        if event.type == "member_skipped":
            stage.skip(event, label)
            return
        row = stage.call_row(event.call_id, event.member, label, event.about)
        if event.type == "call_started" and self._animate:
            row.started = stage.clock()
        elif event.type == "call_finished":
            row.finish(event)
        elif event.type == "call_failed":
            row.fail(event)

    def _on_text(self, event: CallTextGrew) -> None:
        """A streamed reply so far, into its call's row; its first words are drawn at once."""
        stage = self._stage
        if stage is None or stage.key != (event.stage, event.round):
            return
        row = stage.call_row(event.call_id, event.member, self._labels.get(event.member), event.about)
        first = row.status != "writing"
        row.grow(event.text)
        if first and row.status == "writing" and not self._draw_soon and self._live is not None:
            self._draw_soon = True
            import asyncio

            asyncio.get_running_loop().call_soon(self._draw_now)

    def _draw_now(self) -> None:
        self._draw_soon = False
        self._refresh(now=True)

    def _on_tool(self, event: ToolCallStarted | ToolCallFinished) -> None:
        """A tool call goes on the row of the model call that made it, as it happens; one from
        a stage already printed is left out (its stage table is final)."""
        stage = self._stage
        if stage is None or stage.key != (event.stage, event.round):
            return
        tools.record(
            stage.call_row(event.call_id, event.member, self._labels.get(event.member), event.about).tools, event
        )

    def _on_ranking(self, event: RankingParsed) -> None:
        """A reviewer's ranking goes on its row. The aggregate goes under the stage, and names
        each member's label from then on (on the reviewers' rows too), so the rankings read as
        who ranked whom."""
        if event.reviewer is not None:
            if self._stage is not None:
                self._stage.rankings = True  # as votes: the declared review stage has the column from the start
                self._stage.member_row(event.reviewer, self._labels.get(event.reviewer)).ranking = event.ranking
            return
        for entry in event.aggregate:
            name, label = entry.get("name"), entry.get("label")
            if isinstance(name, str) and isinstance(label, str) and label and name not in self._labels:
                self._labels[name] = self._stage.short(label) if self._stage is not None else label
                if self._stage is not None:
                    self._stage.label(name, self._labels[name])
        if isinstance(self._stage, ReviewStage):
            self._stage.aggregate = event.aggregate
        else:
            self.console.print(render_aggregate(event.aggregate))

    def _open_stage(
        self, stage: str, round_: int | None, members: list[str], shown: list[str] | None = None
    ) -> StageState:
        """The stage's table, as its protocol declares it, with its columns fixed now: the
        labels it shows its members, and whether a tool server serves one of them."""
        table = self._stage_views.get(stage)
        new = resolve(table)(stage, round_, self._so_far) if table is not None else StageState(stage, round_)
        new.clock = self._clock
        new.shown = shown or []
        new.equipped = self._so_far.serves(members)
        for name in members:
            new.announce(name, self._labels.get(name))
        self._seen.add(new.key)
        self._finish_stage(new)
        if self._live is None and self._animate:
            from rich.live import Live
            from rich.spinner import Spinner

            self._live = Live(
                LiveArea(self, Spinner("dots", style="cyan")),
                console=self.console,
                refresh_per_second=redraws_per_second(self._refresh_per_second, len(new.rows)),
                transient=True,
            )
            self._live.start()
        return new

    def _finish_stage(self, following: StageState | None) -> None:
        """Swap in the next stage, then print the finished one above the live area. The
        order matters: printing first would draw the finished table twice for a moment."""
        finished, self._stage = self._stage, following
        self._refresh(now=True)
        if finished is not None:
            self.console.print(finished.render() if self._live is None else self._frame.whole(finished))
            self.console.print()

    def _refresh(self, *, now: bool = False) -> None:
        """Live draws the new picture on its next tick, or `now`. Printing above the live area
        redraws the last drawn picture, so a print must follow a `now`."""
        if now and self._live is not None:
            self._live.refresh()


# A panel with more members than this redraws half as often: each frame lays out twice the
# rows, and 4 frames a second still show each reply growing a few words at a time.
BIG_STAGE = 32


def redraws_per_second(rate: float, rows: int) -> float:
    """How often Live redraws a run whose first stage has `rows` rows."""
    return rate / 2 if rows > BIG_STAGE else rate


class LiveArea:
    """What Live draws below the finished stages: the stage in progress, as much of it as fits
    the terminal above the spinner line (`Frame`), and the spinner saying how far it is. Live
    draws it on each tick, so it reads the view's state as it is then: an event only marks the
    frame changed, and costs no drawing of its own."""

    def __init__(self, view: LiveView, spinner: Spinner) -> None:
        self.view = view
        self.spinner = spinner

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        stage = self.view._stage
        if stage is None:
            return
        height = options.height or options.size.height
        yield from self.view._frame.render(stage, console, options.update(height=max(height - 1, 1)))
        self.spinner.update(text=Text(stage.progress, style="dim"))
        yield self.spinner


# What the live view does with each event type, by its `type`. Every type is either here or in
# IGNORED, never in both: tests/test_event_consumers.py checks it.
HANDLERS: dict[str, Callable[[LiveView, Any], None]] = {
    "run_started": LiveView._on_run_started,
    "stage_started": LiveView._on_stage,
    "call_started": LiveView._on_call,
    "call_finished": LiveView._on_call,
    "call_failed": LiveView._on_call,
    "member_skipped": LiveView._on_call,
    "asking_stopped": LiveView._on_asking_stopped,
    "call_text_grew": LiveView._on_text,
    "vote_cast": LiveView._on_vote,
    "round_tallied": LiveView._on_tally,
    "ranking_parsed": LiveView._on_ranking,
    "plan_rejected": LiveView._on_plan_rejected,
    "plan_accepted": LiveView._on_plan_accepted,
    "task_started": LiveView._on_task,
    "task_finished": LiveView._on_task,
    "task_failed": LiveView._on_task,
    "task_skipped": LiveView._on_task,
    "delphi_contribution": LiveView._on_contribution,
    "delphi_round_ended": LiveView._on_delphi_round_ended,
    "supervise_verdict": LiveView._on_verdict,
    "vote_opened": LiveView._on_ballot,
    "vote_received": LiveView._on_ballot,
    "quorum_reached": LiveView._on_ballot,
    "vote_tallied": LiveView._on_ballot,
    "leader_chose": LiveView._on_ballot,
    "tool_server_started": LiveView._on_tool_server,
    "tool_call_started": LiveView._on_tool,
    "tool_call_finished": LiveView._on_tool,
    "warning": LiveView._on_warning,
    "run_finished": LiveView._on_run_finished,
    "run_failed": LiveView._on_run_failed,
    "run_interrupted": LiveView._on_run_interrupted,
}

# What the live view draws nothing for, on purpose: a plan proposed is the planner's reply,
# already on its row, and is drawn once it is accepted or rejected; a decision recorded
# repeats the tally and the leader's choice, already on the board.
IGNORED: frozenset[str] = frozenset({"plan_proposed", "decision_recorded"})
