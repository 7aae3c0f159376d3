"""ensemble (docs/protocols.md#ensemble): one prompt to every member at once, no peer review, then a rule
that keeps every result, picks one, or has an aggregator write one.

Modes: `fanout` (every result), `race` (the first success; the rest are cancelled),
`consensus` (the highest score by the `length` scorer or a judge member), `majority` (the
response that resembles the most others) and `synthesize` (an aggregator member writes
one answer; if it fails, the first success). The choosing arithmetic is pure and sits at
the top; the engine below only gathers calls and emits events.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from pydantic import BaseModel, Field

from panel_cli.config import Member, Panel
from panel_cli.errors import UserError
from panel_cli.events import RoundTallied, WarningRaised
from panel_cli.llm.brief import RequestBrief, quote
from panel_cli.llm.gateway import CallResult, Gateway
from panel_cli.protocols.asking import Stopping, Wave, announce, closing, in_waves, stopping
from panel_cli.protocols.base import DEFAULT_SYNTHESIS_TIMEOUT, Emit, Finding, ProtocolResult, ProtocolRules, labels_for
from panel_cli.protocols.checks import located_error
from panel_cli.protocols.council.engine import answer_prompt
from panel_cli.protocols.ensemble.settings import EnsembleMode, EnsembleSettings
from panel_cli.protocols.stages import ask, broadcast, failure_reason, gather_each, open_stage, out_of_budget
from panel_cli.tasks import Task, mark, render_labelled
from panel_cli.wording import plural

DEFAULT_TIMEOUT = 120.0
RESEMBLANCE = 0.5
# A racer whose reply came after the race was won: its `error_kind` (the call itself is `late`).
LATE = "late"

ScorerKind = Literal["length", "judge"]


class JudgeScore(BaseModel):
    """The structured score asked of a judge for one response: a finite number; a reply
    holding two different scores holds none (`panel_cli.llm.structured`)."""

    decisive: ClassVar[tuple[str, ...]] = ("score",)

    score: float = Field(description="0 (useless) to 100 (excellent)", allow_inf_nan=False)
    reason: str = Field(default="", description="one sentence")


class EnsembleResponse(BaseModel):
    """One member's result, success or failure, with its score when the mode gives one."""

    name: str
    model: str
    text: str | None = None
    duration: float
    success: bool
    error_kind: str | None = None
    error: str | None = None
    score: float | None = None
    note: str | None = None


class EnsembleResult(ProtocolResult):
    mode: EnsembleMode
    responses: list[EnsembleResponse]
    chosen: str | None = Field(description="the member whose response is the answer, or the aggregator that wrote it")
    reason: str = Field(description="why that response is the answer, in one sentence")
    scores: dict[str, float]
    scorer: str | None
    aggregator: str | None
    majority: str | None = Field(
        default=None, description="majority mode: whose response most others resemble; None when none resembles another"
    )
    successful_responses: int
    member_count: int
    confidence: float | None = Field(
        default=None,
        description="always None: no mode's pick is a vote of known accuracy (`confidence_basis` says why)",
    )
    confidence_basis: str | None = Field(default=None, description="why there is no confidence")
    stopping: Stopping | None = Field(
        default=None, description="majority with `stop: decided`: the call never made, and why asking stopped"
    )


@dataclass(frozen=True)
class EnsemblePlan:
    """What a mode needs beyond the members, checked before any call so a typo costs nothing."""

    mode: EnsembleMode
    scorer: ScorerKind | None = None
    judge: Member | None = None
    aggregator: Member | None = None


def parse_scorer(value: str) -> tuple[ScorerKind, str | None]:
    """`length`, or `judge:<member>` with the judge's name."""
    text = value.strip()
    if text == "length":
        return "length", None
    if text.startswith("judge:") and text[len("judge:") :].strip():
        return "judge", text[len("judge:") :].strip()
    raise UserError(f"The scorer '{value}' is not known; use 'length' or 'judge:<member>'.")


