"""What an eval produces, and the arithmetic from graded runs to scores: accuracy with its
Wilson interval, totals, the paired comparison with the baseline in plain words, and the
theory line for a panel of simulated voters. Pure: tested by hand, no run needed."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from panel_cli.config import Panel
from panel_cli.eval.grading import Grade
from panel_cli.eval.stats import ALPHA, jury_probability, mcnemar_exact, wilson_interval
from panel_cli.llm.demo import oracle_accuracy

BASELINE = "baseline"


class ItemResult(BaseModel):
    """One question through one system: its stored run, its answer, its grade and its cost.
    `error` says why a run failed outright (graded wrong); `judge_*` is what grading it cost."""

    system: str
    question_id: str
    run_id: str
    final_answer: str | None
    grade: Grade
    calls: int
    tokens: int | None
    cost: float | None
    duration_s: float
    error: str | None = None
    judge_tokens: int | None = None
    judge_cost: float | None = None

    @property
    def correct(self) -> bool:
        return self.grade.correct


class SystemScore(BaseModel):
    """A system's score over the dataset. `answered`: runs that reached an answer; `failed`:
    runs that failed outright. Tokens and cost are None when no call reported them (unknown,
    never free); `simulated`: every member is a demo persona, so the cost is nothing.
    `wall_time_s`: the whole dataset at the eval's concurrency, a judge's grading included."""

    system: str
    protocol: str
    members: list[str]
    questions: int
    correct: int
    accuracy: float
    ci_low: float
    ci_high: float
    answered: int
    failed: int
    calls: int
    tokens: int | None
    cost: float | None
    wall_time_s: float
    simulated: bool = False
    judge_tokens: int | None = None
    judge_cost: float | None = None


class Comparison(BaseModel):
    """A system against the baseline on the same questions (McNemar's exact test):
    `only_system` questions only it got right, `only_baseline` only the baseline did."""

    system: str
    difference: float
    only_system: int
    only_baseline: int
    p_value: float
    significant: bool
    verdict: str


class JuryTheory(BaseModel):
    """The Condorcet jury theorem's line for a panel of simulated voters of one accuracy: a
    strict majority of `voters` independent voters, each right with probability `p`, is right
    with probability `accuracy`."""

    voters: int
    p: float
    accuracy: float


class EvalResult(BaseModel):
    eval_id: str
    dataset: str
    questions: int
    panel: str
    baseline: str
    grader: str
    seed: int
    concurrency: int
    systems: list[SystemScore]
    comparisons: list[Comparison]
    theory: JuryTheory | None
    items: list[ItemResult]


def _total(values: Sequence[int | None]) -> int | None:
    known = [value for value in values if value is not None]
    return sum(known) if known else None


def _money(values: Sequence[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return sum(known) if known else None


def score_system(
    system: str,
    protocol: str,
    members: list[str],
    results: Sequence[ItemResult],
    wall_time_s: float,
    *,
    simulated: bool = False,
) -> SystemScore:
    correct = sum(result.correct for result in results)
    low, high = wilson_interval(correct, len(results))
    return SystemScore(
        system=system,
        protocol=protocol,
        members=members,
        questions=len(results),
        correct=correct,
        accuracy=correct / len(results) if results else 0.0,
        ci_low=low,
        ci_high=high,
        answered=sum(result.final_answer is not None for result in results),
        failed=sum(result.error is not None for result in results),
        calls=sum(result.calls for result in results),
        tokens=_total([result.tokens for result in results]),
        cost=_money([result.cost for result in results]),
        wall_time_s=round(wall_time_s, 3),
        simulated=simulated,
        judge_tokens=_total([result.judge_tokens for result in results]),
        judge_cost=_money([result.judge_cost for result in results]),
    )


def describe_p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}"


def compare(system: str, results: Sequence[ItemResult], baseline: Sequence[ItemResult]) -> Comparison:
    """Pair a system's grades with the baseline's, question by question, and say in words
    whether the difference could be chance."""
    base = {result.question_id: result.correct for result in baseline}
    paired = [(result.correct, base[result.question_id]) for result in results if result.question_id in base]
    only_system = sum(mine and not theirs for mine, theirs in paired)
    only_baseline = sum(theirs and not mine for mine, theirs in paired)
    p = mcnemar_exact(only_system, only_baseline)
    difference = (only_system - only_baseline) / len(paired) if paired else 0.0
    split = f"{only_system} right only with {system}, {only_baseline} only with the baseline"
    if only_system + only_baseline == 0:
        verdict = f"no difference to test: {system} and the baseline were right on exactly the same questions."
    elif p < ALPHA:
        better = "better" if only_system > only_baseline else "worse"
        verdict = f"significant ({describe_p(p)}): {system} is {better} than the baseline on these questions ({split})."
    elif only_system == only_baseline:
        verdict = f"not significant ({describe_p(p)}): no difference ({split})."
    else:
        edge = "edge" if only_system > only_baseline else "deficit"
        verdict = f"not significant ({describe_p(p)}): {system}'s {edge} of {difference * 100:+.1f} points could be chance ({split})."
    return Comparison(
        system=system,
        difference=difference,
        only_system=only_system,
        only_baseline=only_baseline,
        p_value=p,
        significant=p < ALPHA,
        verdict=verdict,
    )


def jury_theory(panel: Panel) -> JuryTheory | None:
    """The theory line when every member is a simulated voter of one accuracy, else None."""
    accuracies = {
        oracle_accuracy(member.model.removeprefix("demo/")) if member.model.startswith("demo/") else None
        for member in panel.members
    }
    if len(accuracies) != 1:
        return None
    p = accuracies.pop()
    if p is None:
        return None
    return JuryTheory(voters=len(panel.members), p=p, accuracy=jury_probability(len(panel.members), p))
