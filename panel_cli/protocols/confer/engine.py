"""confer (docs/protocols.md#confer): answer, then rounds of anonymous cross-voting with confidence.

The arithmetic (labels, block, vote normalisation, tally, convergence) is pure and lives in
`tally.py`; the engine here only gathers calls and emits events.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, ValidationError

from panel_cli.config import Member, Panel, StopRule
from panel_cli.events import RoundTallied, VoteCast, WarningRaised
from panel_cli.llm.brief import RequestBrief, quote
from panel_cli.llm.gateway import CallResult, Gateway
from panel_cli.llm.structured import objects_in, unquoted
from panel_cli.protocols.asking import StageStop, Stopping, Wave, announce, closing, in_waves, stopping
from panel_cli.protocols.base import (
    DEFAULT_STAGE_TIMEOUT,
    Emit,
    Finding,
    ProtocolResult,
    ProtocolRules,
    yes_no,
)
from panel_cli.protocols.checks import located_error
from panel_cli.protocols.confer.log_odds import ConferTally
from panel_cli.protocols.confer.settings import AnswerOrder, ConferSettings
from panel_cli.protocols.confer.stopping import (
    ONE_ANSWER,
    answer_key,
    leading_key,
    next_answerers,
    next_votes,
)
from panel_cli.protocols.confer.tally import (
    Vote,
    assign_labels,
    choices_of,
    confidence_score,
    has_converged,
    has_signal,
    normalize_vote,
    render_block,
    tally,
)
from panel_cli.protocols.posterior import Confidence, confer_confidence, confidence_source, unknown
from panel_cli.protocols.stages import (
    Stage,
    ask,
    broadcast,
    gather_each,
    in_turn,
    open_stage,
    out_of_budget,
    stage_deadline,
)
from panel_cli.tasks import Task, mark
from panel_cli.untrusted import load_json


def check_confer(panel: Panel) -> list[Finding]:
    """A lone member would vote on its own answer round after round, and pay for it: it votes
    not at all, and this says so. confer stops only when decided: its members state their
    confidences in the vote, after they have answered, so no accuracy is known of a member
    before it is asked."""
    rule = panel.stop_rule
    if rule is not None and rule.kind == "confident":
        problem = (
            f"confer cannot stop at {rule}: its members state how sure they are only when they vote, after "
            "answering, so no member's accuracy is known before it is asked; use stop: decided, or panel vote with "
            "weights"
        )
        raise located_error(panel, ("stop",), problem)
    return [(("members",), LONE_MEMBER)] if len(panel.members) < 2 else []


LONE_MEMBER = "one member: no vote round is held, and its answer is the final answer"


def _settings(panel: Panel) -> list[tuple[str, str]]:
    settings = ConferSettings.of(panel)
    stop = (
        [("stop", "decided: answers in waves until the leading answer is settled, then votes among those who answered")]
        if panel.stop_rule is not None
        else []
    )
    return [
        ("max_rounds", str(settings.max_rounds)),
        ("until_convergence", yes_no(settings.until_convergence)),
        ("tally", settings.tally),
        ("answer_order", settings.answer_order),
        *([("options", f"{len(settings.options)}, the K of log-odds")] if settings.options else []),
        *stop,
    ]


RULES = ProtocolRules(
    fields=frozenset({"stop"}),
    timeouts={"answer": DEFAULT_STAGE_TIMEOUT, "vote": DEFAULT_STAGE_TIMEOUT},
    check=check_confer,
    headline=("tally", "answer_order"),
    settings=_settings,
)


class PeerVote(BaseModel):
    """The structured vote asked of each member. A reply holding a second object with another
    label holds two votes (`panel_cli.llm.structured`). A confidence must be a finite number."""

    decisive: ClassVar[tuple[str, ...]] = ("chosen_label",)

    chosen_label: str = Field(description="label of the best answer, possibly your own")
    revised_answer: str = Field(description="your answer for the next round")
    confidence: float = Field(description="0 to 100", allow_inf_nan=False)
    rationale: str = Field(default="", description="one sentence")


def own_beside_planted(text: str, block: dict[str, str]) -> tuple[dict[str, Any] | None, str | None]:
    """The voter's own vote in a reply that also quotes a vote an answer in the block holds
    (a planted `{"chosen_label": …}`), and the label of the answer that holds it; (None, None)
    when the reply is not that. A vote an answer carries is that answer's text, shown to the
    voter, never the voter's choice: set aside, the one vote left is the voter's. A reply whose
    votes are all planted ones, or that keeps two of its own, has none."""
    carried = {
        json.dumps(found, sort_keys=True): label for label, answer in block.items() for found in _votes_in(answer)
    }
    votes = _votes_in(unquoted(text))
    kept = [vote for vote in votes if json.dumps(vote, sort_keys=True) not in carried]
    planted = [carried[key] for vote in votes if (key := json.dumps(vote, sort_keys=True)) in carried]
    if not planted or len({" ".join(str(vote["chosen_label"]).split()).upper() for vote in kept}) != 1:
        return None, None
    try:
        return PeerVote.model_validate(kept[0]).model_dump(), planted[0]
    except ValidationError:
        return None, None


def _votes_in(text: str) -> list[dict[str, Any]]:
    """The vote-shaped objects (a `chosen_label`) among a text's top-level JSON objects."""
    found = []
    for span in objects_in(text):
        try:
            value = load_json(span)
        except ValueError:
            continue
        if isinstance(value, dict) and "chosen_label" in value:
            found.append(value)
    return found