def plan_ensemble(panel: Panel) -> EnsemblePlan:
    """The judge and aggregator the mode will call. The aggregator is `aggregator`, else the
    panel's chairman, else its first member."""
    settings = EnsembleSettings.of(panel)
    if settings.mode == "consensus":
        kind, judge = parse_scorer(settings.scorer)
        return EnsemblePlan(mode="consensus", scorer=kind, judge=panel.member(judge, role="judge") if judge else None)
    if settings.mode == "synthesize":
        named = settings.aggregator
        aggregator = panel.member(named, role="aggregator") if named else panel.chairmen()[0]
        return EnsemblePlan(mode="synthesize", aggregator=aggregator)
    return EnsemblePlan(mode=settings.mode)


# Which panel field each mode reads beyond the members: a field set for another mode is ignored.
MODE_FIELDS: dict[str, set[str]] = {
    "consensus": {"scorer"},
    "synthesize": {"aggregator", "chairman"},
    "majority": {"stop"},
}

# Why no mode's answer has a confidence (docs/protocols.md#confidence), by mode.
NO_CONFIDENCE: dict[str, str] = {
    "fanout": "fanout keeps every response and picks none",
    "race": "race takes the first response to arrive, and speed says nothing of being right",
    "consensus": "consensus takes the best-scored response, and a score (its length, or a judge's 0 to 100) is no "
    "probability of being right",
    "majority": "majority takes the response most others resemble, and resembling in words is no vote of known "
    "accuracy: members giving one answer in different words resemble nothing, members copying a wrong answer "
    "resemble each other",
    "synthesize": "the aggregator writes an answer of its own from the responses, which no member voted for",
}


def check_ensemble(panel: Panel) -> list[Finding]:
    """The mode's judge and aggregator must exist; a field only another mode reads is named;
    `stop` is majority's, and only `decided` (no response has a known accuracy)."""
    mode = plan_ensemble(panel).mode
    rule = panel.stop_rule
    if mode == "majority" and rule is not None and rule.kind == "confident":
        raise located_error(
            panel, ("stop",), f"ensemble cannot stop at {rule}: {NO_CONFIDENCE['majority']}; use stop: decided"
        )
    used = MODE_FIELDS.get(mode, set())
    ignored = sorted(field for field in set().union(*MODE_FIELDS.values()) - used if field in panel.model_fields_set)
    return [((field,), f"not used by mode {mode}") for field in ignored]


def _ensemble_settings(panel: Panel) -> list[tuple[str, str]]:
    plan = plan_ensemble(panel)
    shown: list[tuple[str, str]] = [("mode", plan.mode)]
    if plan.mode == "consensus":
        shown.append(("scorer", EnsembleSettings.of(panel).scorer))
    if plan.aggregator is not None:
        shown.append(("aggregator", plan.aggregator.name))
    if plan.mode == "majority" and panel.stop_rule is not None:
        shown.append(("stop", "decided: every member but the last, then the last if it could change the pick"))
    return shown


RULES = ProtocolRules(
    fields=frozenset({"chairman", "stop"}),
    # `review` limits a judge's scoring, `synthesis` the aggregator.
    timeouts={"answer": DEFAULT_TIMEOUT, "review": DEFAULT_TIMEOUT, "synthesis": DEFAULT_SYNTHESIS_TIMEOUT},
    check=check_ensemble,
    settings=_ensemble_settings,
    headline=("mode", "scorer", "aggregator"),
)


def distinct_words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.casefold()))


def jaccard(a: set[str], b: set[str]) -> float:
    """Shared distinct words over all distinct words; two texts without words share nothing."""
    union = a | b
    return len(a & b) / len(union) if union else 0.0


def resemblance_counts(texts: Mapping[str, str]) -> dict[str, int]:
    """For each response, how many of the others it resembles (Jaccard > 0.5)."""
    words = {name: distinct_words(text) for name, text in texts.items()}
    return {
        name: sum(1 for other in words if other != name and jaccard(words[name], words[other]) > RESEMBLANCE)
        for name in words
    }


