"""A protocol-neutral reading of a stored run, which the Markdown and the HTML export both render.

The run is read from its events the way the live view reads them: a stage at a time, each
with a row per call, and under it whatever the protocol showed there (a confer round's votes
and tally, a council's rankings, aggregate and bias report, a vote's ballots, count and
runoff, a Delphi round's contributions, a critic's verdicts, the orchestrate task graph).
So every protocol, and a run that crashed or was interrupted half way, exports alike, and a
protocol added later still gets its stages and calls. The run's stored result only adds what
no event carries (council's bias report, the summary facts).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from panel_cli.events import (
    AskingStopped,
    BaseEvent,
    CallFailed,
    CallFinished,
    CallStarted,
    CallTextGrew,
    ContributionMade,
    DecisionRecorded,
    DelphiRoundEnded,
    LeaderChose,
    MemberSkipped,
    PlanAccepted,
    PlanProposed,
    PlanRejected,
    QuorumReached,
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
    VoteOpened,
    VoteReceived,
    VoteTallied,
    WarningRaised,
    parse_event,
)
from panel_cli.export.transcript import Transcript
from panel_cli.protocols.orchestrate.graph import tree_order
from panel_cli.protocols.vote.tally import RunoffRound
from panel_cli.store.records import CallRecord, RunRecord
from panel_cli.untrusted import load_json
from panel_cli.view import fmt
from panel_cli.view.delphi import round_note
from panel_cli.view.orchestrate import rejection_note
from panel_cli.view.summary import ViewTotals, stop_note, summary_fields
from panel_cli.view.tools import activity, server_text
from panel_cli.view.vote import VoteBoard, VoteEvent, choice_text, leader_line, outcome_line, round_text, rules_line
from panel_cli.wording import plural

RowStatus = Literal["waiting", "answered", "failed", "timed out", "cancelled", "skipped"]
TaskStatus = Literal["pending", "running", "succeeded", "failed", "skipped"]
FAILURE_STATUS: dict[str, RowStatus] = {"timeout": "timed out", "cancelled": "cancelled"}
ROLES = ("chairman", "critic", "planner", "leader", "aggregator")


class CallRow(BaseModel):
    """One call of a stage, or a member the stage announced and never called. `shown` is what
    the protocol read from the reply (a vote's rationale, a ballot's reason, a Delphi
    analysis), which says more than the raw reply, often JSON, would. `voted` is the label a
    confer vote chose, named with its author once the round's tally says who that is."""

    member: str
    label: str | None = None
    about: str | None = None
    call_id: str | None = None
    status: RowStatus = "waiting"
    latency: float | None = None
    tokens: int | None = None
    reply: str = ""
    truncated: bool = False
    shown: str | None = None
    choice: str | None = None
    choice_note: str | None = None
    confidence: float | None = None
    ranking: list[str] | None = None
    changed: str | None = None
    voted: str | None = None
    kept_own: bool = False
    tools: list[str] = []

    @property
    def free(self) -> bool:
        return self.call_id is None and self.status == "waiting"

    @property
    def failed(self) -> bool:
        return self.status in ("failed", "timed out")

    @property
    def text(self) -> str:
        return self.shown if self.shown is not None else self.reply


class Bar(BaseModel):
    """A bar of a chart. `share` (0–1) is its length; `marker` (0–1) a reference mark on it,
    such as the share chance alone would give."""

    key: str
    name: str | None = None
    text: str
    share: float
    winner: bool = False
    marker: float | None = None
    detail: str | None = None


class Chart(BaseModel):
    """Bars under a title; `measure` names what a bar's number is (score, votes, average rank)."""

    title: str
    measure: str
    bars: list[Bar]
    note: str | None = None


class VoteSummary(BaseModel):
    """A vote as the live board ends: its rules, the count, the quorum, the runoff, the outcome."""

    rules: str
    options: list[str]
    chart: Chart | None = None
    quorum: str
    apart: str | None = None
    runoff: list[RunoffRound] = []
    runoff_lines: list[str] = []
    outcome: str | None = None
    won: bool = False


