"""The events every engine emits.

Engines know nothing of the terminal or the database: they describe what happens as a
stream of these events. The live view and the transcript store are two subscribers of
the same stream, and a replay feeds stored events back into the same view, so an event
must carry everything a view needs to draw it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self, TypedDict, get_args

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, TypeAdapter

from panel_cli.protocols.registry import event_class
from panel_cli.redact import redact, redact_obj


@dataclass(frozen=True)
class Dumped:
    """An event as JSON (`model_dump(mode="json")`), with the secrets scrubbed out of it."""

    payload: dict[str, Any]
    scrubbed: frozenset[str]


class BaseEvent(BaseModel):
    """Fields stamped by the bus: engines leave them at their defaults."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    run_id: str = ""
    seq: int = 0
    ts: float = 0.0
    if TYPE_CHECKING:
        # Every event type declares its own: its name, a Literal, as the default.
        type: str
    # Made by the bus, once for every subscriber (`json_payload`); a copy makes its own.
    _dumped: Dumped | None = PrivateAttr(default=None)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        copied = super().model_copy(update=update, deep=deep)
        copied._dumped = None
        return copied


class MemberInfo(BaseModel):
    model_config = ConfigDict(defer_build=True)

    name: str
    model: str
    label: str | None = None


class RunStarted(BaseEvent):
    """A run's first event. `config` is the panel as its file and the command line set it,
    plus what the run core adds (`panel_cli.run_keys`)."""

    type: Literal["run_started"] = "run_started"
    protocol: str
    panel: str
    question: str
    members: list[MemberInfo]
    config: dict[str, Any] = Field(default_factory=dict)
    # What the start line names beside the members: roles and rules (`ProtocolRules.headline`).
    headline: dict[str, str] = Field(default_factory=dict)


class StageStarted(BaseEvent):
    """A stage of a protocol: confer's `answer` round 0 and `vote` rounds 1..n, council's stages."""

    type: Literal["stage_started"] = "stage_started"
    stage: str
    round: int | None = None
    members: list[str] = Field(default_factory=list)
    block: dict[str, str] = Field(default_factory=dict)


class CallEvent(BaseEvent):
    """What every event of one model call carries: the call (`call_id`), whose it is (`member`,
    `model`) and where in the run it belongs (`stage`, `round`). `about` names what a call is
    about when a member makes several in one stage (a judge scoring each member's response),
    so a view can give each call its own row. `type` is declared here so that it stays first
    in each call event's stored payload."""

    type: str
    call_id: str
    member: str
    model: str
    stage: str
    round: int | None = None
    about: str | None = None


class CallRoute(TypedDict):
    """A call's `CallEvent` fields, built once per call by the gateway and unpacked into each of
    its events (`CallFinished(**route, text=...)`), so mypy checks every one of them."""

    call_id: str
    member: str
    model: str
    stage: str
    round: int | None
    about: str | None


class CallStarted(CallEvent):
    type: Literal["call_started"] = "call_started"


class CallFinished(CallEvent):
    """`truncated`: the reply was longer than `max_response_chars` and `text` is its beginning.
    `request_hash` identifies the request (model, messages, parameters), so a resumed run can
    take an answered call from the store instead of paying for it again. `reused`: this run
    made no request; the reply is the one the run it resumes got, with the tokens and cost
    that run paid for it (a resumed run's `spent_anew` leaves them out). `late`: the stage had
    stopped waiting for the call when its reply came in (a race another member had already
    won); its tokens and cost count, since they were paid for, and its text is kept, but the
    protocol does not use it."""

    type: Literal["call_finished"] = "call_finished"
    messages: list[dict[str, Any]] = Field(default_factory=list)
    text: str
    truncated: bool = False
    request_hash: str | None = None
    reused: bool = False
    late: bool = False
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None
    latency: float
    attempts: int = 1


class CallTextGrew(CallEvent):
    """A streamed reply's text so far (the whole of it, not the last piece: a secret split
    over two pieces is then still scrubbed whole). Only a live view draws it: the bus hands it
    to the subscribers that `follow_text`, it takes no `seq` of its own (it carries the seq
    of the event before it), and no store keeps it, since `CallFinished` has the whole text."""

    type: Literal["call_text_grew"] = "call_text_grew"
    text: str


# `budget`: the run's spending cap did not allow the call, and no request was made.
ErrorKind = Literal[
    "timeout",
    "rate_limited",
    "auth",
    "not_found",
    "bad_request",
    "server",
    "connection",
    "malformed",
    "cancelled",
    "budget",
]


