"""How a protocol says which calls a run makes, stage by stage, at least and at most, with their
prompts: the vocabulary of each protocol's own plan (`panel_cli.protocols.<name>.estimate`),
which `panel_cli.estimate` counts and prices.

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
from panel_cli.errors import UserError
from panel_cli.protocols.registry import is_builtin, part_of, spec

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


# A protocol's plan (`panel_cli.protocols.<name>.estimate.plan_calls`).
PlanFunction = Callable[[Panel, str, Bound], RunPlan]


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


def fewest_rounds(most: int, until_convergence: bool) -> int:
    """confer and delphi stop at the earliest after their second round (the same winner twice;
    every expert unchanged, which round 1 cannot be), unless told to run every round."""
    return min(2, most) if until_convergence else most


def plan_run(panel: Panel, question: str, bound: Bound) -> RunPlan:
    """The calls a run of `panel` on `question` makes, by its protocol's own plan (its spec's
    `plan`: `panel_cli.protocols.<name>.estimate`)."""
    plan = plan_of(panel.protocol)
    if plan is None:
        raise UserError(f"{panel.protocol} has no estimate of its calls; run it with --max-calls to bound them.")
    return plan(panel, question, bound)


def plan_of(name: str) -> PlanFunction | None:
    """The plan of the protocol called `name` (`panel_cli.protocols.registry`); None for one
    registered from Python without a plan, which has no estimate."""
    if spec(name).plan is None and not is_builtin(name):
        return None
    plan: PlanFunction = part_of(spec(name), "plan", "estimate:plan_calls")
    return plan