class Verdict(BaseModel):
    round: int
    critic: str
    workers: list[str]
    verdict: str | None = None
    feedback: dict[str, str] = {}
    rejected: list[str] = []
    problem: str | None = None

    def cell(self, worker: str) -> Literal["approved", "rejected", "no verdict"]:
        if self.verdict is None:
            return "no verdict"
        return "rejected" if worker in self.rejected else "approved"


class DelphiGrid(BaseModel):
    """Each expert's state in each round: `first`, `changed`, `unchanged` (with
    ` (unstructured)` when the reply was not the object asked for), or missing."""

    rounds: list[int]
    experts: list[tuple[str, str]]
    states: dict[str, dict[int, str]]


class Task(BaseModel):
    task_id: str
    worker: str
    title: str = ""
    description: str = ""
    depends_on: list[str] = []
    depth: int = 0
    status: TaskStatus = "pending"
    start: float | None = None
    duration: float | None = None
    note: str = ""
    output: str | None = None


class Plan(BaseModel):
    planner: str
    attempt: int
    tasks: list[Task]


class Stage(BaseModel):
    """A stage as the live view drew it, with what the protocol showed under it. `authors`
    maps a confer round's labels to their members (from its tally)."""

    stage: str
    round: int | None = None
    rows: list[CallRow] = []
    tally: Chart | None = None
    aggregate: Chart | None = None
    bias: Chart | None = None
    vote: VoteSummary | None = None
    verdict: Verdict | None = None
    verdict_grid: list[Verdict] = []
    delphi: DelphiGrid | None = None
    plan: Plan | None = None
    notes: list[str] = []
    warnings: list[str] = []
    authors: dict[str, str] = {}
    outcome: str | None = None
    won: bool = False

    @property
    def title(self) -> str:
        name = self.stage.replace("_", " ")
        if self.round is None:
            return name.capitalize()
        if self.stage == "plan":
            return f"Plan · attempt {self.round}"
        return f"Round {self.round} · {name}"

    def member_row(self, name: str) -> CallRow:
        """The member's first row, for what belongs to the member rather than to one call."""
        for row in self.rows:
            if row.member == name:
                return row
        self.rows.append(CallRow(member=name))
        return self.rows[-1]

    def call_row(self, call_id: str, name: str, about: str | None) -> CallRow:
        for row in self.rows:
            if row.call_id == call_id:
                return row
        row = self.free_row(name)
        row.call_id, row.about = call_id, about
        return row

    def free_row(self, name: str) -> CallRow:
        for row in self.rows:
            if row.member == name and row.free:
                return row
        self.rows.append(CallRow(member=name))
        return self.rows[-1]


class PanelMember(BaseModel):
    name: str
    model: str
    label: str | None = None
    roles: list[str] = []
    task: str | None = None


class Report(BaseModel):
    """`warnings` are those raised outside any stage; the others are in their stage."""

    run: RunRecord
    members: list[PanelMember]
    stages: list[Stage]
    facts: list[tuple[str, str]]
    warnings: list[str]
    calls: list[CallRecord]
    unknown_events: int = 0

    @property
    def title(self) -> str:
        return f"panel {self.run.protocol} · {self.run.panel}"

    @property
    def totals(self) -> str:
        """`9 calls · 4,069 tokens · $0.0123` from the run's own totals, as `history show` prints them."""
        calls = fmt.calls_count(self.run.calls, self.run.calls_by_status, noun=True)
        return f"{calls} · {fmt.tokens(self.run.tokens)} tokens · {self.cost}"

    @property
    def cost(self) -> str:
        """The run's cost as every surface reads it (`fmt.basis_cost`)."""
        return fmt.basis_cost(self.run.cost, self.run.cost_basis, self.run.unpriced)

    @property
    def duration(self) -> str | None:
        if self.run.finished_at is None:
            return None
        return f"{self.run.finished_at - self.run.started_at:.1f}s"