class CallFailed(CallEvent):
    """`message` is one clean sentence for people; `detail` is the provider's raw text, kept
    in the store for whoever debugs the failure and never drawn. `tokens_in`, `tokens_out`
    and `cost`: what the call's replies reported before it failed or was cancelled (a tool
    loop, a reply asked for once more); None when no reply came."""

    type: Literal["call_failed"] = "call_failed"
    messages: list[dict[str, Any]] = Field(default_factory=list)
    kind: ErrorKind
    message: str
    detail: str | None = None
    latency: float
    attempts: int = 1
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None


class MemberSkipped(BaseEvent):
    """A member that failed for good earlier in the run (bad key, unknown model, refused
    connection) is not called again; each call it would have made is reported as this. No
    call was made, so it has no `call_id` and is no `CallEvent`."""

    type: Literal["member_skipped"] = "member_skipped"
    member: str
    model: str
    stage: str
    round: int | None = None
    about: str | None = None
    reason: str


class AskingStopped(BaseEvent):
    """A stage that asks its members a few at a time (`stop:`, docs/protocols.md#stopping-early)
    stopped before asking `not_asked`: they were never called, so they have no call and no row
    in `calls`. `rule` is the stopping rule (`decided`, `confident(0.95)`), `reason` why it
    stopped, `waves` how many rounds of asking it took."""

    type: Literal["asking_stopped"] = "asking_stopped"
    stage: str
    round: int | None = None
    rule: str
    asked: list[str] = Field(default_factory=list)
    not_asked: list[str] = Field(default_factory=list)
    waves: int = 0
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


class PlannedTask(BaseModel):
    """One subtask of an accepted orchestrate plan, as validated (panel_cli.protocols.orchestrate.plan)."""

    model_config = ConfigDict(defer_build=True)

    task_id: str
    worker: str
    title: str = ""
    description: str = ""
    depends_on: list[str] = Field(default_factory=list)
    priority: int = 0


class PlanProposed(BaseEvent):
    """orchestrate: the planner replied to plan attempt `attempt`; it is checked next."""

    type: Literal["plan_proposed"] = "plan_proposed"
    attempt: int
    planner: str


class PlanRejected(BaseEvent):
    """orchestrate: plan attempt `attempt` was invalid; `error` is what the planner is told.
    `final`: no attempt is left, and the run fails with this error."""

    type: Literal["plan_rejected"] = "plan_rejected"
    attempt: int
    planner: str
    error: str
    final: bool = False


class PlanAccepted(BaseEvent):
    """orchestrate: the plan every subtask then runs by, so a view can draw the task graph."""

    type: Literal["plan_accepted"] = "plan_accepted"
    attempt: int
    planner: str
    tasks: list[PlannedTask]


class TaskStarted(BaseEvent):
    type: Literal["task_started"] = "task_started"
    task_id: str
    worker: str


class TaskFinished(BaseEvent):
    """`preview`: the output's beginning; the whole output is in the call's own event."""

    type: Literal["task_finished"] = "task_finished"
    task_id: str
    worker: str
    duration: float
    preview: str = ""


class TaskFailed(BaseEvent):
    type: Literal["task_failed"] = "task_failed"
    task_id: str
    worker: str
    duration: float
    kind: str
    error: str


class TaskSkipped(BaseEvent):
    """A subtask never called because `blocked_by`, one of its dependencies, did not succeed."""

    type: Literal["task_skipped"] = "task_skipped"
    task_id: str
    worker: str
    blocked_by: str
    reason: str


class ContributionMade(BaseEvent):
    """delphi: one expert's contribution to round `round`. `changed` is None in round 1;
    `structured` is False when the reply was not the object asked for (its text counts,
    changed)."""

    type: Literal["delphi_contribution"] = "delphi_contribution"
    round: int
    expert: str
    label: str
    analysis: str
    changed: bool | None = None
    structured: bool = True


class DelphiRoundEnded(BaseEvent):
    """delphi: how many experts contributed to round `round`, whether every one reported no
    change, and whether the rounds stop here before `max_rounds`."""

    type: Literal["delphi_round_ended"] = "delphi_round_ended"
    round: int
    experts: int
    contributed: int
    unchanged: bool
    early_stop: bool = False


class VerdictGiven(BaseEvent):
    """supervise: the critic's reading of round `round`. `workers` are every worker (a
    view's rows); `verdict` is None when no usable verdict came (`problem` says why);
    `feedback` holds real workers only; `rejected` are the workers it sends back."""

    type: Literal["supervise_verdict"] = "supervise_verdict"
    round: int
    critic: str
    workers: list[str]
    verdict: Literal["APPROVED", "REJECTED"] | None = None
    feedback: dict[str, str] = Field(default_factory=dict)
    rejected: list[str] = Field(default_factory=list)
    problem: str | None = None


