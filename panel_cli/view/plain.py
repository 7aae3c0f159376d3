"""The view for a pipe or a log file: one plain line per event, no colour, no cursor tricks.

It writes progress only; the CLI prints the final answer to stdout itself, so a script
can read the answer from stdout while a person follows the run on stderr."""

from __future__ import annotations

from collections.abc import Callable
from typing import IO, Any

from panel_cli.events import (
    EVENT_TYPES,
    AskingStopped,
    BaseEvent,
    CallFailed,
    CallFinished,
    CallStarted,
    CallTextGrew,
    MemberSkipped,
    RankingParsed,
    RoundTallied,
    RunFailed,
    RunFinished,
    RunInterrupted,
    RunStarted,
    StageStarted,
    VoteCast,
    WarningRaised,
)
from panel_cli.protocols import registry
from panel_cli.view import fmt, tools
from panel_cli.view.confer import voted_labels
from panel_cli.view.summary import ViewTotals, bias_note, stop_note, summary_fields

QUESTION_LIMIT = 200


class PlainView:
    """Writes lines like `[round 1] vote  alice -> B (80)` to `stream` (stderr in real use)."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.totals = ViewTotals()
        # The labels each confer round's votes went to, so its tally lists those alone.
        self._voted: dict[int | None, set[str]] = {}

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
        for an event type this view leaves out (`IGNORED`) or does not know. An event a
        protocol registered after this module was loaded declares gets its spec's line."""
        line_of = LINES.get(type(event))
        if line_of is not None:
            return line_of(self, event)
        own = registry.plain_lines().get(getattr(event, "type", ""))
        return None if own is None else own(event)

    def _run_started(self, event: RunStarted) -> str:
        names = ", ".join(member.name for member in event.members)
        setup = "".join(f"  {name} {value}" for name, value in event.headline.items())
        started = f"run started  {event.protocol}  {event.panel}  members: {names}{setup}  run {event.run_id}"
        return f"{started}\nquestion: {fmt.one_line(event.question, QUESTION_LIMIT)}"

    def _stage_started(self, event: StageStarted) -> str:
        started = f"{_where(event.stage, event.round)}{event.stage} started"
        return f"{started}  {', '.join(event.members)}" if event.members else started

    def _call_started(self, event: CallStarted) -> str:
        who = fmt.who(event.member, event.about)
        return f"{_where(event.stage, event.round)}call started  {who}  {event.model}"

    def _call_finished(self, event: CallFinished) -> str:
        who = fmt.who(event.member, event.about)
        line = f"{_where(event.stage, event.round)}call finished  {who}  {fmt.seconds(event.latency)}"
        if event.tokens_in is not None or event.tokens_out is not None:
            line += f"  {(event.tokens_in or 0) + (event.tokens_out or 0):,} tok"
        line += "  reused" if event.reused else ""
        line += "  late (not used)" if event.late else ""
        return line + ("  truncated" if event.truncated else "")

    def _call_failed(self, event: CallFailed) -> str:
        """Why a call failed; a call cancelled (a race won by another member, Ctrl-C) did not
        fail, and has nothing more to say than that (it read `cancelled: cancelled`)."""
        who = fmt.who(event.member, event.about)
        if event.kind == "cancelled":
            return f"{_where(event.stage, event.round)}call cancelled  {who}"
        message = fmt.one_line(event.message, 200)
        return f"{_where(event.stage, event.round)}call failed  {who}  {event.kind}: {message}"

    def _member_skipped(self, event: MemberSkipped) -> str:
        reason = fmt.one_line(event.reason, 200)
        return f"{_where(event.stage, event.round)}skipped  {fmt.who(event.member, event.about)}  {reason}"

    def _asking_stopped(self, event: AskingStopped) -> str:
        return f"{_where(event.stage, event.round)}{stop_note(event)}"

    def _vote_cast(self, event: VoteCast) -> str:
        self._voted.setdefault(event.round, set()).add(event.choice)
        detail = "" if event.confidence is None else fmt.number(event.confidence)
        if event.fallback:
            detail = f"{detail}, fallback: kept own answer" if detail else "fallback: kept own answer"
        vote = f"{event.voter} -> {event.choice}" + (f" ({detail})" if detail else "")
        return f"[round {event.round}] vote  {vote}" if event.round is not None else f"vote  {vote}"

    def _round_tallied(self, event: RoundTallied) -> str:
        """A confer round's tally, or the scores of a choice made once (no round)."""
        if event.round is None:
            return f"scores: {_scores(event)} -> {event.winner or event.winner_label or 'no winner'}"
        outcome = f"{event.winner_label} ({event.winner})" if event.winner_label else "no winner"
        shown, unvoted = voted_labels(event.scores, self._voted.get(event.round, set()), event.winner_label)
        scores = " ".join(f"{label}={fmt.number(score)}" for label, score in shown)
        rest = f" + {unvoted} with no votes" if unvoted else ""
        return f"round {event.round} tallied: {scores}{rest} -> {outcome}"

    def _ranking_parsed(self, event: RankingParsed) -> str:
        """A reviewer's ranking, or the aggregate of them all."""
        if event.reviewer is not None:
            return f"ranking  {event.reviewer}: {', '.join(event.ranking) or '(none)'}"
        if not event.aggregate:
            return fmt.NO_AGGREGATE
        places = ", ".join(
            f"{place}. {entry.get('name')} ({_labelled(entry.get('label'))}{_average(entry.get('average_rank'))})"
            for place, entry in enumerate(event.aggregate, start=1)
        )
        labelled = sorted(
            ((str(entry["label"]), str(entry.get("name"))) for entry in event.aggregate if entry.get("label")),
            key=lambda pair: (len(pair[0]), pair[0]),  # Model B before Model AA
        )
        labels = ", ".join(f"{label} = {name}" for label, name in labelled)
        return (f"labels: {labels}\n" if labels else "") + f"aggregate ranking: {places}"

    def _warning(self, event: WarningRaised) -> str:
        return f"warning: {event.member}: {event.message}" if event.member else f"warning: {event.message}"

    def _run_finished(self, event: RunFinished) -> str:
        fields = summary_fields(event, self.totals)
        status = "run finished" if event.reached_answer else "run finished without an answer"
        note = bias_note(event.result)
        return "  ".join([status, *(f"{name} {value}" for name, value in fields)]) + (f"\n{note}" if note else "")

    def _run_failed(self, event: RunFailed) -> str:
        return f"run failed: {event.message}"

    def _run_interrupted(self, event: RunInterrupted) -> str:
        return f"interrupted — the run is kept as interrupted (run id {event.run_id})"

    def _protocol_line(self, event: BaseEvent) -> str:
        """A protocol's own event, in the line its view module writes for it."""
        return PROTOCOL_LINES[type(event)](event)