class ConferRound(BaseModel):
    """One vote round. `winner_answer` is the winning answer as the round's block showed it:
    what the panel voted for (the winner's revision, written in the same round, is in its
    vote, for the next round to vote on). `signal` is False when every vote cast was a
    fallback: the winner then came from the tie rule alone, and the round cannot count
    towards convergence."""

    index: int
    block: dict[str, str]
    authors: dict[str, str]
    votes: list[Vote]
    scores: dict[str, float]
    winner_label: str | None
    winner: str | None
    winner_answer: str | None
    signal: bool


class MemberFailure(BaseModel):
    member: str
    round: int
    kind: str
    error: str


# Where confer's final answer comes from: the winner's round-0 answer, or a revision it wrote
# in the round before, each as the deciding round's block showed it and the panel voted for it;
# or, when no vote round was held (the budget allowed none, or a lone member), the first answer
# in member order, unvoted.
FinalAnswerSource = Literal["answer", "revision", "first_answer"]


class ConferResult(ProtocolResult):
    """`tally` is how the votes were counted: summed confidence, one each, or summed log-odds (then
    `scores` are log-odds, and may be negative); `answer_order`, how the members answered (at
    once, or in turn). `final_answer_source` says which text the final answer is
    (`FinalAnswerSource`); null without one."""

    tally: ConferTally
    answer_order: AnswerOrder
    winner: str | None
    final_answer_source: FinalAnswerSource | None
    confidence_score: float
    confidence: float | None = Field(
        description="the probability that the answer is right (docs/protocols.md#confidence), from the deciding round's "
        "votes under tally: log_odds; None otherwise"
    )
    confidence_basis: str | None = Field(description="what the confidence rests on, or why there is none")
    scores: dict[str, float]
    converged: bool
    initial_answers: dict[str, str]
    rounds: list[ConferRound]
    failures: list[MemberFailure]
    stopping: Stopping | None = Field(description="with `stop: decided`: the calls never made, and why asking stopped")


def final_answer_source(decided: ConferRound, initial: dict[str, str]) -> FinalAnswerSource:
    """Whether the deciding round's winning text is its author's round-0 answer, or a revision
    it wrote a round before, which this round's vote confirmed."""
    author = decided.winner
    return "answer" if author is not None and initial.get(author) == decided.winner_answer else "revision"


def answer_prompt(question: str, earlier: dict[str, str] | None = None) -> str:
    """The question; with `answer_order: sequential`, the answers given before this member's
    turn, labelled as the vote block will label them."""
    ask = "Give your best answer to the question, directly and concisely."
    if not earlier:
        return mark(f"Question:\n{question}\n\n{ask}", Task.ANSWER)
    return mark(
        f"Question:\n{question}\n\nMembers of the panel answering before you gave these answers; their authors "
        f"are not named.\n\n{render_block(earlier)}\n\n{ask} You may build on these answers or disagree with them.",
        Task.ANSWER,
    )


def earlier_answers(order: list[str], replies: Sequence[CallResult]) -> dict[str, str]:
    """The block of the answers given so far, by label: the members that answered, in member
    order, labelled as `assign_labels` will label them in the vote block."""
    answers = {reply.member: reply.text.strip() for reply in replies if reply.ok}
    return {label: answers[author] for label, author in assign_labels(order, answers).items()}


