"""delphi (docs/protocols.md#delphi): rounds of anonymous expert contributions, then a synthesis.

Round 1: each expert answers independently. Round k: each sees every expert's round k−1
contribution, labelled `Expert A`, `Expert B`, … (never a name or a model), and revises its
analysis, saying whether it changed. The rounds stop early when every expert that could
answer reports no change. A chairman then writes the synthesis: points of consensus, points
of divergence, and what to do.

The prompts and the reading of a contribution are pure and sit at the top; the engine below
only gathers calls and emits events.
"""

from __future__ import annotations

import functools
from typing import ClassVar, TypedDict

from pydantic import BaseModel, Field

from panel_cli.config import Member, Panel
from panel_cli.errors import UserError
from panel_cli.events import ContributionMade, DelphiRoundEnded, WarningRaised
from panel_cli.llm.brief import Quoted, RequestBrief, quote
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
from panel_cli.protocols.delphi.settings import DelphiSettings
from panel_cli.protocols.stages import (
    Synthesis,
    failure_reason,
    gather_each,
    open_stage,
    out_of_budget,
    synthesis_stage,
)
from panel_cli.tasks import Task, mark, render_labelled

# A Delphi panel is 2 to 5 experts; more still run, with a warning (docs/protocols.md#delphi).
MIN_EXPERTS = 2
MAX_EXPERTS = 5
STAGE = "contribution"
NOUN = "Expert"
NO_CONTRIBUTIONS = "Delphi failed: no expert contributed"


class Revision(BaseModel):
    """The structured reply asked of each expert from round 2 on. A reply holding two that
    differ holds two contributions (`panel_cli.llm.structured`)."""

    decisive: ClassVar[tuple[str, ...]] = ("analysis", "changed")

    analysis: str = Field(description="your complete analysis for this round")
    changed: bool = Field(
        description="false only if your analysis is unchanged in substance since your previous contribution"
    )


class Contribution(BaseModel):
    """One expert's part in one round, or why it has none. `changed` is None in round 1 (there
    is nothing to change from) and for a missing contribution. `structured` is False when
    the reply was not the object asked for: its text then counts as the analysis, changed."""

    expert: str
    label: str
    round: int
    analysis: str | None = None
    changed: bool | None = None
    structured: bool = True
    success: bool
    error_kind: str | None = None
    error: str | None = None
    duration: float = 0.0


class _Answered(TypedDict):
    """The fields every contribution read from a successful reply has."""

    expert: str
    label: str
    round: int
    success: bool
    duration: float


class DelphiRound(BaseModel):
    """One round. `unchanged`: every expert that could answer contributed and reported no change."""

    index: int
    contributions: list[Contribution]
    unchanged: bool


class DelphiResult(ProtocolResult):
    experts: list[str]
    labels: dict[str, str] = Field(description="label -> expert, in member order")
    rounds: list[DelphiRound]
    max_rounds: int
    converged: bool = Field(description="the last round was one in which every expert reported no change")
    stopped_early: bool = Field(description="the rounds stopped before max_rounds because nothing changed any more")
    synthesis: Synthesis | None


def check_delphi(panel: Panel) -> list[Member]:
    """The chairmen to try, in order, once the panel is known to be a runnable Delphi panel."""
    if len(panel.members) < MIN_EXPERTS:
        raise UserError(
            f"A Delphi panel needs at least {MIN_EXPERTS} experts; panel '{panel.name}' has {len(panel.members)}."
        )
    return panel.chairmen()


def _delphi_findings(panel: Panel) -> list[Finding]:
    check_delphi(panel)
    if len(panel.members) > MAX_EXPERTS:
        return [
            (
                ("members",),
                f"delphi is designed for {MIN_EXPERTS} to {MAX_EXPERTS} experts; {len(panel.members)} make every round's prompt long",
            )
        ]
    return []


