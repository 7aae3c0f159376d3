"""Per protocol, the calls a run makes, stage by stage, at least and at most, with their prompts.

The prompts are the protocols' own, built by the same functions, so what is counted is what a
run sends. A later stage quotes texts nobody has written yet (answers, reviews, deliverables):
its prompt is built with each quoted text empty, and `quoted` adds the most those texts can
hold, the `max_tokens` of the replies they come from (`bound`). Both bounds assume that every
call succeeds: a call that fails can make a run shorter than its low (the member is not asked
again) but never longer than its high.

At least: the run ends as early as its protocol allows (confer and delphi converge at the
first chance, the critic approves at once, the first plan is valid and has one subtask). At
most: every round, every retry a protocol makes of a reply it cannot use, and every backup
chairman. Pure: no litellm, so the counts are tested by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel

from panel_cli.config import Member, Panel
from panel_cli.events import PlannedTask
from panel_cli.protocols.confer import engine as confer
from panel_cli.protocols.council import engine as council
from panel_cli.protocols.council.ranking import RankedMember
from panel_cli.protocols.delphi import engine as delphi
from panel_cli.protocols.ensemble import engine as ensemble
from panel_cli.protocols.orchestrate import engine as orchestrate
from panel_cli.protocols.orchestrate.plan import MAX_TASKS
from panel_cli.protocols.supervise import engine as supervise
from panel_cli.protocols.vote import engine as vote
from panel_cli.protocols.vote.tally import tally

# A member's longest reply, in tokens: what a text it writes can add to a prompt that quotes it.
Bound = Callable[[Member], int]
Messages = list[dict[str, str]]


@dataclass(frozen=True)
class Calls:
    """What one member is asked in one stage: `low` to `high` calls, each sending `prompt`
    (quoted texts empty) or, at the most, `longest` plus `quoted` tokens of quoted text.
    `tools`: a free-text call in which a member with tools may use them."""

    member: Member
    low: int
    high: int
    prompt: Messages
    quoted: int = 0
    longest: Messages | None = None
    schema: type[BaseModel] | None = None
    tools: bool = False


@dataclass(frozen=True)
class StagePlan:
    """One stage: its name, its rounds (`1–3`), and its calls by member. `pooled`: the
    stage's calls in all (low, high) when the run decides who makes them (orchestrate's
    subtasks, which the planner hands out); each member's own `high` is then all of them."""

    name: str
    rounds: str | None
    calls: list[Calls]
    pooled: tuple[int, int] | None = None


@dataclass(frozen=True)
class RunPlan:
    stages: list[StagePlan]
    notes: list[str] = field(default_factory=list)


def user(text: str) -> Messages:
    return [{"role": "user", "content": text}]


def rounds_label(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}–{last}"


def chair_calls(
    chairmen: Sequence[Member], prompt: Messages, quoted: int, longest: Messages | None = None
) -> list[Calls]:
    """The first chairman writes once; each backup writes only when the one before it fails."""
    return [
        Calls(chair, 1 if index == 0 else 0, 1, prompt, quoted=quoted, longest=longest, tools=True)
        for index, chair in enumerate(chairmen)
    ]


def fewest_rounds(panel: Panel) -> int:
    """confer and delphi stop at the earliest after their second round (the same winner twice;
    every expert unchanged, which round 1 cannot be), unless told to run every round."""
    return min(2, panel.max_rounds) if panel.until_convergence else panel.max_rounds


def plan_confer(panel: Panel, question: str, bound: Bound) -> RunPlan:
    members = panel.members
    answer = StagePlan(
        "answer", "0", [Calls(m, 1, 1, user(confer.answer_prompt(question)), tools=True) for m in members]
    )
    authors = confer.assign_labels(panel.member_names, {m.name: "" for m in members})
    block = dict.fromkeys(authors, "")
    own = {name: label for label, name in authors.items()}
    quoted = sum(bound(m) for m in members)
    low, high = fewest_rounds(panel), panel.max_rounds
    votes = [
        Calls(
            m, low, high, user(confer.vote_prompt(question, block, own[m.name])), quoted=quoted, schema=confer.PeerVote
        )
        for m in members
    ]
    return RunPlan([answer, StagePlan("vote", rounds_label(1, high), votes)])