def vote_prompt(question: str, block: dict[str, str], own_label: str | None) -> str:
    own = f"Your current answer is Answer {own_label}." if own_label else "You have no answer of your own yet."
    return mark(
        f"Question:\n{question}\n\nThe panel's current answers follow; their authors are not named.\n\n"
        f"{render_block(block)}\n\n{own}\n"
        "Choose the best answer by its label (it may be your own), write your revised answer for the next "
        "round, give your confidence in the chosen answer from 0 to 100, and a one-sentence rationale.",
        Task.CONFER_VOTE,
    )


async def _vote(
    gateway: Gateway,
    emit: Emit,
    member: Member,
    question: str,
    round_index: int,
    authors: dict[str, str],
    block: dict[str, str],
    answers: dict[str, str],
    deadline: float | None,
) -> tuple[Vote | None, MemberFailure | None]:
    """Call, normalise and announce one vote as soon as it arrives, so the view shows it live."""
    own_answer = answers.get(member.name)
    own_label = next((label for label, author in authors.items() if author == member.name), None)
    prompt = vote_prompt(question, block, own_label)
    reply = await gateway.call(
        member,
        [{"role": "user", "content": prompt}],
        stage="vote",
        round=round_index,
        deadline=deadline,
        schema=PeerVote,
        brief=RequestBrief(task=Task.CONFER_VOTE, question=question, quoted=quote(block), own=own_label),
    )
    if not reply.ok:
        return None, MemberFailure(
            member=member.name, round=round_index, kind=reply.error_kind or "", error=reply.error or ""
        )
    parsed, problem = reply.parsed, reply.parse_error
    if parsed is None and reply.text:
        own, planted = own_beside_planted(reply.text, block)
        if own is not None:
            parsed, problem = own, None
            await emit(
                WarningRaised(
                    message=f"quoted the vote Answer {planted} holds beside its own; that vote is the answer's, "
                    "not this voter's, and its own is counted",
                    member=member.name,
                )
            )
    vote, warning = normalize_vote(member.name, parsed, problem, authors, own_answer)
    if warning:
        await emit(WarningRaised(message=warning, member=member.name))
    if vote is not None:
        await emit(
            VoteCast(
                round=round_index,
                voter=vote.voter,
                choice=vote.chosen_label,
                confidence=vote.confidence,
                rationale=vote.rationale,
                fallback=vote.fallback,
            )
        )
    return vote, None


