"""What an eval produces, and the arithmetic from graded runs to scores: accuracy with its
Wilson interval, totals, the paired comparison with the baseline in plain words, and each
system's theory line when its voters are simulated. Pure: tested by hand, no run needed."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from panel_cli.config import Panel
from panel_cli.eval.datasets import EvalItem
from panel_cli.eval.grading import Grade
from panel_cli.eval.stats import ALPHA, mcnemar_exact, wilson_interval
from panel_cli.eval.theory import Alone, Confer, Council, Count, Place, Rule, Theory, theory
from panel_cli.llm.demo import OracleSpec, oracle_spec
from panel_cli.protocols.vote.engine import exact_option, tie_break_of
from panel_cli.protocols.vote.tally import WEIGHTED_METHODS

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
    theory: dict[str, Theory] = Field(
        default_factory=dict, description="system -> its theory line, for the systems whose voters are all simulated"
    )
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


def gold_places(items: Sequence[EvalItem]) -> dict[Place, int] | None:
    """How many questions have each number of options and gold place; None when some question
    has no options (a simulated voter's wrong answer is then no option, and no rule here
    counts it)."""
    places: dict[Place, int] = {}
    for item in items:
        if not item.options:
            return None
        gold = item.answer if item.answer in item.options else exact_option(item.answer, item.options)
        if gold is None:
            return None
        key = (len(item.options), item.options.index(gold))
        places[key] = places.get(key, 0) + 1
    return places or None


NO_CLOSED_FORM = {
    "delphi": "delphi's answer is a facilitator's summary of revised estimates, not a count of the voters' beliefs",
    "ensemble": "ensemble's answer is a merge or a pick of whole answers, not a count of the voters' beliefs",
    "supervise": "supervise's answer is a worker's draft revised under a critic, not a count of the voters' beliefs",
    "orchestrate": "orchestrate's answer is put together from sub-tasks, not a count of the voters' beliefs",
}


def system_theory(protocol: str, panel: Panel, places: dict[Place, int] | None) -> Theory | None:
    """The theory line of one system, when everyone it may call is a simulated voter (a real
    model has none); a line without a figure when its rule cannot be computed."""
    specs = [simulated_spec(member.model) for member in panel.callable_members()]
    if not all(spec is not None for spec in specs):
        return None
    voters = [spec for spec in specs[: len(panel.members)] if spec is not None]
    rule = _rule(protocol, panel, voters)
    if rule is None:
        why = NO_CLOSED_FORM.get(protocol, f"{protocol}'s answer is not a count of the voters' beliefs")
        return Theory(rule=protocol, accuracy=None, way="none", note=f"no closed form: {why}")
    if places is None:
        note = "no closed form: some questions have no options, so a wrong simulated answer is no option to count"
        return Theory(rule=rule.describe(), accuracy=None, way="none", note=note)
    return theory(rule, [spec.p for spec in voters], places)


def simulated_spec(model: str) -> OracleSpec | None:
    """What a `demo/oracle@p?knobs` member is; None for any other model."""
    return oracle_spec(model.removeprefix("demo/")) if model.startswith("demo/") else None


def _rule(protocol: str, panel: Panel, voters: Sequence[OracleSpec]) -> Rule | None:
    """The counting rule a protocol applies to simulated voters, as the panel configures it."""
    names = panel.member_names
    if protocol == "ensemble" and panel.mode == "race" and len(names) == 1:
        return Alone(0, names[0])
    if protocol == "confer":
        noise = tuple(spec.noise for spec in voters)
        return Confer(panel.tally, tuple(spec.reported() for spec in voters), noise if any(noise) else ())
    if protocol == "council":
        return Council(tuple(names), self_review=panel.self_review, shuffle=panel.shuffle, seed=panel.seed)
    if protocol in ("vote", "decide"):
        weighted = panel.method in WEIGHTED_METHODS
        leader = names.index(panel.leader) if protocol == "decide" and panel.leader in names else None
        return Count(
            panel.method,
            tuple(member.weight if weighted else 1.0 for member in panel.members),
            threshold=panel.threshold,
            tie_break=tie_break_of(panel, protocol),
            leader=leader,
            leader_name=panel.leader or "",
        )
    return None
