"""What reading the store gives back: a run, a call, a decision, a recount, as pydantic models.

They are declared apart from the event models (`panel_cli.events`), so reading history does
not build those, which costs `panel history` a noticeable part of its start; and built when
first used (`defer_build`), since `history list` needs only `RunSummary`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from panel_cli.store.processes import process_alive, this_host
from panel_cli.store.times import optional_epoch

RunStatus = Literal["running", "finished", "no_answer", "failed", "interrupted"]
ListedStatus = RunStatus | Literal["stale"]  # "stale": running, but its process is gone

# The most runs a thread of follow-ups is read to, each way from a run: a loop of `--continue
# last` can make a long chain, and `history show` lists the thread a line a run.
THREAD_LIMIT = 100
OUTCOME_LENGTH = 80


class RunSummary(BaseModel):
    """A line of `panel history list`. `tokens` and `cost` are None when no call reported them;
    `outcome` is the winner (confer, vote, decide) or the final answer's first line."""

    model_config = ConfigDict(defer_build=True)

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
    outcome: str | None = None
    parent_id: str | None = None

    @property
    def reached_answer(self) -> bool:
        return self.status == "finished"

    @property
    def duration_s(self) -> float | None:
        return None if self.finished_at is None else self.finished_at - self.started_at


class RunMember(BaseModel):
    """`events.MemberInfo` as stored."""

    model_config = ConfigDict(defer_build=True)

    name: str
    model: str
    label: str | None = None


class ThreadRun(BaseModel):
    """A run of a thread of follow-ups, as `history show` lists it beside the run it shows:
    `depth` is how many follow-up steps away it is (1: the run's parent, or a direct follow-up);
    `answer_preview` is its final answer on one short line (None: it has none)."""

    model_config = ConfigDict(defer_build=True)

    run_id: str
    parent_id: str | None = None
    depth: int
    protocol: str
    question: str
    status: ListedStatus
    started_at: float
    answer_preview: str | None = None


class RunThread(BaseModel):
    """Where a run sits among follow-ups: the runs it continues, oldest first, up to the first
    one no longer stored; and every follow-up of it and of those, depth first, each run's
    follow-ups in the order they started. At most THREAD_LIMIT each way."""

    model_config = ConfigDict(defer_build=True)

    ancestors: list[ThreadRun] = []
    follow_ups: list[ThreadRun] = []


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
    thread: RunThread = Field(default_factory=RunThread)

    @property
    def warnings(self) -> list[Any]:
        """The warnings the protocol put in its result; a run that never finished has none."""
        found = (self.result or {}).get("warnings")
        return found if isinstance(found, list) else []


class BatchRun(RunSummary):
    """A run of a `panel batch`, as resuming the batch reads it: its tags say which question
    it answered."""

    tags: dict[str, Any]
    final_answer: str | None = None
    failure_reason: str | None = None


class CallRecord(BaseModel):
    """One model call; a failed call has `error_kind`, `error` and the provider's raw
    `detail` instead of a response. A `truncated` response is the beginning of the reply.
    `request_hash` identifies the request, so a resumed run can reuse the reply."""

    model_config = ConfigDict(defer_build=True)

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
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None
    latency: float | None = None
    error_kind: str | None = None
    error: str | None = None
    detail: str | None = None
    attempts: int = 1
    ts: float


class DecisionRecord(BaseModel):
    """A decide run's outcome as `panel history decisions` lists it; its id is the run's."""

    model_config = ConfigDict(defer_build=True)

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


class RetallyRecord(BaseModel):
    """One recount of a stored vote by `panel history retally`; `result` is what it printed."""

    model_config = ConfigDict(defer_build=True)

    id: str
    run_id: str
    method: str
    threshold: float | None = None
    quorum: int
    winner: str | None = None
    leader_override: bool = False
    result: dict[str, Any]
    created_at: float


def listed_status(row: Mapping[str, Any]) -> ListedStatus:
    """A run's status as listed: `stale` for a `running` run whose process is gone from
    this host. A run written from another host stays `running`: nothing here can tell."""
    status = row["status"]
    mine = status == "running" and row["pid"] is not None and row["host"] == this_host()
    if mine and not process_alive(row["pid"], optional_epoch(row["started_at"])):
        return "stale"
    return status


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