def _delphi_settings(panel: Panel) -> list[tuple[str, str]]:
    settings = DelphiSettings.of(panel)
    return [
        chairman_setting(panel, panel.chairmen()),
        ("max_rounds", str(settings.max_rounds)),
        ("until_convergence", yes_no(settings.until_convergence) + " (stop when every expert reports no change)"),
    ]


RULES = ProtocolRules(
    fields=frozenset({"chairman"}),
    # `answer` limits each round's contributions, `synthesis` the chairman.
    timeouts={"answer": DEFAULT_STAGE_TIMEOUT, "synthesis": DEFAULT_SYNTHESIS_TIMEOUT},
    check=_delphi_findings,
    settings=_delphi_settings,
    headline=("chairman",),
)


def expert_labels(names: list[str]) -> dict[str, str]:
    """expert -> label, in member order, fixed for the whole run so `Expert B` in round 3 is
    the `Expert B` of round 2."""
    return dict(zip(names, labels_for(len(names)), strict=True))


def first_prompt(question: str, experts: int) -> str:
    return mark(
        f"Question:\n{question}\n\n"
        f"You are one of {experts} experts on a Delphi panel. Each expert first answers on its own; in later rounds "
        "you will see the others' contributions, without their authors' names, and may revise yours.\n\n"
        "Give your own analysis of the question: your reasoning, your recommendation, and what it depends on.",
        Task.ANSWER,
    )


def revision_prompt(
    question: str, round_index: int, max_rounds: int, block: dict[str, str], own_label: str | None
) -> str:
    """Round k: the question and the round k−1 block, labelled, with no name or model in it."""
    previous = round_index - 1
    own = (
        f"Your own contribution in round {previous} is Expert {own_label}."
        if own_label
        else f"You gave no contribution in round {previous}."
    )
    return mark(
        f"Question:\n{question}\n\n"
        f"You are an expert on a Delphi panel; this is round {round_index} of at most {max_rounds}. The experts' "
        f"contributions from round {previous} follow, labelled; their authors are not named.\n\n"
        f"{render_labelled(block, NOUN)}\n\n{own}\n"
        "Revise your analysis in the light of the others': keep what still holds, take up the points that convince you, "
        "and say where you still disagree and why. Give your complete revised analysis, and set changed to false only if "
        "it is unchanged in substance since your previous contribution.",
        Task.DELPHI_CONTRIBUTION,
    )


def synthesis_prompt(question: str, rounds: list[DelphiRound], converged: bool) -> str:
    """The whole transcript, every round, each contribution under its expert's letter and round."""
    transcript = {
        f"{entry.label} (round {entry.round})": entry.analysis
        for delphi_round in rounds
        for entry in delphi_round.contributions
        if entry.analysis is not None
    }
    ending = (
        f"In round {rounds[-1].index} every expert reported no change, so the panel stopped there."
        if converged
        else f"The panel ran {len(rounds)} round{'s' if len(rounds) != 1 else ''}."
    )
    return mark(
        f"Question:\n{question}\n\n"
        "You synthesise a Delphi panel. Its experts answered the question independently, then revised their analyses "
        "round after round, each seeing the others' previous contributions without their names. The whole transcript "
        f"follows; each contribution is labelled by its expert's letter and its round. {ending}\n\n"
        f"{render_labelled(transcript, NOUN)}\n\n"
        "Write an actionable synthesis for the person who asked, in three parts:\n"
        "## Points of consensus: what the experts came to agree on.\n"
        "## Points of divergence: where they still disagree, and why.\n"
        "## Recommendation: what to do, given both.",
        Task.DELPHI_SYNTHESIS,
    )


