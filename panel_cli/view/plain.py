"""The view for a pipe or a log file: one plain line per event, no colour, no cursor tricks.

It writes progress only; the CLI prints the final answer to stdout itself, so a script
can read the answer from stdout while a person follows the run on stderr."""

from __future__ import annotations

from typing import Any, TextIO

from panel_cli.events import (
    BaseEvent,
    CallFailed,
    CallFinished,
    CallStarted,
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
)
from panel_cli.view import delphi, fmt, supervise, tools
from panel_cli.view.orchestrate import plain_line as orchestrate_line
from panel_cli.view.summary import ViewTotals, summary_fields
from panel_cli.view.vote import plain_line as vote_line

QUESTION_LIMIT = 200


class PlainView:
    """Writes lines like `[round 1] vote  alice -> B (80)` to `stream` (stderr in real use)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.totals = ViewTotals()

    async def __call__(self, event: BaseEvent) -> None:
        self.totals.update(event)
        line = self.line(event)
        if line is not None:
            self.stream.write(line + "\n")
            self.stream.flush()

    def close(self) -> None:
        self.stream.flush()

    def line(self, event: BaseEvent) -> str | None:
        """The line for one event (two for the run's start, which gives the question), or None
        for an event type this view does not know."""
        match event:
            case RunStarted():
                names = ", ".join(member.name for member in event.members)
                started = f"run started  {event.protocol}  {event.panel}  members: {names}  run {event.run_id}"
                return f"{started}\nquestion: {fmt.one_line(event.question, QUESTION_LIMIT)}"
            case StageStarted():
                started = f"{_where(event.stage, event.round)}{event.stage} started"
                return f"{started}  {', '.join(event.members)}" if event.members else started
            case CallStarted():
                who = fmt.who(event.member, event.about)
                return f"{_where(event.stage, event.round)}call started  {who}  {event.model}"
            case CallFinished():
                who = fmt.who(event.member, event.about)
                line = f"{_where(event.stage, event.round)}call finished  {who}  {fmt.seconds(event.latency)}"
                if event.tokens_in is not None or event.tokens_out is not None:
                    line += f"  {(event.tokens_in or 0) + (event.tokens_out or 0):,} tok"
                return line + ("  truncated" if event.truncated else "")
            case CallFailed():
                message = fmt.one_line(event.message, 200)
                who = fmt.who(event.member, event.about)
                return f"{_where(event.stage, event.round)}call failed  {who}  {event.kind}: {message}"
            case MemberSkipped():
                reason = fmt.one_line(event.reason, 200)
                return f"{_where(event.stage, event.round)}skipped  {fmt.who(event.member, event.about)}  {reason}"
            case VoteCast():
                detail = "" if event.confidence is None else fmt.number(event.confidence)
                if event.fallback:
                    detail = f"{detail}, fallback: kept own answer" if detail else "fallback: kept own answer"
                vote = f"{event.voter} -> {event.choice}" + (f" ({detail})" if detail else "")
                return f"[round {event.round}] vote  {vote}" if event.round is not None else f"vote  {vote}"
            case RoundTallied(round=None):
                return f"scores: {_scores(event)} -> {event.winner or event.winner_label or 'no winner'}"
            case RoundTallied():
                outcome = f"{event.winner_label} ({event.winner})" if event.winner_label else "no winner"
                return f"round {event.round} tallied: {_scores(event)} -> {outcome}"
            case RankingParsed(reviewer=str(reviewer)):
                return f"ranking  {reviewer}: {', '.join(event.ranking) or '(none)'}"
            case RankingParsed(aggregate=[]):
                return fmt.NO_AGGREGATE
            case RankingParsed():
                places = ", ".join(
                    f"{place}. {entry.get('name')} ({_average(entry.get('average_rank'))})"
                    for place, entry in enumerate(event.aggregate, start=1)
                )
                return f"aggregate ranking: {places}"
            case WarningRaised():
                return f"warning: {event.member}: {event.message}" if event.member else f"warning: {event.message}"
            case RunFinished():
                fields = summary_fields(event, self.totals)
                status = "run finished" if event.reached_answer else "run finished without an answer"
                return "  ".join([status, *(f"{name} {value}" for name, value in fields)])
            case RunFailed():
                return f"run failed: {event.message}"
            case RunInterrupted():
                return f"interrupted — the run is kept as interrupted (run id {event.run_id})"
            case (
                PlanProposed()
                | PlanRejected()
                | PlanAccepted()
                | TaskStarted()
                | TaskFinished()
                | TaskFailed()
                | TaskSkipped()
            ):
                return orchestrate_line(event)
            case VoteOpened() | VoteReceived() | QuorumReached() | VoteTallied() | LeaderChose() | DecisionRecorded():
                return vote_line(event)
            case ContributionMade() | DelphiRoundEnded():
                return delphi.plain_line(event)
            case VerdictGiven():
                return supervise.plain_line(event)
            case ToolServerStarted() | ToolCallStarted() | ToolCallFinished():
                return tools.plain_line(event)
        return None


def _where(stage: str, round_: int | None) -> str:
    """`[round 1] ` when the event has a round, `[reviews] ` when only a stage."""
    return f"[{stage}] " if round_ is None else f"[round {round_}] "


def _scores(tally: RoundTallied) -> str:
    """`A=170 B=50` in label order for a confer round; best first for a choice made once."""
    order = fmt.tally_order(tally.scores, best_first=tally.round is None)
    return " ".join(f"{label}={fmt.number(score)}" for label, score in order)


def _average(value: Any) -> str:
    return fmt.UNKNOWN if value is None else f"avg {float(value):.2f}"
