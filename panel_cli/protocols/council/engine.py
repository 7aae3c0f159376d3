"""council (docs/protocols.md#council): answers, anonymous peer review with rankings, then a chairman's synthesis.

The prompts and the bookkeeping (labels, what each reviewer is shown, failure texts) are
pure and sit at the top; the ranking arithmetic lives in `ranking.py`; the engine below
only gathers calls and emits events. Members are told apart by name everywhere, never by
model, so two members on one model are two members with two labels.
"""

from __future__ import annotations

import random
from typing import Literal

from pydantic import BaseModel, Field

from panel_cli.config import Member, Panel
from panel_cli.errors import UserError
from panel_cli.events import RankingParsed, WarningRaised
from panel_cli.llm.brief import RequestBrief, quote
from panel_cli.llm.gateway import CallResult, Gateway
from panel_cli.protocols.base import (
    DEFAULT_STAGE_TIMEOUT,
    DEFAULT_SYNTHESIS_TIMEOUT,
    Emit,
    Finding,
    ProtocolResult,
    ProtocolRules,
    chairman_setting,
    labels_for,
    yes_no,
)
from panel_cli.protocols.council.ranking import (
    BiasReport,
    RankedMember,
    ReviewFacts,
    aggregate_rankings,
    bias_report,
    has_ranking,
    parse_ranking,
    review_order,
)
from panel_cli.protocols.council.settings import CouncilSettings
from panel_cli.protocols.stages import (
    Synthesis,
    broadcast,
    failure_reason,
    gather_each,
    open_stage,
    out_of_budget,
    synthesis_stage,
)
from panel_cli.tasks import Task, mark, render_labelled

NO_RESPONSES = "Council deliberation failed: no responses collected"
LABEL_NOUN = "Model"
NAMED_NOUN = "Member"

# `top_ranked`: the budget ran out before a chairman could write; the best-ranked answer stands.
Outcome = Literal["answered", "no_responses", "synthesis_failed", "top_ranked"]


class CouncilResponse(BaseModel):
    """One member's stage-1 answer, or why it has none, always under its real name."""

    name: str
    model: str
    label: str | None = None
    text: str | None = None
    duration: float
    success: bool
    error_kind: str | None = None
    error: str | None = None


class CouncilReview(BaseModel):
    """One member's review: its evaluation (or why it is unavailable), the labels it was
    shown in the order shown, and its parsed ranking of canonical labels, best first."""

    reviewer: str
    evaluation: str
    ranking: list[str] = Field(default_factory=list)
    shown: list[str] = Field(default_factory=list)
    success: bool
    duration: float = 0.0


class CouncilResult(ProtocolResult):
    """council's result (docs/result.md#council), with the bias controls in force and the bias
    report they inform. Without an answer, `final_answer` is None and `failure_reason` says
    why (`Council deliberation failed: no responses collected`, `Synthesis failed: …`)."""

    outcome: Outcome
    stage1_responses: list[CouncilResponse]
    stage2_reviews: list[CouncilReview]
    stage3_synthesis: Synthesis | None
    aggregate_ranking: list[RankedMember]
    top_ranked: str | None
    labels: dict[str, str] = Field(description="label -> member name, over the members that answered")
    successful_responses: int
    member_count: int
    anonymize: bool
    shuffle: bool
    self_review: bool
    seed: int | None
    bias: BiasReport
    confidence: float | None = Field(
        default=None, description="always None: council's answer has no probability of being right (`confidence_basis`)"
    )
    confidence_basis: str | None = Field(default=None, description="why there is no confidence")


# Why a council's answer has no confidence (docs/protocols.md#confidence).
NO_CONFIDENCE = (
    "council's answer is its chairman's synthesis, which no member voted for, and its ranking averages the places "
    "reviewers gave: which answer they preferred, not how likely it is right, since no reviewer's accuracy is known"
)


def check_council(panel: Panel) -> list[Member]:
    """The chairmen to try, in order, once the panel is known to be a valid council."""
    if len(panel.members) < 2:
        raise UserError(f"A council needs at least 2 members; panel '{panel.name}' has {len(panel.members)}.")
    return panel.chairmen()


def _council_findings(panel: Panel) -> list[Finding]:
    check_council(panel)
    return []


def _council_settings(panel: Panel) -> list[tuple[str, str]]:
    settings = CouncilSettings.of(panel)
    return [
        chairman_setting(panel, panel.chairmen()),
        ("anonymize", yes_no(settings.anonymize)),
        (
            "shuffle",
            yes_no(settings.shuffle)
            + (f", seed {settings.seed}" if settings.shuffle and settings.seed is not None else ""),
        ),
        ("self_review", yes_no(settings.self_review)),
    ]