def read_contribution(
    expert: str, label: str, round_index: int, reply: CallResult, had_previous: bool
) -> tuple[Contribution, str | None]:
    """A successful reply as a contribution, and the warning to record if it was not the
    structured object asked for. Round 1 is free text; later, a reply that is not a revision
    still counts, changed, so one bad JSON never empties a row. An expert that had no
    contribution in the round before cannot be unchanged."""
    base: _Answered = {
        "expert": expert,
        "label": label,
        "round": round_index,
        "success": True,
        "duration": reply.latency,
    }
    if round_index == 1:
        return Contribution(**base, analysis=reply.text.strip()), None
    parsed = reply.parsed
    if parsed is not None and str(parsed["analysis"]).strip():
        changed = bool(parsed["changed"]) or not had_previous
        return Contribution(**base, analysis=str(parsed["analysis"]).strip(), changed=changed), None
    problem = reply.parse_error or "an empty analysis"
    warning = (
        f"gave no structured contribution in round {round_index} ({problem}); its reply counts as its analysis, changed"
    )
    return Contribution(**base, analysis=reply.text.strip(), changed=True, structured=False), warning


def round_unchanged(contributions: list[Contribution], excluded: set[str]) -> bool:
    """Nothing changed any more: at least one contribution, none changed, and every expert
    that could still answer did (a timeout may hide a change; a member excluded for good
    never answers again and does not hold the panel back)."""
    given = [entry for entry in contributions if entry.success]
    if not given or any(entry.changed is not False for entry in given):
        return False
    return all(entry.success or entry.expert in excluded for entry in contributions)


async def _contribute(
    gateway: Gateway,
    emit: Emit,
    member: Member,
    *,
    question: str,
    round_index: int,
    max_rounds: int,
    labels: dict[str, str],
    block: dict[str, str],
    contributed_before: set[str],
    deadline: float | None,
) -> Contribution:
    """Ask, read and announce one contribution as soon as it arrives, so the view shows it live."""
    label = labels[member.name]
    had_previous = member.name in contributed_before
    if round_index == 1:
        prompt, schema = first_prompt(question, len(labels)), None
        brief = RequestBrief(task=Task.ANSWER, question=question)
    else:
        own = label if had_previous else None
        prompt, schema = revision_prompt(question, round_index, max_rounds, block, own), Revision
        brief = RequestBrief(task=Task.DELPHI_CONTRIBUTION, question=question, quoted=quote(block), own=own)
    reply = await gateway.call(
        member,
        [{"role": "user", "content": prompt}],
        stage=STAGE,
        round=round_index,
        deadline=deadline,
        schema=schema,
        tools=schema is None,
        brief=brief,
    )
    if not reply.ok:
        if not reply.skipped:
            reason = failure_reason(reply.error_kind, reply.error)
            await emit(
                WarningRaised(
                    message=f"no contribution in round {round_index} ({reason}); the round goes on without it",
                    member=member.name,
                )
            )
        return Contribution(
            expert=member.name,
            label=label,
            round=round_index,
            success=False,
            error_kind=reply.error_kind,
            error=reply.error,
            duration=reply.latency,
        )
    contribution, warning = read_contribution(member.name, label, round_index, reply, had_previous)
    if warning:
        await emit(WarningRaised(message=warning, member=member.name))
    await emit(
        ContributionMade(
            round=round_index,
            expert=member.name,
            label=label,
            analysis=contribution.analysis or "",
            changed=contribution.changed,
            structured=contribution.structured,
        )
    )
    return contribution


def latest_analyses(rounds: list[DelphiRound]) -> str | None:
    """The latest round's analyses, each under its expert's name: what a delphi has when no
    chairman can write (the budget ran out), or None when no expert ever contributed."""
    for delphi_round in reversed(rounds):
        given = [entry for entry in delphi_round.contributions if entry.success]
        if given:
            return "\n\n".join(f"### {entry.expert}\n\n{entry.analysis or ''}" for entry in given)
    return None


def stand_ins(panel: Panel, last: DelphiRound) -> list[Member]:
    """Who writes when the chairman fails, for a panel that named none (its first expert stands
    in by default): the experts that contributed to the last round, in order. A chairman the
    panel named, with its backups, is its choice, and no expert stands in for it."""
    if panel.chairman is not None:
        return []
    wrote = {entry.expert for entry in last.contributions if entry.success}
    return [member for member in panel.members if member.name in wrote]