def call_note(call: CallRecord) -> str:
    """What a call's row notes: its failure, that it was reused from the run resumed, that its
    reply came late (not used), that its reply was cut."""
    if call.error_kind:
        return f"{call.error_kind}: {call.error or ''}"
    notes = (
        ["reused (paid by the run resumed)"] * call.reused
        + [fmt.LATE_NOTE] * call.late
        + ["reply truncated"] * call.truncated
    )
    return "; ".join(notes)


def utc(timestamp: float) -> str:
    """A shared report is read in other time zones: UTC, said so."""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def pretty_reply(text: str) -> str:
    """A structured reply (a vote, a ballot, a verdict, a plan) as `key: value` lines, its
    strings as written rather than JSON-escaped, so it reads; any other text (one nested too
    deep to read safely included: `panel_cli.untrusted`) as it is."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        return text
    try:
        parsed = load_json(stripped)
    except ValueError:
        return text
    if not isinstance(parsed, dict):
        return text
    return "\n".join(
        f"{key}: {value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}"
        for key, value in parsed.items()
    )


def build_report(transcript: Transcript) -> Report:
    builder = _Builder(transcript)
    for payload in transcript.events:
        try:
            event = parse_event(payload)
        except ValidationError:
            builder.unknown += 1  # an event from a newer panel: its calls still count below
            continue
        builder.feed(event)
    return builder.finish()


class _Builder:
    def __init__(self, transcript: Transcript) -> None:
        self.transcript = transcript
        self.run = transcript.run
        self.totals = ViewTotals()
        self.stages: list[Stage] = []
        self.stage: Stage | None = None
        self.labels: dict[str, str] = {}
        self.members: list[PanelMember] = [
            PanelMember(name=m.name, model=m.model, label=m.label) for m in self.run.members
        ]
        self.warnings: list[str] = []
        self.board: VoteBoard | None = None
        self.vote_stage: Stage | None = None
        self.verdicts: list[Verdict] = []
        self.contributions: dict[str, dict[int, str]] = {}
        self.delphi_rounds: list[int] = []
        self.accepted: PlanAccepted | None = None
        self.plan: Plan | None = None
        self.plan_stage: Stage | None = None
        self.ended: RunFinished | None = None
        self.unknown = 0
        self.servers: list[str] = []
        # Each tool call's row and its place in the row's `tools`, to mark how it ended.
        self.tool_calls: dict[tuple[str, str], tuple[CallRow, int]] = {}

    def feed(self, event: BaseEvent) -> None:
        self.totals.update(event)
        read = READERS.get(type(event))
        if read is not None:
            read(self, event)

    def _on_run_started(self, event: RunStarted) -> None:
        self.labels.update({m.name: m.label for m in event.members if m.label})

    def _on_stage(self, event: StageStarted) -> None:
        self._open(event.stage, event.round, event.members)

    def _on_delphi_round_ended(self, event: DelphiRoundEnded) -> None:
        self._current().notes.append(round_note(event).plain)

    def _on_asking_stopped(self, event: AskingStopped) -> None:
        self._current().notes.append(stop_note(event))

    def _on_plan_proposed(self, event: PlanProposed) -> None:
        self._current().notes.append(f"plan proposed by {event.planner}")

    def _on_plan_rejected(self, event: PlanRejected) -> None:
        self._current().notes.append(rejection_note(event))

    def _on_warning(self, event: WarningRaised) -> None:
        line = f"{event.member}: {event.message}" if event.member else event.message
        (self.stage.warnings if self.stage is not None else self.warnings).append(line)

    def _on_run_finished(self, event: RunFinished) -> None:
        self.ended = event

    def _on_tool_server(self, event: ToolServerStarted) -> None:
        self.servers.append(server_text(event).removeprefix("tools: "))

    def _current(self) -> Stage:
        """Events before any stage (an engine that reports before announcing) get one of their own."""
        if self.stage is None:
            self._open("run", None, [])
        assert self.stage is not None
        return self.stage

    def _open(self, name: str, round_: int | None, members: list[str]) -> Stage:
        stage = Stage(stage=name, round=round_)
        for member in members:
            stage.member_row(member)
        self.stages.append(stage)
        self.stage = stage
        if self.plan is not None and self.plan_stage is None and name != "plan":
            self.plan_stage = stage  # the subtasks run in the first stage after the accepted plan
        return stage

    def _stage_of(self, name: str, round_: int | None) -> Stage:
        """The call's stage: the current one, else the latest with that name and round, else a new one."""
        if self.stage is not None and (self.stage.stage, self.stage.round) == (name, round_):
            return self.stage
        for stage in reversed(self.stages):
            if (stage.stage, stage.round) == (name, round_):
                return stage
        return self._open(name, round_, [])

    def _on_call(self, event: CallStarted | CallFinished | CallFailed | MemberSkipped) -> None:
        stage = self._stage_of(event.stage, event.round)
        if isinstance(event, MemberSkipped):
            row = stage.free_row(event.member)
            row.about, row.status, row.reply = event.about, "skipped", event.reason
            return
        row = stage.call_row(event.call_id, event.member, event.about)
        match event:
            case CallFinished():
                row.status, row.latency, row.reply, row.truncated = (
                    "answered",
                    event.latency,
                    event.text,
                    event.truncated,
                )
                if event.tokens_in is not None or event.tokens_out is not None:
                    row.tokens = (event.tokens_in or 0) + (event.tokens_out or 0)
            case CallFailed():
                row.status, row.latency = FAILURE_STATUS.get(event.kind, "failed"), event.latency
                row.reply = "" if event.kind == "cancelled" else f"{event.kind}: {event.message}"

    def _on_tool(self, event: ToolCallStarted | ToolCallFinished) -> None:
        """A tool call on the row of the model call that made it: `lookup(query="…") ok, 539 chars`."""
        key = (event.call_id, event.tool_call_id)
        known = self.tool_calls.get(key)
        if known is None:
            row = self._stage_of(event.stage, event.round).call_row(event.call_id, event.member, event.about)
            row.tools.append("")
            known = self.tool_calls[key] = (row, len(row.tools) - 1)
        row, index = known
        label = activity(event).label()
        if isinstance(event, ToolCallStarted):
            row.tools[index] = f"{label} running"
        elif event.status == "ok":
            row.tools[index] = f"{label} ok, {event.result_chars:,} chars, {fmt.seconds(event.duration)}"
        else:
            row.tools[index] = f"{label} {event.status}: {fmt.one_line(event.error or '', 120)}"

    def _on_vote(self, event: VoteCast) -> None:
        row = self._current().member_row(event.voter)
        row.voted, row.kept_own = event.choice, event.fallback
        row.confidence, row.shown = event.confidence, event.rationale or None

    def _on_tally(self, event: RoundTallied) -> None:
        """confer's round keeps label order (a label sits at the same place every round);
        a choice made once (ensemble's scores) reads best first."""
        for label, author in event.authors.items():
            self.labels.setdefault(author, label)
        top = max(event.scores.values(), default=0) or 1
        bars = [
            Bar(
                key=label,
                name=event.authors.get(label),
                text=fmt.number(score),
                share=max(score, 0) / top,
                winner=label == event.winner_label,
            )
            for label, score in fmt.tally_order(event.scores, best_first=event.round is None)
        ]
        if event.winner_label is None:
            note = "no winner this round"
        else:
            note = f"{'winner' if event.round is not None else 'chosen'}: {event.winner or event.winner_label}"
        stage = self._current()
        stage.authors = event.authors
        stage.tally = Chart(
            title="Tally" if event.round is not None else "Scores", measure="score", bars=bars, note=note
        )

    def _on_ranking(self, event: RankingParsed) -> None:
        stage = self._current()
        if event.reviewer is not None:
            stage.member_row(event.reviewer).ranking = event.ranking
            return
        for entry in event.aggregate:
            if entry.get("name") and entry.get("label"):
                self.labels.setdefault(str(entry["name"]), str(entry["label"]))
        stage.aggregate = aggregate_chart(event.aggregate)

    def _on_ballot(self, event: VoteEvent) -> None:
        stage = self._current()
        if self.board is None:
            self.board = VoteBoard()
            self.vote_stage = stage
        self.board.update(event)
        match event:
            case VoteReceived():
                row = stage.member_row(event.voter)
                row.choice, row.choice_note = ballot_choice(event.choice, event.matched_by, event.late)
                row.confidence, row.shown = event.confidence, event.reason or None
                row.ranking = event.ranking if len(event.ranking) > 1 else None
            case LeaderChose():
                row = stage.member_row(event.leader)
                row.choice, row.choice_note = ballot_choice(event.choice, event.matched_by)
                row.confidence, row.shown = event.confidence, event.reason or event.error or None
                stage.outcome, stage.won = leader_line(event).plain, event.choice is not None

    def _on_contribution(self, event: ContributionMade) -> None:
        stage = self._current()
        self.labels.setdefault(event.expert, event.label)
        row = stage.member_row(event.expert)
        state = "first" if event.changed is None else "changed" if event.changed else "unchanged"
        state += "" if event.structured else " (unstructured)"
        row.shown, row.changed = event.analysis, state
        self.contributions.setdefault(event.expert, {})[event.round] = state
        if event.round not in self.delphi_rounds:
            self.delphi_rounds.append(event.round)

    def _on_verdict(self, event: VerdictGiven) -> None:
        """The critic's row reads as its verdict rather than as the JSON it replied."""
        verdict = Verdict.model_validate(event.model_dump())
        self.verdicts.append(verdict)
        stage = self._current()
        stage.verdict = verdict
        if verdict.verdict is None:
            summary = f"no usable verdict: {verdict.problem or 'unknown'}"
        elif verdict.rejected:
            summary = f"{verdict.verdict}: sends back {', '.join(verdict.rejected)}"
        else:
            summary = verdict.verdict
        stage.member_row(event.critic).shown = summary

    def _on_plan(self, event: PlanAccepted) -> None:
        self.accepted = event
        by_id = {task.task_id: task for task in event.tasks}
        order = tree_order({task.task_id: task.depends_on for task in event.tasks})
        ordered = [Task(depth=len(lasts) - 1, **by_id[task_id].model_dump()) for task_id, lasts in order]
        self.plan = Plan(planner=event.planner, attempt=event.attempt, tasks=ordered)
        self._current().notes.append(f"plan accepted: {plural(len(event.tasks), 'subtask')}")

    def _on_task(self, event: TaskStarted | TaskFinished | TaskFailed | TaskSkipped) -> None:
        if self.plan is None:
            return
        task = next((task for task in self.plan.tasks if task.task_id == event.task_id), None)
        if task is None:
            return
        match event:
            case TaskStarted():
                task.status = "running"
                origin = self.accepted.ts if self.accepted is not None else 0.0
                task.start = max(event.ts - origin, 0.0) if event.ts and origin else None
            case TaskFinished():
                task.status, task.duration, task.note = "succeeded", event.duration, event.preview
            case TaskFailed():
                task.status, task.duration, task.note = "failed", event.duration, f"{event.kind}: {event.error}"
            case TaskSkipped():
                task.status, task.note = "skipped", event.reason

    def finish(self) -> Report:
        for stage in self.stages:
            for row in stage.rows:
                row.label = self.labels.get(row.member)
                if row.voted is not None:
                    author = stage.authors.get(row.voted)
                    row.choice = row.voted + (f" · {author}" if author else "")
                    row.choice_note = "kept own" if row.kept_own else None
        if self.board is not None and self.vote_stage is not None:
            self.vote_stage.vote = vote_summary(self.board)
        if self.verdicts:
            last = next(stage for stage in reversed(self.stages) if stage.verdict is not None)
            last.verdict_grid = list(self.verdicts)
        if self.contributions:
            last = next(stage for stage in reversed(self.stages) if any(row.changed for row in stage.rows))
            experts = [(self.labels.get(name, ""), name) for name in self.contributions]
            last.delphi = DelphiGrid(
                rounds=sorted(self.delphi_rounds), experts=sorted(experts), states=self.contributions
            )
        if self.plan is not None:
            stage = self.plan_stage or self._current()
            outputs = {row.about: row for row in stage.rows if row.about}
            for task in self.plan.tasks:
                output = outputs.get(task.task_id)
                if output is not None and output.status == "answered":
                    task.output = output.reply
            stage.plan = self.plan
        council = next((stage for stage in self.stages if stage.aggregate is not None), None)
        if council is not None and council.aggregate is not None:
            council.bias = bias_chart((self.run.result or {}).get("bias"), len(council.aggregate.bars))
        return Report(
            run=self.run,
            members=self._panel(),
            stages=self.stages,
            facts=self._facts(),
            warnings=self.warnings,
            calls=self.transcript.calls,
            unknown_events=self.unknown,
        )

    def _panel(self) -> list[PanelMember]:
        """The members, then whoever else made calls (an inline chairman, critic or planner),
        each with the roles the panel file gave it."""
        members = list(self.members)
        known = {member.name for member in members}
        for call in self.transcript.calls:
            if call.member not in known:
                members.append(PanelMember(name=call.member, model=call.model))
                known.add(call.member)
        config = self.run.config
        tasks = {
            str(entry.get("name")): entry.get("task") for entry in config.get("members", []) if isinstance(entry, dict)
        }
        for member in members:
            member.label = member.label or self.labels.get(member.name)
            member.task = tasks.get(member.name) or None
            for role in ROLES:
                names = role_names(config.get(role))
                if member.name in names:
                    member.roles.append(role if names.index(member.name) == 0 else f"backup {role}")
        return members

    def _facts(self) -> list[tuple[str, str]]:
        """The terminal summary's facts (winner, confidence, top ranked, plan, …), without the
        totals and the run id, which the report's header shows; and how many warnings the
        stages below carry."""
        ended = self.ended or RunFinished(final_answer=self.run.final_answer, result=self.run.result or {})
        facts = [(name, value) for name, value in summary_fields(ended, None) if name != "run"]
        if self.totals.warnings:
            facts.append(("warnings", str(len(self.totals.warnings))))
        facts += [("tools", server) for server in self.servers]
        # The runs a resume links: this run took over `resumes`, and `resumed by` took it over.
        if self.run.resumed_from is not None:
            facts.append(("resumes", self.run.resumed_from))
        if self.run.resumed_by is not None:
            facts.append(("resumed by", self.run.resumed_by))
        return facts