def majority_settled(counts: Mapping[str, int], order: list[str], left: int) -> bool:
    """Whether majority's pick among the responses in hand (`counts`: how many others each
    resembles; in member order, before every member still to ask) stands whatever the `left`
    members still to ask answer, or if they fail. A response not yet given may resemble any
    of the others, so two left can always outvote the pick (they resemble each other and all
    but it); one left cannot when the pick resembles every other response in hand and each
    other one would still trail it, or tie it from later in member order, with one more."""
    if left == 0:
        return True
    if left > 1 or not counts:
        return False
    pick = highest({name: float(count) for name, count in counts.items()}, order)
    if counts[pick] != len(counts) - 1:
        return False
    return all(
        counts[name] + 1 < counts[pick] or (counts[name] + 1 == counts[pick] and order.index(pick) < order.index(name))
        for name in counts
        if name != pick
    )


def next_majority(texts: Mapping[str, str], order: list[str], left: int) -> Wave:
    """How many of the `left` members still to answer to ask next under majority's `stop:
    decided`: all but the last at first (while two are left, nothing is settled), then the
    last only if its response could change the pick."""
    if majority_settled(resemblance_counts(texts), order, left):
        return Wave(0, "the last response could not change which response most others resemble")
    if left > 1:
        return Wave(left - 1, "a response not yet given may resemble any others, so only the last member can be spared")
    return Wave(1, "the last response could still change which response most others resemble")


def highest(scores: Mapping[str, float], order: list[str]) -> str:
    """The best-scored name (of at least one); a tie goes to the one earlier in member order."""
    return min(scores, key=lambda name: (-scores[name], order.index(name)))


def render_fanout(responses: list[EnsembleResponse]) -> str:
    """Every result as one Markdown document, failures included, in member order."""
    sections = []
    for response in responses:
        if response.success:
            sections.append(f"### {response.name}\n\n{response.text}")
        else:
            sections.append(f"### {response.name} — failed\n\n_{failure_reason(response.error_kind, response.error)}_")
    return "\n\n".join(sections)


def judge_prompt(question: str, text: str) -> str:
    """One response at a time and never its author, so the judge scores the text alone."""
    return mark(
        f"Question:\n{question}\n\nA response to the question follows.\n\n{render_labelled({'A': text}, 'Response')}\n\n"
        "Score how well it answers the question, from 0 (useless) to 100 (excellent), with a one-sentence reason.",
        Task.JUDGE,
    )


def aggregate_prompt(question: str, texts: list[str]) -> str:
    block = dict(zip(labels_for(len(texts)), texts, strict=True))
    return mark(
        f"Question:\n{question}\n\nSeveral models answered the question independently; their responses follow.\n\n"
        f"{render_labelled(block, 'Response')}\n\n"
        "Write one answer to the question that keeps what the responses get right and corrects what they get wrong. "
        "Answer the question directly; do not describe the responses.",
        Task.SYNTHESIS,
    )


async def _race(
    members: list[Member],
    prompt: list[dict[str, str]],
    brief: RequestBrief,
    gateway: Gateway,
    deadline: float | None,
) -> dict[str, CallResult]:
    """Calls until the first success, then cancel the rest (their connections close, so a
    provider stops working for nobody). Every member's call is started before the race can be
    decided, so each has its row and its final status. The first call to answer crosses the
    finish line; one whose reply comes in after that (before its cancellation reached it) is
    `late`: kept and paid for, not used. Members cancelled while still running are absent."""
    finish = asyncio.Event()
    racers = [
        asyncio.create_task(
            gateway.call(m, prompt, stage="answer", deadline=deadline, tools=True, brief=brief, race=finish)
        )
        for m in members
    ]
    pending = set(racers)
    results: dict[str, CallResult] = {}
    try:
        # One turn of the loop runs each racer's first step (tasks start in the order they
        # were made), which reports its call started: none is cancelled before it began.
        await asyncio.sleep(0)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            finished = [task.result() for task in done]
            results.update((reply.member, reply) for reply in finished)
            # A late reply means the winner's call is still reporting its answer: wait for it.
            if any(reply.ok and not reply.late for reply in finished):
                finish.set()  # a reused reply wins without a request of its own
                break
    finally:
        for task in pending:
            task.cancel()
        ended = await asyncio.gather(*pending, return_exceptions=True)
    results.update((reply.member, reply) for reply in ended if isinstance(reply, CallResult))
    return results