# Each protocol's own events, in the lines its spec's `plain_lines` writes, and the tool events'
# (by `type` there, so that a module drawing a stored payload need not import the event models).
PROTOCOL_LINES = {
    EVENT_TYPES[name]: line
    for name, line in {**registry.plain_lines(), **tools.PLAIN_LINES}.items()
    if name in EVENT_TYPES
}

# The line (or lines) the plain view writes for each event type. Every type is either here or
# in IGNORED, never in both: tests/test_event_consumers.py checks it.
LINES: dict[type[BaseEvent], Callable[[PlainView, Any], str | None]] = {
    RunStarted: PlainView._run_started,
    StageStarted: PlainView._stage_started,
    CallStarted: PlainView._call_started,
    CallFinished: PlainView._call_finished,
    CallFailed: PlainView._call_failed,
    MemberSkipped: PlainView._member_skipped,
    AskingStopped: PlainView._asking_stopped,
    VoteCast: PlainView._vote_cast,
    RoundTallied: PlainView._round_tallied,
    RankingParsed: PlainView._ranking_parsed,
    WarningRaised: PlainView._warning,
    RunFinished: PlainView._run_finished,
    RunFailed: PlainView._run_failed,
    RunInterrupted: PlainView._run_interrupted,
    **dict.fromkeys(PROTOCOL_LINES, PlainView._protocol_line),
}

# What the plain view leaves out on purpose: a reply's text as it is written (this view does not
# follow text, so the bus never hands it one; the call's line comes when it finishes).
IGNORED: frozenset[type[BaseEvent]] = frozenset({CallTextGrew})


def _where(stage: str, round_: int | None) -> str:
    """`[round 1] ` when the event has a round, `[reviews] ` when only a stage."""
    return f"[{stage}] " if round_ is None else f"[round {round_}] "


def _scores(tally: RoundTallied) -> str:
    """`A=170 B=50`, best first: the scores of a choice made once."""
    order = fmt.tally_order(tally.scores, best_first=True)
    return " ".join(f"{label}={fmt.number(score)}" for label, score in order)


def _labelled(label: Any) -> str:
    return f"{label}, " if label else ""


def _average(value: Any) -> str:
    return fmt.UNKNOWN if value is None else f"avg {float(value):.2f}"
