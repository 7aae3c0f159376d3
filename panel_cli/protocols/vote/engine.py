"""vote and decide (docs/protocols.md#vote-and-decide): every voter casts a ballot on fixed options, the ballots are
counted by one of seven methods, and a decision's leader chooses when no option wins (and
settles a tie under plurality and weighted_plurality unless `tie_break` says otherwise).

Reading a ballot is pure and lives in `ballots.py`, the counting in `tally.py`; the checks
of a panel sit at the top here, and the engines below only gather calls and emit events.

Collection closes at the vote's time limit (30 s by default). The gateway never lets a call
run past it, so a voter still busy then is cut off: its ballot is *late*, recorded with
`late: true` and never counted (a reply that lands after the close, in the instant the
cut takes, is late the same way). A voter whose own call limit ends it earlier, or whose
call fails, casts no ballot at all and is listed under `failed`.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from panel_cli.config import Member, Panel, StopRule, weights_file
from panel_cli.errors import UserError
from panel_cli.events import (
    DecisionRecorded,
    LeaderChose,
    QuorumReached,
    VoteOpened,
    VoteReceived,
    VoteTallied,
    WarningRaised,
)
from panel_cli.llm.brief import RequestBrief
from panel_cli.llm.gateway import Gateway
from panel_cli.protocols.asking import StageStop, Stopping, Wave, announce, closing, in_waves, stopping
from panel_cli.protocols.base import Emit, Finding, ProtocolResult, ProtocolRules, describe_duration
from panel_cli.protocols.checks import located_error
from panel_cli.protocols.posterior import confidence_source, vote_confidence, vote_evidence, weights_given
from panel_cli.protocols.stages import Stage, failure_reason, gather_each, open_stage, out_of_budget
from panel_cli.protocols.stopping import CountRules, ask_order, confident, next_wave, settled
from panel_cli.protocols.vote.ballots import BallotReply, NoMatch, option_problems, options_block, read_ballot
from panel_cli.protocols.vote.settings import VoteSettings, leader_of, settings_of
from panel_cli.protocols.vote.tally import (
    PLURALITY_METHODS,
    WEIGHTED_METHODS,
    Ballot,
    Method,
    RunoffRound,
    Tally,
    TieBreak,
    leader_settles,
    settling_a_tie,
    tally,
    tie_break_of,
)
from panel_cli.tasks import Task, mark
from panel_cli.thresholds import as_percent

DEFAULT_TIMEOUT = 30.0
# A call cut at the deadline returns at the deadline, give or take the clock's resolution.
DEADLINE_SLACK = 0.01


class VoterFailure(BaseModel):
    """A voter whose call failed: it cast no ballot."""

    voter: str
    kind: str
    error: str


class VoteResult(ProtocolResult):
    """The result of a vote (docs/result.md#vote-and-decide). `final_answer` is the winning
    option; without one, `failure_reason` says exactly why. `abstained`, `late` and `failed`
    name the voters in each case; `ballots` holds every ballot, late ones marked; `rounds` is
    the runoff's (ranked_choice)."""

    winner: str | None
    method: Method
    tie_break: TieBreak | None = Field(description="plurality and weighted_plurality: what settles a tie")
    tied: list[str] = Field(description="the options that tied at the top, when a plurality tied")
    options: list[str]
    vote_counts: dict[str, int]
    weights: dict[str, float]
    threshold: float | None
    quorum: int
    quorum_met: bool
    unanimous: bool
    total_votes: int
    winner_votes: int
    ballots_cast: int
    abstained: list[str]
    late: list[str]
    failed: list[VoterFailure]
    ballots: list[Ballot]
    rounds: list[RunoffRound] | None
    confidence: float | None = Field(
        description="the probability that the answer is right (docs/protocols.md#confidence); None when no member's "
        "accuracy is known, or there is no answer"
    )
    confidence_basis: str | None = Field(description="what the confidence rests on, or why there is none")
    stopping: Stopping | None = Field(description="with `stop:`: the calls never made, and why asking stopped")


class DecideResult(VoteResult):
    """A vote inside a group with an optional leader. When no option wins and the leader
    chooses, `winner` is its choice, `leader_override` true and `consensus_reached` false."""

    leader: str | None
    leader_ballot: Ballot | None
    leader_override: bool
    consensus_reached: bool


def is_late(ok: bool, error_kind: str | None, finished: float, deadline: float | None) -> bool:
    """Whether a ballot missed the close of collection: a reply that returned after the
    deadline, or a call the gateway cut at the deadline. A timeout well before the deadline
    is the voter's own call limit: a failure, not a late ballot."""
    if deadline is None:
        return False
    if ok:
        return finished > deadline
    return error_kind == "timeout" and finished >= deadline - DEADLINE_SLACK


# Prompts ---------------------------------------------------------------------------------------


_INSTRUCTIONS = (
    "Choose one option. Give your choice exactly as it is written above, your ranking of every option "
    "(best first), your confidence in your choice from 0 to 100, and a one-line reason."
)


def ballot_prompt(question: str, options: Sequence[str]) -> str:
    return mark(
        f"Question:\n{question}\n\nThe panel votes on the question. {options_block(options)}\n\n{_INSTRUCTIONS}",
        Task.BALLOT,
    )


def leader_prompt(question: str, options: Sequence[str], counted: Tally) -> str:
    """The leader sees how the vote went (counts, never another voter's words) and why it
    decided nothing."""
    counts = ", ".join(f"{option} {count}" for option, count in counted.vote_counts.items())
    abstained = f"; {counted.abstentions} abstained" if counted.abstentions else ""
    return mark(
        f"Question:\n{question}\n\nThe panel voted on the question by {counted.method.replace('_', ' ')} and decided "
        f"nothing: {counted.reason}. The votes: {counts}{abstained}.\n\n"
        f"You lead the panel, so the choice is yours. {options_block(options)}\n\n{_INSTRUCTIONS}",
        Task.BALLOT,
    )


# Checks ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VotePlan:
    """What a vote needs beyond the members, checked before any call."""

    options: list[str]
    method: Method
    threshold: float
    quorum: int
    tie_break: TieBreak
    no_match: NoMatch
    max_voters: int
    leader: Member | None
    stop: StopRule | None

    def count_rules(self) -> CountRules:
        """The rules a stopping rule counts the ballots by, as this vote counts them."""
        return {"threshold": self.threshold, "tie_break": self.tie_break, "quorum": self.quorum}


def with_options(panel: Panel, options: Sequence[str]) -> Panel:
    """The panel voting on `options` instead of its own (`--options`); a problem with one is a
    ValueError, said of the option that gave them."""
    problems = option_problems(options)
    if problems:
        raise ValueError(problems[0][1])
    return panel.model_copy(update={"options": [option.strip() for option in options]})


def plan_vote(panel: Panel, protocol: Literal["vote", "decide"]) -> VotePlan:
    settings = settings_of(panel, protocol)
    problems = option_problems(settings.options)
    if problems:
        index, problem = problems[0]
        raise located_error(panel, ("options", index), problem)
    options = [option.strip() for option in settings.options]
    if len(options) < 2:
        given = f" ('{options[0]}' is the only one)" if options else ""
        raise UserError(
            f"A {protocol} needs at least two options to choose between{given}: give them with --options A B, or as options: in the panel file."
        )
    named = leader_of(settings)
    return VotePlan(
        options=options,
        method=settings.method,
        threshold=settings.threshold,
        quorum=settings.quorum,
        tie_break=tie_break_of(settings.tie_break, named),
        no_match=settings.no_match,
        max_voters=settings.max_voters,
        leader=panel.member(named, role="leader") if named else None,
        stop=panel.stop_rule,
    )


def _findings(panel: Panel, protocol: Literal["vote", "decide"]) -> list[Finding]:
    plan_vote(panel, protocol)
    refuse_confident_unweighted(panel)
    settings = settings_of(panel, protocol)
    findings: list[Finding] = []
    if settings.method != "supermajority" and "threshold" in panel.model_fields_set:
        findings.append((("threshold",), f"used only by method supermajority, not {settings.method}"))
    findings += _tie_break_findings(settings, protocol)
    if settings.method not in WEIGHTED_METHODS:
        unused = f"used only by methods weighted and weighted_plurality, not {settings.method}"
        # Weights from a file (`weights: from FILE`) are said once, at the field that names it.
        findings += [(("weights",), unused)] if panel.weights is not None else []
        findings += [
            (("members", index, "weight"), unused)
            for index, member in enumerate(panel.members)
            if "weight" in member.model_fields_set
        ]
    if settings.quorum > len(panel.members):
        problem = f"{settings.quorum} is more than the {len(panel.members)} voters; no vote can reach it"
        raise located_error(panel, ("quorum",), problem)
    return findings


def refuse_confident_unweighted(panel: Panel) -> None:
    """`stop: confident(x)` reads each member's weight as its accuracy: with no weight given,
    there is none to read, and the run is refused before any call."""
    rule = panel.stop_rule
    if rule is None or rule.kind != "confident" or weights_given(panel):
        return
    problem = (
        f"{rule} needs each member's accuracy, read from its weight, and no member has one; give weights "
        "(weights: from FILE, which panel eval --calibrate writes) or use stop: decided"
    )
    raise located_error(panel, ("stop",), problem)


def _tie_break_findings(settings: VoteSettings, protocol: Literal["vote", "decide"]) -> list[Finding]:
    """A tie_break that a run would ignore, or a leader it asks of a vote that has none."""
    if settings.tie_break is None:
        return []
    if settings.method not in PLURALITY_METHODS:
        return [(("tie_break",), f"used only by methods plurality and weighted_plurality, not {settings.method}")]
    if settings.tie_break == "leader" and not leader_of(settings):
        whose = "a vote has no leader" if protocol == "vote" else "this decision names no leader"
        return [(("tie_break",), f"{whose}, so a tie is no winner; use first to settle it by the options' order")]
    return []


def _settings(panel: Panel, protocol: Literal["vote", "decide"]) -> list[tuple[str, str]]:
    plan = plan_vote(panel, protocol)
    method: str = plan.method
    if plan.method == "supermajority":
        method += f", threshold {plan.threshold:g} (more than {as_percent(plan.threshold)} of the votes)"
    if plan.method in PLURALITY_METHODS:
        method += f", tie_break {plan.tie_break}"
    settings = [
        ("method", method),
        ("options", ", ".join(plan.options)),
        ("quorum", str(plan.quorum)),
        ("no_match", plan.no_match),
        ("max_voters", f"{plan.max_voters} asked at once"),
    ]
    if plan.stop is not None:
        settings.append(("stop", stop_setting(plan.stop)))
    if protocol == "decide":
        settings.append(("leader", plan.leader.name if plan.leader else "none: without a winner nothing is decided"))
    return settings


def stop_setting(rule: StopRule) -> str:
    """How `panel validate` says a vote's stopping rule."""
    if rule.kind == "confident":
        return f"{rule}: one at a time, heaviest weight first, until the leading option is right with {rule.at_least:g}"
    return f"{rule}: in waves, heaviest weight first, until the rest cannot change the outcome"


RULES = ProtocolRules(
    fields=frozenset({"weights", "stop"}),
    timeouts={"vote": DEFAULT_TIMEOUT},
    member_fields=frozenset({"weight"}),
    check=lambda panel: _findings(panel, "vote"),
    settings=lambda panel: _settings(panel, "vote"),
)
DECIDE_RULES = ProtocolRules(
    fields=frozenset({"weights", "stop"}),
    timeouts={"vote": DEFAULT_TIMEOUT},
    member_fields=frozenset({"weight"}),
    check=lambda panel: _findings(panel, "decide"),
    settings=lambda panel: _settings(panel, "decide"),
)


# Engines ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Poll:
    """A vote's collection and count."""

    ballots: list[Ballot]
    failures: list[VoterFailure]
    tally: Tally
    stopped: StageStop | None = None
    # Under `stop: confident(x)`: the option whose probability reached x, and that probability.
    sure: str | None = None


async def _warn(emit: Emit, member: str, warnings: list[str]) -> None:
    for warning in warnings:
        await emit(WarningRaised(message=warning, member=member))


async def _poll(panel: Panel, plan: VotePlan, question: str, gateway: Gateway, emit: Emit) -> Poll:
    """Ask every voter at once (at most `max_voters` at a time) until collection closes,
    announce each ballot as it arrives, then count. When the run's budget refuses a voter's
    call, that voter casts no ballot (it is listed under `failed`, kind `budget`) and the
    ballots that came in are counted, against the same quorum; a warning says so."""
    limit = RULES.limit(panel, "vote")
    names = panel.member_names
    stage = await open_stage(emit, "vote", members=names, limit=limit)
    await emit(
        VoteOpened(
            options=plan.options,
            method=plan.method,
            threshold=plan.threshold,
            quorum=plan.quorum,
            tie_break=plan.tie_break,
            voters=names,
            weights={member.name: member.weight for member in panel.members},
            timeout=limit,
            max_voters=plan.max_voters,
            leader=plan.leader.name if plan.leader else None,
        )
    )
    messages = [{"role": "user", "content": ballot_prompt(question, plan.options)}]
    brief = RequestBrief(task=Task.BALLOT, question=question, options=tuple(plan.options))
    loop = asyncio.get_running_loop()
    closed = f"collection closed ({describe_duration(limit)})"

    async def ballot_of(member: Member) -> Ballot | VoterFailure:
        reply = await gateway.call(
            member, messages, stage="vote", deadline=stage.deadline, schema=BallotReply, brief=brief
        )
        late = is_late(reply.ok, reply.error_kind, loop.time(), stage.deadline)
        if reply.ok:
            ballot, warnings = read_ballot(
                member.name, reply.text, reply.parsed, plan.options, no_match=plan.no_match, weight=member.weight
            )
            if late:
                ballot, warnings = (
                    ballot.model_copy(update={"late": True}),
                    [f"its ballot came after {closed}; recorded as late, not counted"],
                )
        elif late:
            ballot = Ballot(voter=member.name, weight=member.weight, late=True, reason=f"no ballot before {closed}")
            warnings = [f"cast no ballot before {closed}; recorded as late, not counted"]
        else:
            return VoterFailure(voter=member.name, kind=reply.error_kind or "failed", error=reply.error or "")
        await _warn(emit, member.name, warnings)
        await emit(VoteReceived(**ballot.model_dump()))
        return ballot

    stopped: StageStop | None = None
    sure: str | None = None
    if plan.stop is None:
        outcomes = await gather_each(panel.members, ballot_of, at_once=plan.max_voters)
    else:
        outcomes, stopped, sure = await _ask_in_waves(panel, plan, ballot_of, stage, gateway, emit)
    ballots = [outcome for outcome in outcomes if isinstance(outcome, Ballot)]
    failures = [outcome for outcome in outcomes if isinstance(outcome, VoterFailure)]
    cast = len(ballots)
    await out_of_budget(
        gateway, emit, f"only the {cast} ballot{'s' if cast != 1 else ''} cast before it did are counted"
    )
    counted = tally(
        ballots, plan.options, plan.method, threshold=plan.threshold, quorum=plan.quorum, tie_break=plan.tie_break
    )
    if counted.quorum_met:
        await emit(QuorumReached(current=counted.ballots_cast, required=plan.quorum))
    await emit(VoteTallied(tally=counted.model_dump(mode="json")))
    return Poll(ballots=ballots, failures=failures, tally=counted, stopped=stopped, sure=sure)


async def _ask_in_waves(
    panel: Panel,
    plan: VotePlan,
    ballot_of: Callable[[Member], Awaitable[Ballot | VoterFailure]],
    stage: Stage,
    gateway: Gateway,
    emit: Emit,
) -> tuple[list[Ballot | VoterFailure], StageStop | None, str | None]:
    """The voters asked under `stop:`, heaviest weight first (member order when the weights
    are all alike), in waves as `next_voters` says, within the stage's one deadline. Returns
    the outcomes in member order, what the stop saved, and under `confident(x)` the option
    whose probability reached x (None when it never did: everyone was asked and counted)."""
    assert plan.stop is not None
    order = [panel.members[place] for place in ask_order([member.weight for member in panel.members])]
    asked = await in_waves(
        order,
        ballot_of,
        functools.partial(next_voters, plan, [member.weight for member in order]),
        at_once=plan.max_voters,
        closed=closing(stage.deadline, lambda: gateway.budget_exhausted),
    )
    ballots = [outcome for outcome in asked.outcomes if isinstance(outcome, Ballot)]
    sure = None
    if asked.not_asked and plan.stop.kind == "confident":
        evidence = vote_evidence(ballots, plan.options)
        sure = confident(evidence, len(plan.options), plan.stop.at_least or 1.0, order=plan.options).winner
    names = [member.name for member in asked.asked], [member.name for member in asked.not_asked]
    stopped = await announce(emit, plan.stop, "vote", None, *names, asked.waves, asked.reason)
    places = {name: place for place, name in enumerate(panel.member_names)}
    return sorted(asked.outcomes, key=lambda outcome: places[outcome.voter]), stopped, sure


def next_voters(plan: VotePlan, weights: Sequence[float], outcomes: Sequence[Ballot | VoterFailure], left: int) -> Wave:
    """How many of the voters still to ask (their `weights` in the order asked) to ask next:
    under `decided`, none once the rest cannot change the count's outcome, else the fewest
    whose ballots could settle it (`next_wave`); under `confident(x)`, one at a time until the
    leading option is right with probability x (`confident`)."""
    assert plan.stop is not None
    ballots = [outcome for outcome in outcomes if isinstance(outcome, Ballot)]
    if plan.stop.kind == "confident":
        evidence = vote_evidence(ballots, plan.options)
        sure = confident(evidence, len(plan.options), plan.stop.at_least or 1.0, order=plan.options)
        return Wave(0 if sure.decided else 1, sure.reason)
    remaining = weights[len(weights) - left :]
    rules = plan.count_rules()
    found = settled(ballots, remaining, plan.options, plan.method, **rules)
    if found.decided and found.winner is None and plan.leader is not None and left:
        # The leader chooses from the counts and the reason nothing won: everyone's, as without a rule.
        return Wave(left, f"{found.reason}, and the leader {plan.leader.name} will choose from everyone's counts")
    if found.decided:
        return Wave(0, found.reason)
    return Wave(next_wave(ballots, remaining, plan.options, plan.method, **rules), found.reason)


def _fields(panel: Panel, plan: VotePlan, poll: Poll, winner: str | None, reason: str | None) -> dict[str, Any]:
    """What a vote's and a decision's results share: the count, its confidence and what a
    stopping rule saved."""
    counted = poll.tally
    source = confidence_source(panel, panel.protocol, weights_file(panel.weights) if panel.weights else None)
    found = vote_confidence(poll.ballots, winner, plan.options, source)
    return {
        "final_answer": winner,
        "failure_reason": None if winner else reason,
        "winner": winner,
        "method": plan.method,
        "tie_break": counted.tie_break,
        "tied": counted.tied,
        "options": plan.options,
        "vote_counts": counted.vote_counts,
        "weights": counted.weights,
        "threshold": counted.threshold,
        "quorum": plan.quorum,
        "quorum_met": counted.quorum_met,
        "unanimous": counted.unanimous,
        "total_votes": counted.total_votes,
        "winner_votes": counted.winner_votes if winner == counted.winner else counted.vote_counts.get(winner or "", 0),
        "ballots_cast": counted.ballots_cast,
        "abstained": [ballot.voter for ballot in poll.ballots if ballot.choice is None and not ballot.late],
        "late": [ballot.voter for ballot in poll.ballots if ballot.late],
        "failed": poll.failures,
        "ballots": poll.ballots,
        "rounds": counted.rounds,
        "confidence": found.confidence,
        "confidence_basis": found.confidence_basis if found.confidence is not None else found.reason,
        "stopping": stopping(plan.stop, [poll.stopped]),
    }


async def vote(panel: Panel, question: str, gateway: Gateway, emit: Emit) -> VoteResult:
    plan = plan_vote(panel, "vote")
    poll = await _poll(panel, plan, question, gateway, emit)
    if poll.sure is not None:
        return VoteResult(**_fields(panel, plan, poll, poll.sure, None))
    return VoteResult(**_fields(panel, plan, poll, poll.tally.winner, _with_advice(poll.tally.reason, poll.tally)))


def _with_advice(reason: str | None, counted: Tally) -> str | None:
    """The reason there is no winner, and what would have settled a tie, for the person reading it."""
    advice = settling_a_tie(counted)
    return f"{reason}; {advice}" if reason and advice else reason


async def _ask_leader(
    panel: Panel, plan: VotePlan, leader: Member, question: str, counted: Tally, gateway: Gateway, emit: Emit
) -> tuple[Ballot | None, str | None]:
    """The leader's choice, read like a ballot; or None and why it made none."""
    stage = await open_stage(emit, "leader", members=[leader.name], limit=RULES.limit(panel, "vote"))
    prompt = [{"role": "user", "content": leader_prompt(question, plan.options, counted)}]
    brief = RequestBrief(task=Task.BALLOT, question=question, options=tuple(plan.options))
    reply = await gateway.call(leader, prompt, stage="leader", deadline=stage.deadline, schema=BallotReply, brief=brief)
    if not reply.ok:
        error = failure_reason(reply.error_kind, reply.error)
        await emit(LeaderChose(leader=leader.name, error=error))
        return None, f"could not choose: {error}"
    ballot, warnings = read_ballot(
        leader.name, reply.text, reply.parsed, plan.options, no_match=plan.no_match, weight=leader.weight
    )
    await _warn(emit, leader.name, warnings)
    await emit(
        LeaderChose(
            leader=leader.name,
            choice=ballot.choice,
            matched_by=ballot.matched_by,
            confidence=ballot.confidence,
            reason=ballot.reason,
        )
    )
    return ballot, None if ballot.choice else "named no option"


async def decide(panel: Panel, question: str, gateway: Gateway, emit: Emit) -> DecideResult:
    """A vote kept as a decision. Under a budget, the ballots that came in are counted (see
    `_poll`) and the leader is still asked when no option wins, if its call fits; when it
    does not, the decision has no winner and says the leader could not choose (budget)."""
    plan = plan_vote(panel, "decide")
    poll = await _poll(panel, plan, question, gateway, emit)
    counted = poll.tally
    winner, reason = poll.sure or counted.winner, counted.reason
    leader_ballot: Ballot | None = None
    if poll.sure is not None:
        reason = None
    elif plan.leader is not None and leader_settles(counted):
        leader_ballot, problem = await _ask_leader(panel, plan, plan.leader, question, counted, gateway, emit)
        if leader_ballot is not None and leader_ballot.choice is not None:
            winner = leader_ballot.choice
        else:
            reason = f"{reason}; the leader {plan.leader.name} {problem}"
    elif plan.leader is not None and winner is None:
        reason = f"{reason}; tie_break none leaves a tie undecided, so the leader {plan.leader.name} was not asked"
    elif winner is None:
        reason = _with_advice(reason, counted)
    override = leader_ballot is not None and winner is not None
    await emit(
        DecisionRecorded(
            topic=question,
            winner=winner,
            vote_counts=counted.vote_counts,
            method=plan.method,
            total_votes=counted.total_votes,
            ballots_cast=counted.ballots_cast,
            leader=plan.leader.name if plan.leader else None,
            leader_override=override,
            consensus_reached=not override and winner is not None,
        )
    )
    return DecideResult(
        **_fields(panel, plan, poll, winner, reason),
        leader=plan.leader.name if plan.leader else None,
        leader_ballot=leader_ballot,
        leader_override=override,
        consensus_reached=not override and winner is not None,
    )