def plan_council(panel: Panel, question: str, bound: Bound) -> RunPlan:
    members = panel.members
    chairmen = council.check_council(panel)
    answer = StagePlan(
        "answer", None, [Calls(m, 1, 1, user(council.answer_prompt(question)), tools=True) for m in members]
    )
    labels = council.assign_labels(panel.member_names, set(panel.member_names))
    by_name = {member.name: member for member in members}
    of_member = {name: label for label, name in labels.items()}
    reviews = []
    for member in members:
        shown = [label for label in labels if panel.self_review or labels[label] != member.name]
        keys = {
            label.removeprefix(f"{council.LABEL_NOUN} ") if panel.anonymize else labels[label]: "" for label in shown
        }
        prompt = user(council.review_prompt(question, keys, panel.anonymize))
        reviews.append(Calls(member, 1, 1, prompt, quoted=sum(bound(by_name[labels[label]]) for label in shown)))
    models = {member.name: member.model for member in members}
    written = [council.CouncilReview(reviewer=m.name, evaluation="", success=True) for m in members]
    aggregate = [
        RankedMember(name=m.name, label=of_member[m.name], average_rank=1.0, count=len(members)) for m in members
    ]
    synthesis = council.synthesis_prompt(question, dict.fromkeys(labels, ""), labels, models, written, aggregate)
    quoted = 2 * sum(bound(m) for m in members)
    stages = [
        answer,
        StagePlan("review", None, reviews),
        StagePlan("synthesis", None, chair_calls(chairmen, user(synthesis), quoted)),
    ]
    return RunPlan(stages)


def plan_ensemble(panel: Panel, question: str, bound: Bound) -> RunPlan:
    members = panel.members
    chosen = ensemble.plan_ensemble(panel)
    stages = [
        StagePlan("answer", None, [Calls(m, 1, 1, user(council.answer_prompt(question)), tools=True) for m in members])
    ]
    notes = []
    if chosen.mode == "race":
        notes.append(
            "race: every member is asked at once; the calls cancelled when the first answers may still be billed in part."
        )
    if chosen.judge is not None:
        prompt = user(ensemble.judge_prompt(question, ""))
        judged = Calls(
            chosen.judge,
            len(members),
            len(members),
            prompt,
            quoted=max(bound(m) for m in members),
            schema=ensemble.JudgeScore,
        )
        stages.append(StagePlan("judge", None, [judged]))
    if chosen.aggregator is not None:
        prompt = user(ensemble.aggregate_prompt(question, [""] * len(members)))
        written = Calls(chosen.aggregator, 1, 1, prompt, quoted=sum(bound(m) for m in members), tools=True)
        stages.append(StagePlan("synthesis", None, [written]))
    return RunPlan(stages, notes)


def plan_vote(panel: Panel, question: str, bound: Bound) -> RunPlan:
    protocol = "decide" if panel.protocol == "decide" else "vote"
    chosen = vote.plan_vote(panel, protocol)
    prompt = user(vote.ballot_prompt(question, chosen.options))
    stages = [StagePlan("vote", None, [Calls(m, 1, 1, prompt, schema=vote.BallotReply) for m in panel.members])]
    if chosen.leader is not None:
        counted = tally([], chosen.options, chosen.method, threshold=chosen.threshold, quorum=chosen.quorum)
        asked = user(vote.leader_prompt(question, chosen.options, counted))
        stages.append(StagePlan("leader", None, [Calls(chosen.leader, 0, 1, asked, schema=vote.BallotReply)]))
    return RunPlan(stages)


def plan_delphi(panel: Panel, question: str, bound: Bound) -> RunPlan:
    members = panel.members
    chairmen = delphi.check_delphi(panel)
    labels = delphi.expert_labels(panel.member_names)
    first = user(delphi.first_prompt(question, len(members)))
    stages = [StagePlan(delphi.STAGE, "1", [Calls(m, 1, 1, first, tools=True) for m in members])]
    fewest, most = fewest_rounds(panel), panel.max_rounds
    if most > 1:
        block = dict.fromkeys(labels.values(), "")
        quoted = sum(bound(m) for m in members)
        later = [
            Calls(
                m,
                fewest - 1,
                most - 1,
                user(delphi.revision_prompt(question, 2, most, block, labels[m.name])),
                quoted=quoted,
                schema=delphi.Revision,
            )
            for m in members
        ]
        stages.append(StagePlan(delphi.STAGE, rounds_label(2, most), later))

    def transcript(count: int) -> Messages:
        rounds = [
            delphi.DelphiRound(
                index=index,
                contributions=[
                    delphi.Contribution(expert=m.name, label=labels[m.name], round=index, analysis="", success=True)
                    for m in members
                ],
                unchanged=False,
            )
            for index in range(1, count + 1)
        ]
        return user(delphi.synthesis_prompt(question, rounds, converged=count < most))

    quoted = most * sum(bound(m) for m in members)
    stages.append(StagePlan("synthesis", None, chair_calls(chairmen, transcript(fewest), quoted, transcript(most))))
    return RunPlan(stages)