async def confer(panel: Panel, question: str, gateway: Gateway, emit: Emit) -> ConferResult:
    """When the run's budget refuses a call, confer stops voting and keeps the current
    candidate: the winning answer of the last vote round that ran whole (the round the cap
    cut short is not tallied: a count of the votes that happened to fit would decide it),
    else, when no round did, the first answer in member order, which is also the label the
    tie rule favours.

    Under `stop: decided` the members answer in waves until the rest could not change which
    answer leads; when every answer given is the same answer no vote is held, else the rounds
    are held among the members asked, each round in waves until its winner is settled."""
    settings = ConferSettings.of(panel)
    members = panel.members
    order = [member.name for member in members]
    rule = panel.stop_rule
    replies, answered = await _answer_stage(panel, question, gateway, emit, rule)
    answers = {reply.member: reply.text.strip() for reply in replies if reply.ok}
    initial = dict(answers)
    failures = [
        MemberFailure(member=r.member, round=0, kind=r.error_kind or "", error=r.error or "")
        for r in replies
        if not r.ok
    ]
    stops: list[StageStop | None] = [answered]
    voters = [member for member in members if member.name in {reply.member for reply in replies}]

    rounds: list[ConferRound] = []
    winners: list[str | None] = []
    stopped = bool(answers) and await out_of_budget(gateway, emit, "no vote round is held and the first answer stands")
    one_answer = (
        not stopped and rule is not None and len({answer_key(text, settings.options) for text in answers.values()}) == 1
    )
    if rule is not None and one_answer:
        stops.append(await announce(emit, rule, "vote", 1, [], [voter.name for voter in voters], 0, ONE_ANSWER))
    converged = one_answer
    unvoted = stopped or one_answer or len(members) < 2  # a lone member's answer stands (`check_confer`)
    for index in range(1, 0 if unvoted else settings.max_rounds + 1):
        if not answers:
            break
        authors = assign_labels(order, answers)
        block = {label: answers[author] for label, author in authors.items()}
        stage = await open_stage(
            emit, "vote", members=[voter.name for voter in voters], limit=vote_timeout(panel), round=index, block=block
        )
        vote = functools.partial(
            _vote,
            gateway,
            emit,
            question=question,
            round_index=index,
            authors=authors,
            block=block,
            answers=answers,
            deadline=stage.deadline,
        )
        if rule is None:
            outcomes = await gather_each(voters, vote)
        else:
            outcomes, waved = await _votes_in_waves(panel, rule, voters, vote, block, answers, stage, gateway, emit)
            stops.append(waved)
        failures += [failure for _, failure in outcomes if failure is not None]
        ending = f"vote round {index} is not counted and the current candidate stands"
        if stopped := await out_of_budget(gateway, emit, ending):
            break
        votes = [vote for vote, _ in outcomes if vote is not None]
        scores, winner_label = tally(votes, list(block), settings.tally, choices_of(settings.options, block))
        winner = authors[winner_label] if winner_label else None
        revised = {vote.voter: vote.revised_answer for vote in votes}
        winner_answer = block[winner_label] if winner_label else None
        signal = has_signal(votes)
        await emit(RoundTallied(round=index, scores=scores, winner_label=winner_label, winner=winner, authors=authors))
        if winner is not None and not signal:
            await emit(
                WarningRaised(
                    message=f"every vote in round {index} was a fallback; its winner, {winner}, comes from the tie rule"
                    " (lowest label) and the round does not count towards convergence"
                )
            )
        rounds.append(
            ConferRound(
                index=index,
                block=block,
                authors=authors,
                votes=votes,
                scores=scores,
                winner_label=winner_label,
                winner=winner,
                winner_answer=winner_answer,
                signal=signal,
            )
        )
        unmoved = signal and moved_none(revised, answers, settings.options)
        answers.update(revised)
        winners.append(winner if signal else None)
        if settings.until_convergence and (has_converged(winners) or unmoved):
            converged = True
            break

    if one_answer:
        earliest = next(name for name in order if name in initial)
        return ConferResult(
            tally=settings.tally,
            answer_order=settings.answer_order,
            final_answer=initial[earliest],
            final_answer_source="answer",
            winner=earliest,
            confidence_score=0.0,
            **_unvoted_confidence(panel),
            scores={},
            converged=True,
            initial_answers=initial,
            rounds=[],
            failures=failures,
            stopping=stopping(rule, stops),
        )
    decided = next((r for r in reversed(rounds) if r.winner is not None), None)
    lone = stopped or len(members) < 2
    first = next((name for name in order if name in initial), None) if lone and decided is None else None
    found = _confidence(panel, decided)
    return ConferResult(
        tally=settings.tally,
        answer_order=settings.answer_order,
        final_answer=decided.winner_answer if decided else initial[first] if first else None,
        final_answer_source=final_answer_source(decided, initial) if decided else "first_answer" if first else None,
        failure_reason=None
        if decided or first
        else "no vote round produced a winner"
        if rounds
        else "no member answered the question",
        winner=decided.winner if decided else first,
        confidence_score=confidence_score(decided.votes, decided.winner_label) if decided else 0.0,
        confidence=found.confidence,
        confidence_basis=found.confidence_basis if found.confidence is not None else found.reason,
        scores=decided.scores if decided else {},
        converged=converged,
        initial_answers=initial,
        rounds=rounds,
        failures=failures,
        stopping=stopping(rule, stops),
    )


def vote_timeout(panel: Panel) -> float | None:
    return RULES.limit(panel, "vote")


def moved_none(revised: dict[str, str], answers: dict[str, str], options: Sequence[str]) -> bool:
    """Whether a round's revisions leave every voter's answer the same answer it was (its
    option, or its text whitespace and case aside): the next round would show the voters the
    same answers, so its votes could only repeat this round's."""
    return all(
        voter in answers and answer_key(text, options) == answer_key(answers[voter], options)
        for voter, text in revised.items()
    )