def with_seed(panel: Panel) -> Panel:
    """A shuffling panel without a seed gets one drawn now: the run records it (in its config
    from the start, in its result at the end), so the orders can be replayed and a resumed
    run shows each reviewer the same order as before."""
    settings = CouncilSettings.of(panel)
    if not settings.shuffle or settings.seed is not None:
        return panel
    return panel.model_copy(update={"seed": random.SystemRandom().randrange(2**31)})


RULES = ProtocolRules(
    fields=frozenset({"chairman"}),
    timeouts={"answer": DEFAULT_STAGE_TIMEOUT, "review": DEFAULT_STAGE_TIMEOUT, "synthesis": DEFAULT_SYNTHESIS_TIMEOUT},
    check=_council_findings,
    settings=_council_settings,
    headline=("chairman",),
    draw=with_seed,
)


def assign_labels(order: list[str], answered: set[str]) -> dict[str, str]:
    """`Model A`, `Model B`, … -> author, in member order over the members that answered."""
    authors = [name for name in order if name in answered]
    return {f"{LABEL_NOUN} {label}": name for label, name in zip(labels_for(len(authors)), authors, strict=True)}


def answer_prompt(question: str) -> str:
    return mark(f"Question:\n{question}\n\nGive your best, complete answer to the question.", Task.ANSWER)


def review_prompt(question: str, shown: dict[str, str], anonymize: bool) -> str:
    """The reviewer sees the answers it is given, keyed by display key (`A` or a member
    name), and nothing else: with `anonymize` no name or model appears anywhere in it."""
    noun = LABEL_NOUN if anonymize else NAMED_NOUN
    intro = (
        "Several panel members answered the question independently. Their answers follow, labelled; the authors are not named."
        if anonymize
        else "Several panel members answered the question independently. Their answers follow under their authors' names."
    )
    form = (
        "<labels, best first, separated by commas>" if anonymize else "<member names, best first, separated by commas>"
    )
    return mark(
        f"Question:\n{question}\n\n{intro}\n\n{render_labelled(shown, noun)}\n\n"
        "Evaluate each answer in turn: what it gets right, and what it gets wrong or leaves out. "
        "Then rank every answer, best first, on a final line of exactly this form:\n"
        f"FINAL RANKING: {form}\n"
        f"Name each answer once, as it is {'labelled' if anonymize else 'headed'} above.",
        Task.COUNCIL_REVIEW if anonymize else Task.COUNCIL_REVIEW_NAMED,
    )


def synthesis_prompt(
    question: str,
    answers: dict[str, str],
    authors: dict[str, str],
    models: dict[str, str],
    reviews: list[CouncilReview],
    aggregate: list[RankedMember],
) -> str:
    """Everything the chairman needs, with real names: the labelled answers and who wrote
    each, the reviews under their reviewers' names, and the aggregate ranking."""
    block = render_labelled({label.removeprefix(f"{LABEL_NOUN} "): text for label, text in answers.items()}, LABEL_NOUN)
    who = "\n".join(f"- {label}: {name} ({models[name]})" for label, name in authors.items())
    review_text = (
        render_labelled({review.reviewer: review.evaluation for review in reviews}, "Review by")
        if reviews
        else "(no reviews)"
    )
    ranking = (
        "\n".join(
            f"{place}. {entry.label} ({entry.name}): average rank {entry.average_rank:.2f} over {entry.count} review{'s' if entry.count != 1 else ''}"
            for place, entry in enumerate(aggregate, start=1)
        )
        or "(no rankings could be read)"
    )
    return mark(
        f"Question:\n{question}\n\n"
        "You chair a council. Its members answered the question independently, then reviewed and ranked "
        "each other's answers without knowing who wrote which.\n\n"
        f"The answers:\n{block}\n\nWho wrote each answer:\n{who}\n\n"
        f"The reviews, under their reviewers' names:\n{review_text}\n\n"
        f"The aggregate ranking (lower average is better):\n{ranking}\n\n"
        "Write the council's final answer to the question. Build on the strongest answers and the reviewers' "
        "points, settle their disagreements, and answer the question directly.",
        Task.COUNCIL_SYNTHESIS,
    )


def _letter(label: str) -> str:
    """`A` for `Model A`: an answer's label as the chairman's prompt shows it."""
    return label.removeprefix(f"{LABEL_NOUN} ")