def plan_supervise(panel: Panel, question: str, bound: Bound) -> RunPlan:
    team = supervise.plan_supervision(panel)
    workers, critic, corrections = team.workers, team.critic, team.corrections
    stages = [
        StagePlan("work", "1", [Calls(w, 1, 1, user(supervise.work_prompt(question, w)), tools=True) for w in workers])
    ]
    empty = {w.name: "" for w in workers}
    delivered = sum(bound(w) for w in workers)
    reviews = corrections + 1
    first = user(supervise.critic_prompt(question, workers, empty, 1, reviews, {}))
    # The longest critique: the last round's, with the feedback before it, asked once more
    # after a reply that could not be used.
    last = user(supervise.critic_prompt(question, workers, empty, reviews, reviews, empty if corrections else {}))
    longest = [
        *last,
        {"role": "assistant", "content": ""},
        *user(supervise.retry_prompt("its verdict could not be read")),
    ]
    quoted = delivered + (2 if corrections else 1) * bound(critic)
    critique = Calls(critic, 1, 2 * reviews, first, quoted=quoted, longest=longest, schema=supervise.CriticVerdict)
    stages.append(StagePlan("critique", rounds_label(1, reviews), [critique]))
    if corrections:

        def conversation(worker: Member, count: int) -> Messages:
            """A worker's own conversation at its `count`th correction: every earlier message kept."""
            messages = user(supervise.work_prompt(question, worker))
            for index in range(2, count + 2):
                messages += [
                    {"role": "assistant", "content": ""},
                    *user(supervise.correction_prompt(worker.name, "", index)),
                ]
            return messages

        fixes = [
            Calls(
                w,
                0,
                corrections,
                conversation(w, 1),
                quoted=corrections * (bound(w) + bound(critic)),
                longest=conversation(w, corrections),
                tools=True,
            )
            for w in workers
        ]
        stages.append(StagePlan("correction", rounds_label(2, reviews), fixes))
    approved = supervise.Review(round=1, critic=critic.name, verdict="APPROVED", attempts=1)
    rejected = supervise.Review(
        round=reviews, critic=critic.name, verdict="REJECTED", feedback=empty, rejected=list(empty), attempts=1
    )
    prompt = user(supervise.synthesis_prompt(question, workers, empty, approved, 0))
    longest = user(supervise.synthesis_prompt(question, workers, empty, rejected, corrections))
    stages.append(StagePlan("synthesis", None, chair_calls(team.chairmen, prompt, delivered + bound(critic), longest)))
    return RunPlan(stages)


def plan_orchestrate(panel: Panel, question: str, bound: Bound) -> RunPlan:
    team = orchestrate.team_of(panel)
    planner, workers = team.planner, team.workers
    opening = user(orchestrate.plan_prompt(question, workers))
    replan = [
        *opening,
        {"role": "assistant", "content": ""},
        *user(orchestrate.replan_prompt("the plan could not be read")),
    ]
    planned = Calls(
        planner,
        1,
        panel.max_plan_attempts,
        opening,
        quoted=bound(planner),
        longest=replan,
        schema=orchestrate.PlanShape,
    )
    stages = [StagePlan("plan", rounds_label(1, panel.max_plan_attempts), [planned])]
    # At most, a subtask builds on every other one, and its title and description take up the
    # whole plan: a loose bound, which the model's context window caps.
    others = [f"t{index}" for index in range(2, MAX_TASKS + 1)]
    widest = max(bound(w) for w in workers)
    subtasks = []
    for worker in workers:
        alone = PlannedTask(task_id="t1", worker=worker.name)
        prompt = user(orchestrate.task_prompt(question, alone, {}, {}))
        built_on = PlannedTask(task_id="t1", worker=worker.name, depends_on=others)
        longest = user(
            orchestrate.task_prompt(question, built_on, dict.fromkeys(others, ""), {task: task for task in others})
        )
        quoted = bound(planner) + len(others) * widest
        subtasks.append(Calls(worker, 0, MAX_TASKS, prompt, quoted=quoted, longest=longest, tools=True))
    stages.append(StagePlan(orchestrate.SUBTASK_STAGE, None, subtasks, pooled=(1, MAX_TASKS)))

    def records(count: int) -> Messages:
        done = [
            orchestrate.TaskRecord(
                id=f"t{index}", worker=workers[0].name, title="", depends_on=[], status="succeeded", output=""
            )
            for index in range(1, count + 1)
        ]
        return user(orchestrate.synthesis_prompt(question, done))

    stages.append(
        StagePlan("synthesis", None, chair_calls(team.chairmen, records(1), MAX_TASKS * widest, records(MAX_TASKS)))
    )
    notes = [
        f"The planner decides how many subtasks there are (1 to {MAX_TASKS}) and which worker does each: "
        "a worker's high is what it would cost if every subtask were its own."
    ]
    return RunPlan(stages, notes)


PLANS: dict[str, Callable[[Panel, str, Bound], RunPlan]] = {
    "confer": plan_confer,
    "council": plan_council,
    "ensemble": plan_ensemble,
    "vote": plan_vote,
    "decide": plan_vote,
    "delphi": plan_delphi,
    "supervise": plan_supervise,
    "orchestrate": plan_orchestrate,
}


def plan_run(panel: Panel, question: str, bound: Bound) -> RunPlan:
    """The calls a run of `panel` on `question` makes, by its protocol."""
    return PLANS[panel.protocol](panel, question, bound)