# What the report reads from each event type. Every type is either here or in IGNORED, never
# in both: tests/test_event_consumers.py checks it.
READERS: dict[type[BaseEvent], Callable[[_Builder, Any], None]] = {
    RunStarted: _Builder._on_run_started,
    StageStarted: _Builder._on_stage,
    CallStarted: _Builder._on_call,
    CallFinished: _Builder._on_call,
    CallFailed: _Builder._on_call,
    MemberSkipped: _Builder._on_call,
    AskingStopped: _Builder._on_asking_stopped,
    VoteCast: _Builder._on_vote,
    RoundTallied: _Builder._on_tally,
    RankingParsed: _Builder._on_ranking,
    VoteOpened: _Builder._on_ballot,
    VoteReceived: _Builder._on_ballot,
    QuorumReached: _Builder._on_ballot,
    VoteTallied: _Builder._on_ballot,
    LeaderChose: _Builder._on_ballot,
    ContributionMade: _Builder._on_contribution,
    DelphiRoundEnded: _Builder._on_delphi_round_ended,
    VerdictGiven: _Builder._on_verdict,
    PlanProposed: _Builder._on_plan_proposed,
    PlanRejected: _Builder._on_plan_rejected,
    PlanAccepted: _Builder._on_plan,
    TaskStarted: _Builder._on_task,
    TaskFinished: _Builder._on_task,
    TaskFailed: _Builder._on_task,
    TaskSkipped: _Builder._on_task,
    WarningRaised: _Builder._on_warning,
    RunFinished: _Builder._on_run_finished,
    ToolServerStarted: _Builder._on_tool_server,
    ToolCallStarted: _Builder._on_tool,
    ToolCallFinished: _Builder._on_tool,
}

