"""How a vote is drawn: each ballot as it arrives (voter, choice, ranking, confidence, reason),
the running tally with bars, the quorum line, every round of an instant runoff, and the
winner or the exact reason there is none.

The live view hands the vote's events to `on_event`, which turns the stage in progress into
a `VoteStage` (the stage's table, then the board); the plain view writes a line per event
from `PLAIN_LINES`; `panel history retally` draws its recount with `render_tally` and
`render_rounds`. Option names, reasons and errors are data, always drawn as `Text`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypeAlias

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from panel_cli.protocols.vote.methods import PLURALITY_METHODS, WEIGHTED_METHODS
from panel_cli.thresholds import as_percent
from panel_cli.view import fmt
from panel_cli.view.stored import Stored
from panel_cli.view.tables import BAR_WIDTH, WINNER, RunSoFar, StageState, StageTable, warning_line
from panel_cli.wording import plural

if TYPE_CHECKING:
    # Only named: the board reads each event by its fields, so `panel history show` draws a
    # stored vote from its payloads without loading the event or tally models.
    from panel_cli.events import (
        DecisionRecorded,
        LeaderChose,
        QuorumReached,
        VoteOpened,
        VoteReceived,
        VoteTallied,
    )
    from panel_cli.protocols.vote.tally import RunoffRound, Tally

# The events a vote's board is drawn from (DecisionRecorded only repeats what they say).
VoteEvent: TypeAlias = "VoteOpened | VoteReceived | QuorumReached | VoteTallied | LeaderChose"

REASON_PREVIEW = 80


def choice_text(choice: str | None, matched_by: str, late: bool = False) -> str:
    """`PostgreSQL`, `MySQL (from text)`, `Ship (first option)`, `abstained` or `late`."""
    if late:
        return "late"
    if choice is None:
        return "abstained"
    return choice + {"text": " (from text)", "first": " (first option)"}.get(matched_by, "")


@dataclass
class VoteBoard:
    """Everything a vote has shown so far, redrawn from its events alone. The tally is read
    as the JSON its event holds (`Tally`'s fields, by attribute)."""

    opened: VoteOpened | None = None
    ballots: dict[str, VoteReceived] = field(default_factory=dict)
    quorum: QuorumReached | None = None
    tally: Tally | Stored | None = None
    leader: LeaderChose | None = None

    def update(self, event: VoteEvent) -> None:
        match event.type:
            case "vote_opened":
                self.opened = event
            case "vote_received":
                self.ballots.setdefault(event.voter, event)
            case "quorum_reached":
                self.quorum = event
            case "vote_tallied":
                self.tally = Stored(event.tally)
            case "leader_chose":
                self.leader = event

    def running(self) -> dict[str, float]:
        """The count so far: ballots (or, for weighted, their weight) per option; a runoff's
        first preferences."""
        options = self.opened.options if self.opened else []
        weighted = self.opened is not None and self.opened.method in WEIGHTED_METHODS
        counts = dict.fromkeys(options, 0.0)
        for ballot in self.ballots.values():
            if not ballot.late and ballot.choice in counts:
                counts[ballot.choice] += ballot.weight if weighted else 1
        return counts

    def renderables(self) -> list[RenderableType]:
        parts: list[RenderableType] = []
        if self.opened is not None:
            parts += [Text(), rules_line(self.opened)]
            if self.tally is not None:
                parts.append(render_tally(self.tally))
            else:
                parts.append(tally_bars(self.running(), None, weighted=self.opened.method in WEIGHTED_METHODS))
            parts.append(self._quorum_line())
            apart = self._apart_line()
            if apart is not None:
                parts.append(apart)
        if self.tally is not None and self.tally.rounds:
            parts += [Text(), render_rounds(self.tally.rounds)]
        if self.tally is not None:
            parts.append(outcome_line(self.tally))
        if self.leader is not None:
            parts.append(leader_line(self.leader))
        return parts

    def _quorum_line(self) -> Text:
        assert self.opened is not None
        needed = self.opened.quorum
        if self.quorum is not None:
            return Text(f"quorum reached: {plural(self.quorum.current, 'ballot')}, {needed} needed", style="green")
        if self.tally is not None:
            return Text(
                f"quorum not met: {plural(self.tally.ballots_cast, 'ballot')} arrived, {needed} needed",
                style="bold red",
            )
        arrived = sum(1 for ballot in self.ballots.values() if not ballot.late)
        return Text(f"quorum {needed}: {plural(arrived, 'ballot')} so far", style="dim")

    def _apart_line(self) -> Text | None:
        abstained = [name for name, ballot in self.ballots.items() if ballot.choice is None and not ballot.late]
        late = [name for name, ballot in self.ballots.items() if ballot.late]
        notes = [f"abstained: {', '.join(abstained)}"] if abstained else []
        notes += [f"late, not counted: {', '.join(late)}"] if late else []
        return Text(" · ".join(notes), style="yellow") if notes else None


def rules_line(opened: VoteOpened) -> Text:
    """`majority · quorum 2 · 4 voters, at most 10 at once · collection closes after 30s`."""
    method = opened.method.replace("_", " ") + (
        f" (more than {as_percent(opened.threshold)})" if opened.method == "supermajority" else ""
    )
    if opened.method in PLURALITY_METHODS:
        method += f" (a tie: {opened.tie_break})"
    parts = [method, f"quorum {opened.quorum}", plural(len(opened.voters), "voter")]
    if len(opened.voters) > opened.max_voters:
        parts[-1] += f", at most {opened.max_voters} at once"
    if opened.timeout is not None:
        parts.append(f"collection closes after {fmt.number(opened.timeout)}s")
    if opened.leader:
        parts.append(f"leader {opened.leader}")
    return Text(" · ".join(parts), style="bold")


def tally_bars(counts: dict[str, float], winner: str | None, *, weighted: bool) -> Table:
    """One bar per option, in the order listed, as long as its count (or weight); the
    winner's in bold green with a ★."""
    grid = Table.grid(padding=(0, 1), pad_edge=True)
    top = max(counts.values(), default=0) or 1
    for option, count in counts.items():
        won = option == winner
        style = "bold green" if won else "cyan"
        bar = "█" * max(round(count / top * BAR_WIDTH), 1 if count > 0 else 0)
        grid.add_row(
            Text(option, style="bold" if won else ""),
            Text(bar.ljust(BAR_WIDTH), style=style),
            Text(fmt.number(count) + (" weight" if weighted else ""), style=style, justify="right"),
            Text(WINNER if won else "", style=style),
        )
    return grid


def render_tally(counted: Tally | Stored) -> Table:
    weighted = counted.method in WEIGHTED_METHODS
    return tally_bars(
        counted.weights if weighted else {o: float(c) for o, c in counted.vote_counts.items()},
        counted.winner,
        weighted=weighted,
    )


def round_text(entry: RunoffRound) -> Text:
    """`round 1: A 2 · B 1 · C 1 — C dropped (tied with B; the one listed last goes); 1 → A`."""
    line = Text.assemble(
        (f"round {entry.index}: ", "bold"), " · ".join(f"{option} {count}" for option, count in entry.counts.items())
    )
    if entry.winner is not None:
        line.append(
            f" — {entry.winner} wins with {entry.counts.get(entry.winner, 0)} of {plural(entry.live, 'live ballot')}",
            style="bold green",
        )
    elif entry.eliminated is not None:
        line.append(f" — {entry.eliminated} dropped", style="yellow")
        if entry.tied:
            others = [option for option in entry.tied if option != entry.eliminated]
            line.append(f" (tied with {', '.join(others)}; the one listed last goes)", style="yellow")
        moves = [f"{count} → {option}" for option, count in entry.transfers.items()]
        moves += [f"{entry.exhausted_now} exhausted"] if entry.exhausted_now else []
        line.append(f"; its ballots: {', '.join(moves)}" if moves else "; it had no ballots", style="dim")
    else:
        line.append(" — every ballot is exhausted", style="bold red")
    return line


def render_rounds(rounds: list[RunoffRound]) -> Group:
    return Group(Text("instant runoff", style="bold"), *(round_text(entry) for entry in rounds))


def outcome_line(counted: Tally | Stored) -> Text:
    if counted.winner is None:
        return Text(f"no winner: {counted.reason}", style="bold red")
    share = f"{counted.winner_votes} of {plural(counted.total_votes, 'vote')}"
    if counted.method in WEIGHTED_METHODS:
        share = f"weight {fmt.number(counted.weights[counted.winner])} of {fmt.number(counted.total_weight)}"
    return Text.assemble(
        ("winner: ", "bold green"),
        (counted.winner, "bold green"),
        (f" — {share}, {counted.method.replace('_', ' ')}", "green"),
        (
            f"; it tied with {', '.join(o for o in counted.tied if o != counted.winner)}, listed first"
            if counted.tied
            else "",
            "green",
        ),
    )


def leader_line(event: LeaderChose) -> Text:
    if event.choice is not None:
        return Text.assemble(
            ("leader ", "bold"),
            (event.leader, "bold"),
            " chose ",
            (choice_text(event.choice, event.matched_by), "bold green"),
            (" — the leader's choice decides (leader override)", "green"),
        )
    why = event.error or "named no option"
    return Text(f"leader {event.leader} made no choice: {why}", style="bold red")


@dataclass
class VoteStage(StageState):
    """A stage of a vote: the stage's table (a row per ballot), then the board."""

    board: VoteBoard = field(default_factory=VoteBoard)
    # A ballot stage draws its table once the vote has opened (the event right after the stage
    # starts): the options say how wide a ballot is, and so which columns fit beside it.
    opens: bool = False

    @classmethod
    def of(cls, stage: StageState) -> VoteStage:
        """A stage whose protocol declared no table of its own for it, once a ballot shows it is a vote."""
        kept = {entry.name: getattr(stage, entry.name) for entry in fields(StageState)}
        return cls(**{**kept, "votes": True, "text_header": "reason"})

    @property
    def ranked(self) -> bool:
        """Whether a ballot's whole ranking counts (ranked choice), so its row shows it."""
        return self.board.opened is None or self.board.opened.method == "ranked_choice"

    def vote_width(self) -> int:
        """Room for the longest ballot the options allow: every option in turn when ranked."""
        options = self.board.opened.options if self.board.opened else []
        if not options:
            return super().vote_width()
        choice = " > ".join(options) if self.ranked else max(options, key=len)
        return len(f"→ {choice} 100")

    def render(self) -> RenderableType:
        warnings = [warning_line(warning) for warning in self.warnings]
        if self.opens and self.board.opened is None:
            return Group(Text(self.title, style="bold"), *warnings)
        return Group(StageTable(self), *self.board.renderables(), *warnings)


def ballot_stage(stage: str, round_: int | None, seen: RunSoFar) -> StageState:
    """vote's and decide's ballots: a row per voter, its vote (its whole ranking, for ranked
    choice) and its reason, then the board."""
    return VoteStage(stage, round_, text_header="reason", votes=True, tool_use=False, opens=True)


def leader_stage(stage: str, round_: int | None, seen: RunSoFar) -> StageState:
    """decide's leader, choosing when no option won: its choice and its reason."""
    return VoteStage(stage, round_, text_header="reason", votes=True, tool_use=False)


def on_event(stage: StageState | None, event: VoteEvent, labels: dict[str, str]) -> StageState | None:
    """The stage in progress, made a `VoteStage` and updated with one of a vote's events: a
    ballot fills its voter's row (choice, confidence, reason, ranking)."""
    if stage is None:
        return stage
    voting = stage if isinstance(stage, VoteStage) else VoteStage.of(stage)
    voting.board.update(event)
    if event.type == "vote_received":
        row = voting.member_row(event.voter, labels.get(event.voter))
        row.vote = vote_shown(
            event.voter,
            choice_text(event.choice, event.matched_by, event.late),
            event.confidence,
            event.reason,
        )
        ranking = event.ranking
        row.ranking = ranking if voting.ranked and len(ranking) > 1 else None
    elif event.type == "leader_chose":
        row = voting.member_row(event.leader, labels.get(event.leader))
        row.vote = vote_shown(
            event.leader,
            choice_text(event.choice, event.matched_by),
            event.confidence,
            event.reason or event.error or "",
        )
    return voting


def vote_shown(voter: str, choice: str, confidence: float | None, rationale: str) -> Any:
    """A ballot as its voter's row shows it, read as a `VoteCast` is (by attribute)."""
    return Stored(
        type="vote_cast",
        round=None,
        voter=voter,
        choice=choice,
        confidence=confidence,
        rationale=rationale,
        fallback=False,
    )


# Plain lines -----------------------------------------------------------------------------------


def _opened_line(event: VoteOpened) -> str:
    return f"vote opened  {rules_line(event).plain}  options: {', '.join(event.options)}"


def _ballot_line(event: VoteReceived) -> str:
    if event.late:
        return f"ballot  {event.voter}  late, not counted: {fmt.one_line(event.reason, REASON_PREVIEW)}"
    detail = "" if event.confidence is None else f" ({fmt.number(event.confidence)})"
    line = f"ballot  {event.voter} -> {choice_text(event.choice, event.matched_by)}{detail}"
    if len(event.ranking) > 1:
        line += f"  ranking {' > '.join(event.ranking)}"
    return line + (f"  {fmt.one_line(event.reason, REASON_PREVIEW)}" if event.reason else "")


def _quorum_reached_line(event: QuorumReached) -> str:
    return f"quorum reached: {plural(event.current, 'ballot')}, {event.required} needed"


def _tally_lines(event: VoteTallied) -> str:
    """The count, a line per runoff round, and the outcome."""
    counted: Tally | Stored = Stored(event.tally)
    values: dict[str, Any] = counted.weights if counted.method in WEIGHTED_METHODS else counted.vote_counts
    lines = [
        f"tally ({counted.method}): " + " ".join(f"{option}={fmt.number(value)}" for option, value in values.items())
    ]
    lines += [f"  runoff {round_text(entry).plain}" for entry in counted.rounds or []]
    lines.append(outcome_line(counted).plain)
    return "\n".join(lines)


def _leader_chose_line(event: LeaderChose) -> str:
    return leader_line(event).plain


def _decision_line(event: DecisionRecorded) -> str:
    outcome = event.winner or "no winner"
    return f"decision recorded: {outcome}" + (" (leader override)" if event.leader_override else "")


# The plain view's line (or lines) for each event of a vote.
PLAIN_LINES: dict[str, Callable[[Any], str]] = {
    "vote_opened": _opened_line,
    "vote_received": _ballot_line,
    "quorum_reached": _quorum_reached_line,
    "vote_tallied": _tally_lines,
    "leader_chose": _leader_chose_line,
    "decision_recorded": _decision_line,
}
