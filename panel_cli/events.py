"""The events every engine emits.

Engines know nothing of the terminal or the database: they describe what happens as a
stream of these events. The live view and the transcript store are two subscribers of
the same stream, and a replay feeds stored events back into the same view, so an event
must carry everything a view needs to draw it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from panel_cli.redact import redact_obj


class BaseEvent(BaseModel):
    """Fields stamped by the bus: engines leave them at their defaults."""

    model_config = ConfigDict(frozen=True)

    run_id: str = ""
    seq: int = 0
    ts: float = 0.0


class MemberInfo(BaseModel):
    name: str
    model: str
    label: str | None = None


class RunStarted(BaseEvent):
    type: Literal["run_started"] = "run_started"
    protocol: str
    panel: str
    question: str
    members: list[MemberInfo]
    config: dict[str, Any] = Field(default_factory=dict)


class StageStarted(BaseEvent):
    """A stage of a protocol: confer's `answer` round 0 and `vote` rounds 1..n, council's stages."""

    type: Literal["stage_started"] = "stage_started"
    stage: str
    round: int | None = None
    members: list[str] = Field(default_factory=list)
    block: dict[str, str] = Field(default_factory=dict)


class CallStarted(BaseEvent):
    """`about` names what a call is about when a member makes several in one stage (a
    judge scoring each member's response), so a view can give each call its own row."""

    type: Literal["call_started"] = "call_started"
    call_id: str
    member: str
    model: str
    stage: str
    round: int | None = None
    about: str | None = None


class CallFinished(BaseEvent):
    """`truncated`: the reply was longer than `max_response_chars` and `text` is its beginning."""

    type: Literal["call_finished"] = "call_finished"
    call_id: str
    member: str
    model: str
    stage: str
    round: int | None = None
    about: str | None = None
    messages: list[dict[str, Any]] = Field(default_factory=list)
    text: str
    truncated: bool = False
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None
    latency: float
    attempts: int = 1


ErrorKind = Literal[
    "timeout", "rate_limited", "auth", "not_found", "bad_request", "server", "connection", "malformed", "cancelled"
]


class CallFailed(BaseEvent):
    """`message` is one clean sentence for people; `detail` is the provider's raw text, kept
    in the store for whoever debugs the failure and never drawn."""

    type: Literal["call_failed"] = "call_failed"
    call_id: str
    member: str
    model: str
    stage: str
    round: int | None = None
    about: str | None = None
    messages: list[dict[str, Any]] = Field(default_factory=list)
    kind: ErrorKind
    message: str
    detail: str | None = None
    latency: float
    attempts: int = 1


class MemberSkipped(BaseEvent):
    """A member that failed for good earlier in the run (bad key, unknown model, refused
    connection) is not called again; each call it would have made is reported as this."""

    type: Literal["member_skipped"] = "member_skipped"
    member: str
    model: str
    stage: str
    round: int | None = None
    about: str | None = None
    reason: str


class VoteCast(BaseEvent):
    type: Literal["vote_cast"] = "vote_cast"
    round: int | None = None
    voter: str
    choice: str
    confidence: float | None = None
    rationale: str = ""
    fallback: bool = False


class RoundTallied(BaseEvent):
    type: Literal["round_tallied"] = "round_tallied"
    round: int | None = None
    scores: dict[str, float]
    winner_label: str | None = None
    winner: str | None = None
    authors: dict[str, str] = Field(default_factory=dict)


class RankingParsed(BaseEvent):
    """A council reviewer's parsed ranking, or the aggregate when `reviewer` is None."""

    type: Literal["ranking_parsed"] = "ranking_parsed"
    reviewer: str | None = None
    ranking: list[str] = Field(default_factory=list)
    aggregate: list[dict[str, Any]] = Field(default_factory=list)


class WarningRaised(BaseEvent):
    type: Literal["warning"] = "warning"
    message: str
    member: str | None = None


class RunFinished(BaseEvent):
    type: Literal["run_finished"] = "run_finished"
    final_answer: str | None
    reached_answer: bool = True
    result: dict[str, Any] = Field(default_factory=dict)


class RunFailed(BaseEvent):
    type: Literal["run_failed"] = "run_failed"
    message: str


class RunInterrupted(BaseEvent):
    type: Literal["run_interrupted"] = "run_interrupted"


Event = Annotated[
    RunStarted
    | StageStarted
    | CallStarted
    | CallFinished
    | CallFailed
    | MemberSkipped
    | VoteCast
    | RoundTallied
    | RankingParsed
    | WarningRaised
    | RunFinished
    | RunFailed
    | RunInterrupted,
    Field(discriminator="type"),
]

event_adapter: TypeAdapter[Event] = TypeAdapter(Event)

Subscriber = Callable[[BaseEvent], Awaitable[None]]


def parse_event(payload: dict[str, Any]) -> BaseEvent:
    """Rebuild a stored event, so a replay feeds the view the same objects a live run did."""
    return event_adapter.validate_python(payload)


def _scrubbed(event: BaseEvent, secrets: Sequence[str]) -> BaseEvent:
    data = event.model_dump()
    clean = redact_obj(data, secrets)
    return event if clean == data else type(event).model_validate(clean)


class EventBus:
    """Stamps each event with the run id, a sequence number and a time, scrubs the run's
    `secrets` out of it, then hands it to every subscriber in order. Scrubbing here, once,
    means no store, view or log can forget to. Subscribers are awaited, so the store has
    written an event before the engine moves on."""

    def __init__(self, run_id: str, subscribers: list[Subscriber] | None = None, secrets: Sequence[str] = ()) -> None:
        self.run_id = run_id
        self.subscribers: list[Subscriber] = list(subscribers or [])
        self.secrets = tuple(secrets)
        self._seq = 0

    def subscribe(self, subscriber: Subscriber) -> None:
        self.subscribers.append(subscriber)

    async def emit(self, event: BaseEvent) -> BaseEvent:
        self._seq += 1
        stamped = event.model_copy(update={"run_id": self.run_id, "seq": self._seq, "ts": time.time()})
        if self.secrets:
            stamped = _scrubbed(stamped, self.secrets)
        for subscriber in self.subscribers:
            await subscriber(stamped)
        return stamped