# What the report reads nothing from, on purpose: a decision recorded repeats the vote's tally
# and the leader's choice; a run's failure or interruption is in the run's status and error;
# a reply's text as it was written is never stored (its call's event has the whole text).
IGNORED: frozenset[type[BaseEvent]] = frozenset({DecisionRecorded, RunFailed, RunInterrupted, CallTextGrew})


def ballot_choice(choice: str | None, matched_by: str, late: bool = False) -> tuple[str, str | None]:
    """The option a ballot counts for (or `abstained`, `late`), and how it was read when not
    from a structured ballot, as `choice_text` words it for the terminal."""
    if late or choice is None:
        return choice_text(choice, matched_by, late), None
    shown = choice_text(choice, matched_by)
    return choice, shown[len(choice) :].strip(" ()") or None


def role_names(value: Any) -> list[str]:
    """A role in a panel file is a member's name, an inline member, or a list of either (backups)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [str(value["name"])] if value.get("name") else []
    if isinstance(value, list):
        return [name for entry in value for name in role_names(entry)]
    return []


def aggregate_chart(aggregate: list[dict[str, Any]]) -> Chart:
    """Best first; a better (lower) average rank gives a longer bar."""
    worst = max(len(aggregate), 1)
    bars = []
    for place, entry in enumerate(aggregate, start=1):
        average = entry.get("average_rank")
        share = 0.0 if average is None else max(worst + 1 - float(average), 0) / worst
        count = entry.get("count")
        bars.append(
            Bar(
                key=str(entry.get("label") or place),
                name=str(entry.get("name") or ""),
                share=share,
                winner=place == 1,
                text=fmt.UNKNOWN if average is None else f"{float(average):.2f}",
                detail=None if count is None else f"average rank over {plural(int(count), 'ranking')}",
            )
        )
    note = None if aggregate else fmt.NO_AGGREGATE
    return Chart(title="Aggregate ranking", measure="average rank", bars=bars, note=note)


def bias_chart(bias: Any, answers: int) -> Chart | None:
    """How often reviewers put their own answer first, and how often first place went to the
    answer shown first; the mark on each bar is what chance alone gives (one in `answers`)."""
    if not isinstance(bias, dict):
        return None
    chance = 1 / answers if answers else None
    bars = []
    for key, name, count, total in (
        ("own_first_share", "own answer ranked first", "own_first", "own_reviews"),
        ("shown_first_share", "answer shown first ranked first", "shown_first", "ranked_reviews"),
    ):
        share = bias.get(key)
        if share is None:
            continue
        detail = f"{bias.get(count)} of {plural(int(bias.get(total) or 0), 'review')}"
        bars.append(Bar(key=name, text=fmt.percent(float(share)), share=float(share), marker=chance, detail=detail))
    if not bars:
        return None
    note = f"the mark is chance: 1 in {answers}" if chance is not None else None
    return Chart(title="Bias report", measure="share", bars=bars, note=note)


def vote_summary(board: VoteBoard) -> VoteSummary | None:
    if board.opened is None:
        return None
    weighted = board.opened.method in ("weighted", "weighted_plurality")
    tally = board.tally
    counts: dict[str, float]
    if tally is not None:
        counts = tally.weights if weighted else {option: float(count) for option, count in tally.vote_counts.items()}
    else:
        counts = board.running()
    top = max(counts.values(), default=0) or 1
    winner = tally.winner if tally is not None else None
    bars = [
        Bar(
            key=option,
            text=fmt.number(count) + (" weight" if weighted else ""),
            share=count / top,
            winner=option == winner,
        )
        for option, count in counts.items()
    ]
    return VoteSummary(
        rules=rules_line(board.opened).plain,
        options=list(board.opened.options),
        chart=Chart(title="Weights" if weighted else "Votes", measure="weight" if weighted else "votes", bars=bars),
        quorum=quorum_line(board),
        apart=apart_line(board),
        runoff=list(tally.rounds or []) if tally is not None else [],
        runoff_lines=[round_text(entry).plain for entry in (tally.rounds or [])] if tally is not None else [],
        outcome=outcome_line(tally).plain if tally is not None else None,
        won=winner is not None,
    )


def quorum_line(board: VoteBoard) -> str:
    assert board.opened is not None
    needed = board.opened.quorum
    if board.quorum is not None:
        return f"quorum reached: {plural(board.quorum.current, 'ballot')}, {needed} needed"
    if board.tally is not None:
        return f"quorum not met: {plural(board.tally.ballots_cast, 'ballot')} arrived, {needed} needed"
    arrived = sum(1 for ballot in board.ballots.values() if not ballot.late)
    return f"quorum {needed}: {plural(arrived, 'ballot')} before the run ended"


def apart_line(board: VoteBoard) -> str | None:
    """Who abstained and whose ballot came too late to count."""
    abstained = [name for name, ballot in board.ballots.items() if ballot.choice is None and not ballot.late]
    late = [name for name, ballot in board.ballots.items() if ballot.late]
    notes = [f"abstained: {', '.join(abstained)}"] if abstained else []
    notes += [f"late, not counted: {', '.join(late)}"] if late else []
    return " · ".join(notes) or None


ColumnKey = Literal[
    "member", "status", "choice", "confidence", "ranking", "changed", "tools", "text", "latency", "tokens"
]


class Column(BaseModel):
    header: str
    key: ColumnKey
    numeric: bool = False


def stage_columns(stage: Stage) -> list[Column]:
    """A stage table's columns: the common ones, and a protocol's only where a row has a value
    for it (a vote, a ranking, a Delphi change), so each protocol's table reads as its own."""
    rows = stage.rows
    has_choice = any(row.choice is not None for row in rows)
    has_changed = any(row.changed is not None for row in rows)
    columns = [Column(header="member", key="member"), Column(header="status", key="status")]
    if has_choice:
        columns.append(Column(header="choice" if stage.stage == "leader" else "vote", key="choice"))
    if any(row.confidence is not None for row in rows):
        columns.append(Column(header="confidence", key="confidence", numeric=True))
    if any(row.ranking for row in rows):
        columns.append(Column(header="ranking", key="ranking"))
    if has_changed:
        columns.append(Column(header="changed?", key="changed"))
    if any(row.tools for row in rows):
        columns.append(Column(header="tools", key="tools"))
    text = "analysis" if has_changed else "reason" if has_choice else "answer" if stage.stage == "answer" else "reply"
    columns += [
        Column(header=text, key="text"),
        Column(header="latency", key="latency", numeric=True),
        Column(header="tokens", key="tokens", numeric=True),
    ]
    return columns


def cell_text(row: CallRow, key: ColumnKey) -> str:
    """A cell as plain text; `text` is whole (each format cuts or folds it its own way)."""
    match key:
        case "member":
            return fmt.who(row.member, row.about)
        case "status":
            return row.status
        case "choice":
            return (row.choice or "") + (f" ({row.choice_note})" if row.choice_note else "")
        case "confidence":
            return "" if row.confidence is None else fmt.number(row.confidence)
        case "ranking":
            return ", ".join(row.ranking or [])
        case "changed":
            return row.changed or ""
        case "tools":
            return "; ".join(row.tools)
        case "text":
            return row.text
        case "latency":
            return "" if row.latency is None else fmt.seconds(row.latency)
        case "tokens":
            return "" if row.tokens is None else fmt.tokens(row.tokens)