class VoteOpened(BaseEvent):
    """vote and decide: what is voted on and by which rules, before any ballot arrives, so a
    view (and `panel history retally`) knows the options, the method and the quorum."""

    type: Literal["vote_opened"] = "vote_opened"
    options: list[str]
    method: str
    threshold: float
    quorum: int
    voters: list[str]
    weights: dict[str, float] = Field(default_factory=dict)
    tie_break: str = "none"
    timeout: float | None = None
    max_voters: int = 10
    leader: str | None = None


class VoteReceived(BaseEvent):
    """One ballot as counted (seed 001's `onVoteReceived`). `choice` None is an abstention;
    `matched_by` says how it was read (structured, text, first, none); a `late` ballot came
    after collection closed and is not counted."""

    type: Literal["vote_received"] = "vote_received"
    voter: str
    choice: str | None = None
    ranking: list[str] = Field(default_factory=list)
    confidence: float | None = None
    reason: str = ""
    matched_by: str = "none"
    weight: float = 1.0
    late: bool = False


class QuorumReached(BaseEvent):
    """Collection is over and the quorum was met (seed 001's `onQuorumReached`: not a live signal)."""

    type: Literal["quorum_reached"] = "quorum_reached"
    current: int
    required: int


class VoteTallied(BaseEvent):
    """A vote's count: `panel_cli.protocols.vote.tally.Tally` as JSON (counts, runoff rounds, and
    the winner or the exact reason there is none)."""

    type: Literal["vote_tallied"] = "vote_tallied"
    tally: dict[str, Any]


class LeaderChose(BaseEvent):
    """decide: the leader, asked because no option won, and its choice (None when it named
    no option, or its call failed: then `error` says why)."""

    type: Literal["leader_chose"] = "leader_chose"
    leader: str
    choice: str | None = None
    matched_by: str = "none"
    confidence: float | None = None
    reason: str = ""
    error: str | None = None


class DecisionRecorded(BaseEvent):
    """decide: the decision as the store's `decisions` table keeps it; its id is the run's."""

    type: Literal["decision_recorded"] = "decision_recorded"
    topic: str
    winner: str | None
    vote_counts: dict[str, int]
    method: str
    total_votes: int
    ballots_cast: int
    leader: str | None = None
    leader_override: bool = False
    consensus_reached: bool = False


class ToolServerStarted(BaseEvent):
    """A tool server the run started (`stdio`: `target` is its command line) or reached
    (`http`: its URL), the tools it lists and the members that may use them."""

    type: Literal["tool_server_started"] = "tool_server_started"
    server: str
    transport: Literal["stdio", "http"]
    target: str
    tools: list[str] = Field(default_factory=list)
    members: list[str] = Field(default_factory=list)


class ToolCallEvent(BaseEvent):
    """A tool call a member's model asked for during call `call_id` (its CallStarted's). `tool`
    is the function the model named; `server` is None when no tool of that name was offered.
    `arguments` are as the model wrote them (text when they were not a JSON object). `type`
    is declared here so that it stays first in both events' stored payloads."""

    type: str
    call_id: str
    tool_call_id: str
    member: str
    stage: str
    round: int | None = None
    about: str | None = None
    server: str | None = None
    tool: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)


class ToolCallRoute(TypedDict):
    """A tool call's `ToolCallEvent` fields, built once by the gateway and unpacked into its two
    events, as `CallRoute` is into a model call's."""

    call_id: str
    tool_call_id: str
    member: str
    stage: str
    round: int | None
    about: str | None
    server: str | None
    tool: str
    arguments: dict[str, Any] | str


class ToolCallStarted(ToolCallEvent):
    type: Literal["tool_call_started"] = "tool_call_started"


class ToolCallFinished(ToolCallEvent):
    """How a tool call ended. `result` is what the model was given (capped; the error's words
    when `status` is not ok), `result_chars` the result's size before the cap. A result is
    untrusted text: nothing reads a vote or a ranking from it."""

    type: Literal["tool_call_finished"] = "tool_call_finished"
    status: Literal["ok", "failed", "timeout"] = "ok"
    result: str = ""
    result_chars: int = 0
    truncated: bool = False
    error: str | None = None
    duration: float = 0.0


Event = Annotated[
    RunStarted
    | StageStarted
    | CallStarted
    | CallFinished
    | CallTextGrew
    | CallFailed
    | MemberSkipped
    | AskingStopped
    | VoteCast
    | RoundTallied
    | RankingParsed
    | WarningRaised
    | RunFinished
    | RunFailed
    | RunInterrupted
    | PlanProposed
    | PlanRejected
    | PlanAccepted
    | TaskStarted
    | TaskFinished
    | TaskFailed
    | TaskSkipped
    | ContributionMade
    | DelphiRoundEnded
    | VerdictGiven
    | VoteOpened
    | VoteReceived
    | QuorumReached
    | VoteTallied
    | LeaderChose
    | DecisionRecorded
    | ToolServerStarted
    | ToolCallStarted
    | ToolCallFinished,
    Field(discriminator="type"),
]

