"""What reading the store gives back: a run, a call, a decision, a recount.

Plain dataclasses, filled from the store's own columns by the reader, which checks each
value's type as it reads it (`panel_cli.store.reader`): a row a hand or a damaged file left
with the wrong type is read as far as it can be and marked `damaged`, never raised from.
They are not pydantic models: `panel history list` and `show` would spend a third of their
time building models and their validators (see bench/history.py). Where a file from
elsewhere comes in (`panel history import`), its rows are checked before they are copied.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from panel_cli.run_keys import RESUMED_FROM_KEY
from panel_cli.store.processes import process_alive, this_host
from panel_cli.store.row_like import RowLike
from panel_cli.store.times import optional_epoch

# "resumed": it stopped before its end, and another run took it over (`resumed_by`).
RunStatus = Literal["running", "finished", "no_answer", "failed", "interrupted", "resumed"]
RUN_STATUSES: tuple[RunStatus, ...] = ("running", "finished", "no_answer", "failed", "interrupted", "resumed")
# "stale": running, but its process is gone; "damaged": its row cannot be read as a run.
ListedStatus = RunStatus | Literal["stale", "damaged"]

# The most runs a thread of follow-ups is read to, each way from a run: a loop of `--continue
# last` can make a long chain, and `history show` lists the thread a line a run.
THREAD_LIMIT = 100
OUTCOME_LENGTH = 80


@dataclass(kw_only=True)
class RunSummary:
    """A line of `panel history list`. `tokens` and `cost` are None when no call reported them;
    `cost_basis` and `unpriced` say how to read the cost (`panel_cli.totals.ledger_cost`);
    `calls_by_status` how its calls ended, a count for each of `CALL_STATUSES`;
    `outcome` is the winner (confer, vote, decide) or the final answer's first line. `damage`
    says what of the run could not be read (None: nothing); a run whose row itself cannot be
    read is listed `damaged`, at `started_at` 0 when its start is what is unreadable.
    `resumed_by`: the run that took this one over (`panel resume`), None for none."""

    id: str
    protocol: str
    panel: str
    question: str
    status: ListedStatus
    started_at: float
    finished_at: float | None = None
    calls: int = 0
    tokens: int | None = None
    cost: float | None = None
    cost_basis: str = "unknown"
    unpriced: list[str] = field(default_factory=list)
    calls_by_status: dict[str, int] = field(default_factory=dict)
    outcome: str | None = None
    parent_id: str | None = None
    resumed_by: str | None = None
    damage: str | None = None

    @property
    def reached_answer(self) -> bool:
        return self.status == "finished"

    @property
    def duration_s(self) -> float | None:
        return None if self.finished_at is None else self.finished_at - self.started_at


@dataclass(kw_only=True)
class RunMember:
    """`events.MemberInfo` as stored."""

    name: str
    model: str
    label: str | None = None


@dataclass(kw_only=True)
class ThreadRun:
    """A run of a thread of follow-ups, as `history show` lists it beside the run it shows:
    `depth` is how many follow-up steps away it is (1: the run's parent, or a direct follow-up);
    `answer_preview` is its final answer on one short line (None: it has none)."""

    run_id: str
    parent_id: str | None = None
    depth: int
    protocol: str
    question: str
    status: ListedStatus
    started_at: float
    answer_preview: str | None = None


@dataclass(kw_only=True)
class RunThread:
    """Where a run sits among follow-ups: the runs it continues, oldest first, up to the first
    one no longer stored; and every follow-up of it and of those, depth first, each run's
    follow-ups in the order they started. At most THREAD_LIMIT each way."""

    ancestors: list[ThreadRun] = field(default_factory=list)
    follow_ups: list[ThreadRun] = field(default_factory=list)


@dataclass(kw_only=True)
class RunRecord(RunSummary):
    """A whole run. `pid` and `host` are the process that wrote it (None for a run from a
    file older than them). `thread`: the runs it follows up and its follow-ups."""

    members: list[RunMember]
    config: dict[str, Any]
    final_answer: str | None = None
    result: dict[str, Any] | None = None
    error: str | None = None
    pid: int | None = None
    host: str | None = None
    imported_from: str | None = None
    """The file `panel history import` brought the run from; None for a run made here."""
    thread: RunThread = field(default_factory=RunThread)

    @property
    def resumed_from(self) -> str | None:
        """The run this one resumes (`panel resume`), None for none."""
        source = self.config.get(RESUMED_FROM_KEY)
        return source if isinstance(source, str) else None

    @property
    def warnings(self) -> list[Any]:
        """The warnings the protocol put in its result; a run that never finished has none."""
        found = (self.result or {}).get("warnings")
        return found if isinstance(found, list) else []


@dataclass(kw_only=True)
class BatchRun(RunSummary):
    """A run of a `panel batch`, as resuming the batch reads it: its tags say which question
    it answered."""

    tags: dict[str, Any]
    final_answer: str | None = None
    failure_reason: str | None = None


@dataclass(kw_only=True)
class CallRecord:
    """One model call; a failed call has `error_kind`, `error` and the provider's raw
    `detail` instead of a response. A `truncated` response is the beginning of the reply.
    `request_hash` identifies the request, so a resumed run can reuse the reply; `reused`: this
    call is such a reply, with the tokens and cost the run it resumes paid. `late`: its reply
    came after its stage had stopped waiting for it (a race already won); kept, paid, unused."""

    id: str
    run_id: str
    member: str
    model: str
    stage: str
    round: int | None = None
    about: str | None = None
    messages: list[dict[str, Any]]
    response: str | None = None
    truncated: bool = False
    request_hash: str | None = None
    reused: bool = False
    late: bool = False
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None
    latency: float | None = None
    error_kind: str | None = None
    error: str | None = None
    detail: str | None = None
    attempts: int = 1
    ts: float

    @property
    def status(self) -> str:
        """How the call ended: answered, reused, late, failed, cancelled or refused (by the budget)."""
        return call_status(self.error_kind, self.reused, self.late)


# How a call can end, in the order every surface lists them (docs/result.md#the-envelope).
CALL_STATUSES = ("answered", "reused", "late", "failed", "cancelled", "refused")


def call_status(error_kind: str | None, reused: bool, late: bool = False) -> str:
    """A call's final status from its row, as `panel_cli.totals.RunTotals` counts its events."""
    if error_kind == "budget":
        return "refused"
    if error_kind == "cancelled":
        return "cancelled"
    if error_kind is not None:
        return "failed"
    if late:
        return "late"
    return "reused" if reused else "answered"


@dataclass(kw_only=True)
class DecisionRecord:
    """A decide run's outcome as `panel history decisions` lists it; its id is the run's."""

    run_id: str
    topic: str
    winner: str | None = None
    vote_counts: dict[str, int]
    method: str
    total_votes: int
    ballots_cast: int
    leader: str | None = None
    leader_override: bool
    consensus_reached: bool
    decided_at: float


@dataclass(kw_only=True)
class RetallyRecord:
    """One recount of a stored vote by `panel history retally`; `result` is what it printed."""

    id: str
    run_id: str
    method: str
    threshold: float | None = None
    quorum: int
    winner: str | None = None
    leader_override: bool = False
    result: dict[str, Any]
    created_at: float


def listed_status(row: RowLike) -> ListedStatus:
    """A run's status as listed: `stale` for a `running` run whose process is gone from
    this host, `damaged` for a status no run has. A run written from another host stays
    `running`: nothing here can tell."""
    status = row["status"]
    if status not in RUN_STATUSES:
        return "damaged"
    pid = row["pid"]
    mine = status == "running" and isinstance(pid, int) and row["host"] == this_host()
    if mine and not process_alive(pid, read_time(row["started_at"])):
        return "stale"
    return status


# A stored time as the store writes it (`panel_cli.store.times.iso_time`), from year 1000 to 9998,
# so that any local time of it is a date Python can name.
_STORED_TIME = re.compile(
    r"[1-9]\d{3}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,30})?Z"
)


def read_time(value: Any) -> float | None:
    """A stored time in epoch seconds; None for a value that is not one (a damaged row)."""
    if not isinstance(value, str) or not _STORED_TIME.fullmatch(value) or value >= "9999":
        return None
    return optional_epoch(value)


def outcome_of(final_answer: str | None, result: Any) -> str | None:
    """What `history list` shows of a run's outcome: the winner when the protocol names one
    (confer's member, vote's option), else the final answer's first line."""
    winner = result.get("winner") if isinstance(result, dict) else None
    if isinstance(winner, str) and winner.strip():
        return preview(winner)
    if final_answer:
        line = next((line for line in final_answer.splitlines() if line.strip()), "")
        return preview(line) or None
    return None


def preview(text: str) -> str:
    """`text` on one line of at most OUTCOME_LENGTH characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= OUTCOME_LENGTH else flat[: OUTCOME_LENGTH - 1].rstrip() + "…"