class _Labels:
    """How the answers are named. Internally every answer has a label (`Model A`, …, in
    member order over the members that answered). A reviewer sees each under a *key* with
    a noun (`Model A`, or `Member gpt` when not anonymised), and its ranking holds
    *canonical* entries: the label, or the author's name when not anonymised."""

    def __init__(self, order: list[str], answered: dict[str, str], anonymize: bool) -> None:
        self.authors = assign_labels(order, set(answered))
        self.of_member = {name: label for label, name in self.authors.items()}
        self.answers = {label: answered[name] for label, name in self.authors.items()}
        self.noun = LABEL_NOUN if anonymize else NAMED_NOUN
        self.key = {
            label: label.removeprefix(f"{LABEL_NOUN} ") if anonymize else name for label, name in self.authors.items()
        }
        self.canonical = {label: label if anonymize else name for label, name in self.authors.items()}
        self.author_of_canonical = {self.canonical[label]: name for label, name in self.authors.items()}

    def own(self, member: str) -> str | None:
        """The canonical entry of a member's own answer, if it has one."""
        label = self.of_member.get(member)
        return None if label is None else self.canonical[label]

    def known(self, shown: list[str]) -> dict[str, str]:
        """What `parse_ranking` may recognise for a reviewer: only the labels it was shown."""
        return {self.key[label].casefold(): self.canonical[label] for label in shown}


async def _answer_stage(panel: Panel, question: str, gateway: Gateway, emit: Emit) -> list[CallResult]:
    prompt = [{"role": "user", "content": answer_prompt(question)}]
    brief = RequestBrief(task=Task.ANSWER, question=question)
    return await broadcast(
        gateway,
        emit,
        panel.members,
        prompt,
        stage="answer",
        limit=RULES.limit(panel, "answer"),
        tools=True,
        brief=brief,
    )


async def _review_stage(
    panel: Panel, question: str, labels: _Labels, seed: int | None, gateway: Gateway, emit: Emit
) -> list[CouncilReview]:
    """Every member reviews, including one that failed stage 1; only its own reply is parsed."""
    settings = CouncilSettings.of(panel)
    stage = await open_stage(
        emit, "review", members=panel.member_names, limit=RULES.limit(panel, "review"), block=labels.answers
    )

    async def review_of(member: Member) -> CouncilReview:
        """Call, parse and announce one review as soon as it arrives, so the view shows it live."""
        order = review_order(
            list(labels.authors),
            member.name,
            labels.of_member.get(member.name),
            shuffle=settings.shuffle,
            seed=seed,
            self_review=settings.self_review,
        )
        shown = [labels.canonical[label] for label in order]
        if not order:
            await emit(
                WarningRaised(message="there is no answer but its own to review; no review asked", member=member.name)
            )
            return CouncilReview(reviewer=member.name, evaluation="Review unavailable: no other answers", success=False)
        shown_texts = {labels.key[label]: labels.answers[label] for label in order}
        prompt = review_prompt(question, shown_texts, settings.anonymize)
        task = Task.COUNCIL_REVIEW if settings.anonymize else Task.COUNCIL_REVIEW_NAMED
        reply = await gateway.call(
            member,
            [{"role": "user", "content": prompt}],
            stage="review",
            deadline=stage.deadline,
            brief=RequestBrief(task=task, question=question, quoted=quote(shown_texts)),
        )
        if not reply.ok:
            return CouncilReview(
                reviewer=member.name,
                evaluation=f"Review unavailable: {failure_reason(reply.error_kind, reply.error)}",
                shown=shown,
                success=False,
                duration=reply.latency,
            )
        parsed = parse_ranking(reply.text, labels.known(order))
        await emit(RankingParsed(reviewer=member.name, ranking=parsed.ranking))
        if not has_ranking(reply.text):
            await emit(
                WarningRaised(message="the review has no FINAL RANKING line; its ranking is empty", member=member.name)
            )
        if parsed.dropped:
            await emit(
                WarningRaised(
                    message=f"ranked {_listing(parsed.dropped)}, not among the answers it was shown; dropped",
                    member=member.name,
                )
            )
        if parsed.ranking and len(parsed.ranking) < len(shown):
            await emit(
                WarningRaised(
                    message=f"its ranking lists {len(parsed.ranking)} of the {len(shown)} answers it was shown; the "
                    "others count as unranked",
                    member=member.name,
                )
            )
        return CouncilReview(
            reviewer=member.name,
            evaluation=reply.text.strip(),
            ranking=parsed.ranking,
            shown=shown,
            success=True,
            duration=reply.latency,
        )

    return await gather_each(panel.members, review_of)


def _listing(entries: list[str], limit: int = 5) -> str:
    """`'Model Q', 'Model R'` — at most `limit` of them, so a padded ranking makes a short warning."""
    shown = ", ".join(f"'{entry}'" for entry in entries[:limit])
    return shown + (f" and {len(entries) - limit} more" if len(entries) > limit else "")