@dataclass
class _Choice:
    """What a mode decided: the chosen member, why, the scores behind it (if any), and the
    answer's text when the mode wrote one rather than picked one."""

    chosen: str | None
    reason: str
    scores: dict[str, float] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    text: str | None = None
    majority: bool = True


async def _judge_choice(
    panel: Panel, judge: Member, question: str, texts: dict[str, str], gateway: Gateway, emit: Emit
) -> _Choice:
    """The judge scores each response in its own call; one it cannot score is left out, and
    when it scores none the first success is the answer."""
    stage = await open_stage(emit, "judge", members=[judge.name], limit=RULES.limit(panel, "review"))

    async def score(name: str, text: str) -> JudgeScore | None:
        prompt = [{"role": "user", "content": judge_prompt(question, text)}]
        brief = RequestBrief(task=Task.JUDGE, question=question, quoted=quote({"A": text}))
        reply = await gateway.call(
            judge, prompt, stage="judge", deadline=stage.deadline, schema=JudgeScore, about=name, brief=brief
        )
        if reply.parsed is None:
            problem = reply.parse_error if reply.ok else failure_reason(reply.error_kind, reply.error)
            await emit(
                WarningRaised(message=f"the judge could not score {name}'s response ({problem})", member=judge.name)
            )
            return None
        found = JudgeScore.model_validate(reply.parsed)
        return found.model_copy(update={"score": max(0.0, min(100.0, found.score))})

    found = dict(zip(texts, await gather_each(texts.items(), lambda item: score(*item)), strict=True))
    judged = {name: verdict for name, verdict in found.items() if verdict is not None}
    scores = {name: verdict.score for name, verdict in judged.items()}
    notes = {name: verdict.reason for name, verdict in judged.items()}
    if not scores:
        reason = "the judge scored no response; the first successful response is the answer"
        await emit(WarningRaised(message=reason, member=judge.name))
        return _Choice(next(iter(texts)), reason)
    chosen = highest(scores, panel.member_names)
    return _Choice(chosen, f"the judge {judge.name} scored it highest, {scores[chosen]:g} of 100", scores, notes)


async def _synthesize(
    panel: Panel, aggregator: Member, question: str, texts: dict[str, str], gateway: Gateway, emit: Emit
) -> _Choice:
    stage = await open_stage(emit, "synthesis", members=[aggregator.name], limit=RULES.limit(panel, "synthesis"))
    prompt = [{"role": "user", "content": aggregate_prompt(question, list(texts.values()))}]
    block = dict(zip(labels_for(len(texts)), texts.values(), strict=True))
    brief = RequestBrief(task=Task.SYNTHESIS, question=question, quoted=quote(block))
    reply = await gateway.call(aggregator, prompt, stage="synthesis", deadline=stage.deadline, tools=True, brief=brief)
    if reply.ok:
        count = f"{len(texts)} response{'s' if len(texts) != 1 else ''}"
        return _Choice(
            aggregator.name, f"the aggregator {aggregator.name} wrote it from {count}", text=reply.text.strip()
        )
    reason = f"the aggregator failed ({failure_reason(reply.error_kind, reply.error)}); the first successful response is the answer"
    await emit(WarningRaised(message=reason, member=aggregator.name))
    return _Choice(next(iter(texts)), reason)