EVENT_TYPES: dict[str, type[BaseEvent]] = {
    cls.model_fields["type"].default: cls for cls in get_args(get_args(Event)[0])
}

Subscriber = Callable[[BaseEvent], Awaitable[None]]


def parse_event(payload: dict[str, Any]) -> BaseEvent:
    """Rebuild a stored event, so a replay feeds the view the same objects a live run did.
    Through its own class, so that only the event types a run holds are built (every model
    defers its build: `history show` would otherwise build all of them to draw one run); a
    type of a protocol's own is its spec's (`panel_cli.protocols.registry.event_class`)."""
    kind = EVENT_TYPES.get(payload.get("type", "")) or event_class(str(payload.get("type", "")))
    if kind is None:  # an unknown type: the union says why in a ValidationError
        return TypeAdapter(Event).validate_python(payload)
    return kind.model_validate(payload)


def json_payload(event: BaseEvent, secrets: Sequence[str] = ()) -> dict[str, Any]:
    """`event` as JSON with `secrets` scrubbed out, for a subscriber that keeps it (the store).
    The bus has made it already, scrubbed of the run's secrets: only those it lacks are
    scrubbed here. Shared by every subscriber: read it, never change it."""
    dumped = event._dumped
    if dumped is None:
        dumped = Dumped(event.model_dump(mode="json"), frozenset())
    missing = [secret for secret in secrets if secret not in dumped.scrubbed]
    return redact_obj(dumped.payload, missing) if missing else dumped.payload


def _dumped(event: BaseEvent, secrets: Sequence[str]) -> BaseEvent:
    """`event`, scrubbed of `secrets`, carrying its JSON. It is dumped once, and rebuilt from
    the scrubbed JSON only when a secret was in it."""
    payload = event.model_dump(mode="json")
    if secrets:
        clean = redact_obj(payload, secrets)
        if clean != payload:
            event = type(event).model_validate(clean)
        payload = clean
    event._dumped = Dumped(payload, frozenset(secrets))
    return event


class EventBus:
    """Stamps each event with the run id, a sequence number and a time, dumps it to JSON and
    scrubs the run's `secrets` out of it, once, then hands it to every subscriber in order.
    Scrubbing here means no store, view or log can forget to; dumping here means the store
    (`json_payload`) does not dump it again. Subscribers are awaited in order: the store
    decides which events wait for the disk (`panel_cli.store.subscriber`)."""

    def __init__(self, run_id: str, subscribers: list[Subscriber] | None = None, secrets: Sequence[str] = ()) -> None:
        self.run_id = run_id
        self.subscribers: list[Subscriber] = list(subscribers or [])
        self.secrets = tuple(secrets)
        self._seq = 0

    def subscribe(self, subscriber: Subscriber) -> None:
        self.subscribers.append(subscriber)

    async def emit(self, event: BaseEvent) -> BaseEvent:
        if isinstance(event, CallTextGrew):
            return await self._pass_on(event)
        self._seq += 1
        stamped = _dumped(
            event.model_copy(update={"run_id": self.run_id, "seq": self._seq, "ts": time.time()}), self.secrets
        )
        for subscriber in self.subscribers:
            await subscriber(stamped)
        return stamped

    async def _pass_on(self, event: CallTextGrew) -> BaseEvent:
        """A reply's text so far, for the subscribers that draw it (`follows_text`) only, and
        never with a secret or the start of one at its end (the rest may be on its way)."""
        followers = [subscriber for subscriber in self.subscribers if getattr(subscriber, "follows_text", False)]
        if not followers:
            return event
        text = shown_so_far(event.text, self.secrets)
        stamped = event.model_copy(update={"run_id": self.run_id, "seq": self._seq, "ts": time.time(), "text": text})
        for subscriber in followers:
            await subscriber(stamped)
        return stamped


def shown_so_far(text: str, secrets: Sequence[str]) -> str:
    """A growing text, scrubbed, without the longest end that begins one of the `secrets`:
    it is shown once the next piece tells whether it is that secret."""
    clean = redact(text, secrets)
    held = max(
        (
            size
            for secret in secrets
            for size in range(min(len(secret) - 1, len(clean)), 0, -1)
            if clean.endswith(secret[:size])
        ),
        default=0,
    )
    return clean[: len(clean) - held]