async def _answer_stage(
    panel: Panel, question: str, gateway: Gateway, emit: Emit, rule: StopRule | None
) -> tuple[list[CallResult], StageStop | None]:
    """Round 0: every member's answer, at once or in turn; under `stop: decided`, in waves (one
    at a time in turn) until the answers given settle which answer leads. The replies come in
    member order, only those of the members asked."""
    members = panel.members
    order = [member.name for member in members]
    limit = RULES.limit(panel, "answer")
    settings = ConferSettings.of(panel)
    sequential = settings.answer_order == "sequential"

    def request(before: Sequence[CallResult]) -> tuple[list[dict[str, Any]], RequestBrief]:
        if not sequential:
            return [{"role": "user", "content": answer_prompt(question)}], RequestBrief(
                task=Task.ANSWER, question=question
            )
        block = earlier_answers(order, before)
        brief = RequestBrief(task=Task.ANSWER, question=question, quoted=quote(block))
        return [{"role": "user", "content": answer_prompt(question, block)}], brief

    if rule is None and sequential:
        replies = await in_turn(gateway, emit, members, request, stage="answer", round=0, limit=limit, tools=True)
        return replies, None
    if rule is None:
        prompt, brief = request([])
        replies = await broadcast(
            gateway, emit, members, prompt, stage="answer", round=0, limit=limit, tools=True, brief=brief
        )
        return replies, None
    stage = await open_stage(emit, "answer", members=order, limit=limit, round=0)
    given: list[CallResult] = []

    async def answer(member: Member) -> CallResult:
        messages, brief = request(given)
        deadline = stage_deadline(limit) if sequential else stage.deadline
        reply = await ask(gateway, stage, member, messages, deadline=deadline, tools=True, brief=brief)
        given.append(reply)
        return reply

    def plan(replies: Sequence[CallResult], left: int) -> Wave:
        keys = [answer_key(reply.text.strip(), settings.options) if reply.ok else None for reply in replies]
        wave = next_answerers(keys, left, settings.options)
        return Wave(min(wave.size, 1), wave.reason) if sequential else wave

    asked = await in_waves(
        members,
        answer,
        plan,
        closed=closing(None if sequential else stage.deadline, lambda: gateway.budget_exhausted),
    )
    names = [member.name for member in asked.asked], [member.name for member in asked.not_asked]
    return asked.outcomes, await announce(emit, rule, "answer", 0, *names, asked.waves, asked.reason)


async def _votes_in_waves(
    panel: Panel,
    rule: StopRule,
    voters: Sequence[Member],
    vote: Callable[[Member], Awaitable[tuple[Vote | None, MemberFailure | None]]],
    block: dict[str, str],
    answers: dict[str, str],
    stage: Stage,
    gateway: Gateway,
    emit: Emit,
) -> tuple[list[tuple[Vote | None, MemberFailure | None]], StageStop | None]:
    """A vote round under `stop: decided`: the voters whose answer leads first (they settle it
    soonest), in waves until the votes in hand settle the round's winner. The outcomes come
    back in member order."""
    settings = ConferSettings.of(panel)
    keys = {name: answer_key(text, settings.options) for name, text in answers.items()}
    leading = leading_key([keys.get(voter.name) for voter in voters])
    ordered = sorted(voters, key=lambda voter: (voter.name not in keys, keys.get(voter.name) != leading))
    labels = list(block)
    choices = choices_of(settings.options, block)

    def plan(outcomes: Sequence[tuple[Vote | None, MemberFailure | None]], left: int) -> Wave:
        votes = [found for found, _ in outcomes if found is not None]
        scores, _ = tally(votes, labels, settings.tally, choices)
        return next_votes(scores, labels, bool(votes), left, settings.tally, choices)

    asked = await in_waves(ordered, vote, plan, closed=closing(stage.deadline, lambda: gateway.budget_exhausted))
    names = [voter.name for voter in asked.asked], [voter.name for voter in asked.not_asked]
    waved = await announce(emit, rule, "vote", stage.round, *names, asked.waves, asked.reason)
    places = {voter.name: place for place, voter in enumerate(voters)}
    in_order = sorted(zip(asked.asked, asked.outcomes, strict=True), key=lambda pair: places[pair[0].name])
    return [outcome for _, outcome in in_order], waved


def _confidence(panel: Panel, decided: ConferRound | None) -> Confidence:
    """The deciding round's votes as evidence of the answer they chose, each named by the
    answer it gives (two labels giving one answer are one answer), at the confidence stated."""
    source = confidence_source(panel, "confer")
    if decided is None or decided.winner_label is None:
        return unknown(None, "there is no answer to be confident of")
    options = ConferSettings.of(panel).options
    named = {label: answer_key(text, options) for label, text in decided.block.items()}
    votes = [(named[vote.chosen_label], vote.confidence) for vote in decided.votes]
    declared = len(options) if options else None
    answer = named[decided.winner_label]
    return confer_confidence(votes, answer, declared, source, shown=len(set(named.values())))


def _unvoted_confidence(panel: Panel) -> dict[str, Any]:
    """The confidence of an answer no vote was held on: none, since the confidences confer
    reads are stated in the vote."""
    source = confidence_source(panel, "confer")
    reason = source.reason or f"no vote was held ({ONE_ANSWER}), so no member stated a confidence"
    return {"confidence": None, "confidence_basis": reason}