async def _choose(
    plan: EnsemblePlan, panel: Panel, question: str, responses: list[EnsembleResponse], gateway: Gateway, emit: Emit
) -> _Choice:
    """Apply the mode to the stage's results (there is at least one success).

    When the run's budget refused a call of the answer stage, the modes that make no further
    call choose as ever from the responses that came in; `consensus` with a judge asks no
    judge and the first successful response is the answer; `synthesize` still asks its
    aggregator, whose call the budget may still allow, and else falls back to the first
    successful response. A judge's calls refused midway leave those responses unscored."""
    order = panel.member_names
    texts = {r.name: r.text for r in responses if r.success and r.text is not None}
    if plan.mode == "fanout":
        return _Choice(
            None, f"fanout keeps every result: {len(texts)} of {len(responses)} answered", text=render_fanout(responses)
        )
    if plan.mode == "race":
        durations = {r.name: r.duration for r in responses if r.name in texts}
        first = min(durations, key=lambda name: (durations[name], order.index(name)))
        cancelled = sum(r.error_kind == "cancelled" for r in responses)
        late = sum(r.error_kind == LATE for r in responses)
        rest = "".join(
            f"; {plural(count, 'other')} {'was' if count == 1 else 'were'} {what}"
            for count, what in ((late, "late (answered after the race was won)"), (cancelled, "cancelled"))
            if count
        )
        return _Choice(first, f"first to answer, in {durations[first]:.2f}s{rest}")
    if plan.mode == "majority":
        counts = resemblance_counts(texts)
        scores = {name: float(count) for name, count in counts.items()}
        chosen = highest(scores, order)
        if counts[chosen] == 0:
            reason = "no majority: no response resembles another; the first successful response is the answer"
            await emit(WarningRaised(message=reason))
            return _Choice(next(iter(texts)), reason, scores, majority=False)
        others = len(texts) - 1
        reason = f"resembles {counts[chosen]} of the other {others} (over half their distinct words shared)"
        tied = [name for name in texts if name != chosen and counts[name] == counts[chosen]]
        if tied:
            names = tied[0] if len(tied) == 1 else f"{', '.join(tied[:-1])} and {tied[-1]}"
            reason += f"; tied with {names}, it comes first in member order"
        return _Choice(chosen, reason, scores)
    budget_ending = "the judge is not asked and the first successful response is the answer"
    if plan.mode == "consensus" and plan.judge is not None and await out_of_budget(gateway, emit, budget_ending):
        return _Choice(
            next(iter(texts)), "the budget ran out before the judge could score; the first successful response"
        )
    if plan.mode == "consensus" and plan.judge is not None:
        return await _judge_choice(panel, plan.judge, question, texts, gateway, emit)
    if plan.mode == "consensus":
        scores = {name: float(len(text)) for name, text in texts.items()}
        chosen = highest(scores, order)
        return _Choice(chosen, f"the longest response, {scores[chosen]:.0f} characters", scores)
    assert plan.aggregator is not None, "plan_ensemble always names the aggregator for synthesize"
    return await _synthesize(panel, plan.aggregator, question, texts, gateway, emit)