async def delphi(panel: Panel, question: str, gateway: Gateway, emit: Emit) -> DelphiResult:
    """When the run's budget refuses a call, the rounds stop after the one it cut short
    (whose contributions count), and the chairman writes from the rounds held if its call
    (or a backup's) still fits; else the final answer is the latest round's analyses, each
    under its expert's name."""
    chairmen = check_delphi(panel)
    settings = DelphiSettings.of(panel)
    experts = panel.members
    labels = expert_labels(panel.member_names)
    limit = RULES.limit(panel, "answer")
    rounds: list[DelphiRound] = []
    previous: dict[str, str] = {}  # expert -> its contribution of the round before

    for index in range(1, settings.max_rounds + 1):
        block = {labels[name]: text for name, text in previous.items()}
        stage = await open_stage(emit, STAGE, members=panel.member_names, limit=limit, round=index, block=block)
        contribute = functools.partial(
            _contribute,
            gateway,
            emit,
            question=question,
            round_index=index,
            max_rounds=settings.max_rounds,
            labels=labels,
            block=block,
            contributed_before=set(previous),
            deadline=stage.deadline,
        )
        contributions = await gather_each(experts, contribute)
        given = [entry for entry in contributions if entry.success]
        unchanged = round_unchanged(contributions, set(gateway.excluded))
        rounds.append(DelphiRound(index=index, contributions=contributions, unchanged=unchanged))
        last = index == settings.max_rounds
        cut = gateway.budget_exhausted
        early = not last and (not given or (settings.until_convergence and unchanged) or cut)
        await emit(
            DelphiRoundEnded(
                round=index, experts=len(experts), contributed=len(given), unchanged=unchanged, early_stop=early
            )
        )
        if not given:
            if index > 1:
                await emit(WarningRaised(message=f"no expert contributed in round {index}; the rounds stop here"))
            break
        if cut and not last and await out_of_budget(gateway, emit, f"the rounds stop after round {index}"):
            break
        if early:
            break
        previous = {entry.expert: entry.analysis or "" for entry in given}

    contributed = [
        delphi_round for delphi_round in rounds if any(entry.success for entry in delphi_round.contributions)
    ]
    converged = bool(rounds) and rounds[-1].unchanged
    synthesis: Synthesis | None = None
    if contributed:
        transcript = tuple(
            Quoted(label=entry.label, text=entry.analysis, round=entry.round)
            for delphi_round in contributed
            for entry in delphi_round.contributions
            if entry.analysis is not None
        )
        synthesis = await synthesis_stage(
            gateway,
            emit,
            chairmen,
            synthesis_prompt(question, contributed, converged),
            limit=RULES.limit(panel, "synthesis"),
            brief=RequestBrief(task=Task.DELPHI_SYNTHESIS, question=question, quoted=transcript),
            stand_ins=stand_ins(panel, contributed[-1]),
        )
    else:
        await emit(WarningRaised(message="no expert contributed; the synthesis is skipped"))
    answer = synthesis.text if synthesis is not None and synthesis.success else None
    if synthesis is not None and not synthesis.success and gateway.budget_exhausted:
        answer = latest_analyses(rounds)
        await emit(
            WarningRaised(message="no chairman's call fit the budget; the latest round's analyses are the final answer")
        )
    return DelphiResult(
        final_answer=answer,
        failure_reason=None if answer else NO_CONTRIBUTIONS if synthesis is None else synthesis.text,
        experts=panel.member_names,
        labels={label: name for name, label in labels.items()},
        rounds=rounds,
        max_rounds=settings.max_rounds,
        converged=converged,
        stopped_early=converged and settings.until_convergence and len(rounds) < settings.max_rounds,
        synthesis=synthesis,
    )