def stand_ins(panel: Panel, aggregate: list[RankedMember], answered: dict[str, str]) -> list[Member]:
    """Who writes when the chairman fails, for a panel that named none (its first member stands
    in by default): the members that answered, best ranked first. A chairman the panel named,
    with its backups, is its choice, and no member stands in for it."""
    if panel.chairman is not None:
        return []
    ranked = [entry.name for entry in aggregate if entry.name in answered]
    order = ranked + [name for name in panel.member_names if name in answered and name not in ranked]
    return [panel.member(name) for name in order]


async def council(panel: Panel, question: str, gateway: Gateway, emit: Emit) -> CouncilResult:
    """When the run's budget refuses a call, council skips what is left of the reviews and
    goes to its chairman, who writes from the answers and whatever reviews came in, if the
    chairman's call (or a backup's) still fits; else the top-ranked answer is the final
    answer (`outcome: top_ranked`), or, when no review ranked any, the first answer in member
    order."""
    chairmen = check_council(panel)
    settings = CouncilSettings.of(with_seed(panel))
    seed = settings.seed

    replies = await _answer_stage(panel, question, gateway, emit)
    answered = {reply.member: reply.text.strip() for reply in replies if reply.ok}
    labels = _Labels(panel.member_names, answered, settings.anonymize)
    responses = [
        CouncilResponse(
            name=member.name,
            model=member.model,
            label=labels.of_member.get(member.name),
            text=answered.get(member.name),
            duration=reply.latency,
            success=reply.ok,
            error_kind=reply.error_kind,
            error=reply.error,
        )
        for member, reply in zip(panel.members, replies, strict=True)
    ]
    reviews: list[CouncilReview] = []
    aggregate: list[RankedMember] = []
    synthesis: Synthesis | None = None
    if answered:
        skip = await out_of_budget(
            gateway, emit, "the reviews are skipped and the chairman writes from the answers, if its call fits"
        )
        reviews = [] if skip else await _review_stage(panel, question, labels, seed, gateway, emit)
        aggregate = aggregate_rankings(
            (review.ranking for review in reviews), labels.author_of_canonical, labels.of_member
        )
        await emit(RankingParsed(aggregate=[entry.model_dump() for entry in aggregate]))
        models = {member.name: member.model for member in panel.members}
        prompt = synthesis_prompt(question, labels.answers, labels.authors, models, reviews, aggregate)
        brief = RequestBrief(
            task=Task.COUNCIL_SYNTHESIS,
            question=question,
            quoted=quote({_letter(label): text for label, text in labels.answers.items()}),
            ranking=tuple(_letter(entry.label) for entry in aggregate),
        )
        if not skip:
            await out_of_budget(gateway, emit, "the chairman writes from the reviews that came in, if its call fits")
        synthesis = await synthesis_stage(
            gateway,
            emit,
            chairmen,
            prompt,
            limit=RULES.limit(panel, "synthesis"),
            brief=brief,
            stand_ins=stand_ins(panel, aggregate, answered),
        )
    else:
        await emit(WarningRaised(message="no member answered; the review and synthesis stages are skipped"))

    outcome: Outcome = "no_responses" if synthesis is None else "answered" if synthesis.success else "synthesis_failed"
    bias = bias_report(ReviewFacts(own=labels.own(r.reviewer), shown=r.shown, ranking=r.ranking) for r in reviews)
    answered_text = synthesis.text if synthesis is not None and synthesis.success else None
    if synthesis is not None and not synthesis.success and gateway.budget_exhausted:
        best = aggregate[0].name if aggregate else next(name for name in panel.member_names if name in answered)
        await emit(
            WarningRaised(
                message=f"no chairman's call fit the budget; the top-ranked answer, {best}'s, is the final answer"
            )
        )
        outcome, answered_text = "top_ranked", answered[best]
    return CouncilResult(
        final_answer=answered_text,
        failure_reason=None if answered_text else NO_RESPONSES if synthesis is None else synthesis.text,
        outcome=outcome,
        stage1_responses=responses,
        stage2_reviews=reviews,
        stage3_synthesis=synthesis,
        aggregate_ranking=aggregate,
        top_ranked=aggregate[0].name if aggregate else None,
        labels=labels.authors,
        successful_responses=len(answered),
        member_count=len(panel.members),
        anonymize=settings.anonymize,
        shuffle=settings.shuffle,
        self_review=settings.self_review,
        seed=seed,
        bias=bias,
        confidence=None,
        confidence_basis=NO_CONFIDENCE if answered_text else "there is no answer to be confident of",
    )