async def ensemble(panel: Panel, question: str, gateway: Gateway, emit: Emit) -> EnsembleResult:
    plan = plan_ensemble(panel)
    started = time.perf_counter()  # a cancelled racer's duration is the time until the race ended
    asking: Stopping | None = None

    prompt = [{"role": "user", "content": answer_prompt(question)}]
    brief = RequestBrief(task=Task.ANSWER, question=question)
    limit = RULES.limit(panel, "answer")
    if plan.mode == "race":
        stage = await open_stage(emit, "answer", members=panel.member_names, limit=limit)
        replies = await _race(panel.members, prompt, brief, gateway, stage.deadline)
    elif plan.mode == "majority" and panel.stop_rule is not None:
        replies, asking = await _answers_in_waves(panel, prompt, brief, gateway, emit)
    else:
        gathered = await broadcast(
            gateway, emit, panel.members, prompt, stage="answer", limit=limit, tools=True, brief=brief
        )
        replies = {reply.member: reply for reply in gathered}
    elapsed = time.perf_counter() - started
    asked = [member for member in panel.members if member.name in replies or plan.mode == "race"]
    responses = [_response(member, replies.get(member.name), elapsed) for member in asked]
    answered = [r for r in responses if r.success]

    choice = (
        await _choose(plan, panel, question, responses, gateway, emit)
        if answered
        else _Choice(None, "no member answered")
    )
    for response in responses:
        response.score = choice.scores.get(response.name)
        response.note = choice.notes.get(response.name)
    if choice.scores and choice.chosen is not None:
        await emit(RoundTallied(scores=choice.scores, winner_label=choice.chosen, winner=choice.chosen))
    final = choice.text
    if final is None and choice.chosen is not None:
        final = next(r.text for r in responses if r.name == choice.chosen)
    return EnsembleResult(
        final_answer=final,
        failure_reason=None if final is not None else "no member answered",
        mode=plan.mode,
        responses=responses,
        chosen=choice.chosen,
        reason=choice.reason,
        scores=choice.scores,
        scorer=EnsembleSettings.of(panel).scorer if plan.mode == "consensus" else None,
        aggregator=plan.aggregator.name if plan.aggregator else None,
        majority=(choice.chosen if choice.majority else None) if plan.mode == "majority" else None,
        successful_responses=len(answered),
        member_count=len(panel.members),
        confidence=None,
        confidence_basis=NO_CONFIDENCE[plan.mode] if final is not None else "there is no answer to be confident of",
        stopping=asking,
    )


async def _answers_in_waves(
    panel: Panel, prompt: list[dict[str, str]], brief: RequestBrief, gateway: Gateway, emit: Emit
) -> tuple[dict[str, CallResult], Stopping | None]:
    """majority's answers under `stop: decided`, in member order (`next_majority`), within the
    stage's one deadline: the replies of the members asked, and what the stop saved."""
    rule = panel.stop_rule
    assert rule is not None
    order = panel.member_names
    stage = await open_stage(emit, "answer", members=order, limit=RULES.limit(panel, "answer"))

    async def answer(member: Member) -> CallResult:
        return await ask(gateway, stage, member, prompt, deadline=stage.deadline, tools=True, brief=brief)

    def plan(replies: Sequence[CallResult], left: int) -> Wave:
        texts = {reply.member: reply.text.strip() for reply in replies if reply.ok}
        return next_majority(texts, order, left)

    asked = await in_waves(
        panel.members, answer, plan, closed=closing(stage.deadline, lambda: gateway.budget_exhausted)
    )
    names = [member.name for member in asked.asked], [member.name for member in asked.not_asked]
    stopped = await announce(emit, rule, "answer", None, *names, asked.waves, asked.reason)
    return {reply.member: reply for reply in asked.outcomes}, stopping(rule, [stopped])


def _response(member: Member, reply: CallResult | None, elapsed: float) -> EnsembleResponse:
    """A member's result; no reply means the race was won while it was still running."""
    if reply is None:
        return EnsembleResponse(
            name=member.name,
            model=member.model,
            duration=elapsed,
            success=False,
            error_kind="cancelled",
            error="another member answered first",
        )
    if reply.late:
        return EnsembleResponse(
            name=member.name,
            model=member.model,
            duration=reply.latency,
            success=False,
            error_kind=LATE,
            error="answered after another member had won the race; its reply is kept in the store, not used",
        )
    return EnsembleResponse(
        name=member.name,
        model=member.model,
        text=reply.text.strip() if reply.ok else None,
        duration=reply.latency,
        success=reply.ok,
        error_kind=reply.error_kind,
        error=reply.error,
    )
