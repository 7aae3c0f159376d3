"""What an eval produces, and the arithmetic from graded runs to scores: accuracy with its
Wilson interval, totals, the paired comparison with the baseline in plain words, and each
system's theory line when its voters are simulated. Pure: tested by hand, no run needed."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from panel_cli.config import Panel
from panel_cli.eval.calibration import Calibration
from panel_cli.eval.confidence import ConfidenceFrom
from panel_cli.eval.datasets import EvalItem
from panel_cli.eval.grading import Grade, JudgeRecord
from panel_cli.eval.reliability import ConfidenceScore, confidence_score
from panel_cli.eval.rules import RuleBuilder, answers_in_turn
from panel_cli.eval.stats import (
    ALPHA,
    holm,
    mcnemar_exact,
    paired_difference_interval,
    standard_errors_apart,
    wilson_interval,
)
from panel_cli.eval.stopped import StopScore, stop_score, theory_stop
from panel_cli.eval.stopping import StoppingTheory, stopping_theory
from panel_cli.eval.theory import Confer, Count, Place, Rule, Theory, herding_in_turn, theory
from panel_cli.models.personas import OracleSpec, oracle_spec
from panel_cli.protocols import registry
from panel_cli.protocols.stopping import ask_order
from panel_cli.protocols.vote.ballots import exact_option
from panel_cli.protocols.vote.methods import WEIGHTED_METHODS
from panel_cli.protocols.vote.settings import VoteSettings
from panel_cli.totals import CostBasis, ledger_cost

BASELINE = "baseline"


class ItemResult(BaseModel):
    """One question through one system: its stored run, its answer, its grade and its cost.
    `error` says why a run failed outright (graded wrong); `judge_*` is what grading it cost.
    `unpriced_models`: the run's models whose calls had no price (its cost is then at least
    `cost`), read again from the run's call rows when the eval is read from the store."""

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
    unpriced_models: list[str] = Field(default_factory=list)
    judge_tokens: int | None = None
    judge_cost: float | None = None
    judge_call: JudgeRecord | None = None
    confidence: float | None = Field(default=None, description="the probability that its answer is right")
    confidence_basis: str | None = Field(default=None, description="what the confidence rests on, or why there is none")
    confidence_from: ConfidenceFrom | None = Field(
        default=None, description="who worked the confidence out: its run (`run`) or the eval from its ballots (`eval`)"
    )

    @property
    def correct(self) -> bool:
        return self.grade.correct


class SystemScore(BaseModel):
    """A system's score over the dataset. `answered`: runs that reached an answer; `failed`:
    runs that failed outright. Tokens and cost are None when no call reported them (unknown,
    never free); `simulated`: every member is a demo persona, so the cost is nothing.
    `cost_basis` and `unpriced_models` say how to read the cost, as every run's do
    (`panel_cli.totals.ledger_cost`): `partial` when some runs had models of no price.
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
    cost_basis: CostBasis = "unknown"
    unpriced_models: list[str] = Field(default_factory=list)
    wall_time_s: float
    simulated: bool = False
    judge_tokens: int | None = None
    judge_cost: float | None = None
    calls_per_correct: float | None = Field(
        default=None, description="calls over correct answers; None with none right"
    )
    cost_per_correct: float | None = Field(default=None, description="cost over correct answers; None when unknown")
    not_measurable: str | None = Field(
        default=None, description="why simulated voters cannot produce this system's answer: then it is not scored"
    )
    unkept_runs: int = Field(
        default=0,
        description="runs paid for whose answers were not graded (in flight when the eval stopped, or failed and "
        "run again on --resume): their calls, tokens and cost are counted above",
    )
    confidence: ConfidenceScore | None = Field(
        default=None, description="how its answers' confidence did: ECE, Brier, the reliability table"
    )
    stopping: StopScore | None = Field(
        default=None,
        description="under a stopping rule: calls per question beside the theory's, stopped answers' accuracy",
    )


class Spent(BaseModel):
    """What runs cost that left no graded item: in flight when an eval stopped (Ctrl-C, a crash),
    or failed outright and run again on `--resume`. Paid for all the same, so counted."""

    runs: int = 0
    calls: int = 0
    tokens: int | None = None
    cost: float | None = None

    def plus(self, calls: int, tokens: int | None, cost: float | None) -> Spent:
        return Spent(
            runs=self.runs + 1,
            calls=self.calls + calls,
            tokens=_total([self.tokens, tokens]),
            cost=_money([self.cost, cost]),
        )


class SystemPlan(BaseModel):
    """A system as planned, before any call: what it is and what its score may mean.
    `models` is every member it may call, by name; `simulated`: all of them are demo
    personas; `not_measurable`: why simulated voters cannot produce its answer (it is then
    run and stored but not scored); `deliberation`: the oracle knobs in play (herd, persuade)."""

    name: str
    protocol: str
    members: list[str]
    models: dict[str, str]
    simulated: bool = False
    not_measurable: str | None = None
    deliberation: str | None = None
    part: Literal["check", "calibration"] = "check"
    stop: str | None = Field(default=None, description="the stopping rule it asked under (`stop:`); None: everyone")


class Comparison(BaseModel):
    """A system against the baseline on the same questions (McNemar's exact test):
    `only_system` questions only it got right, `only_baseline` only the baseline did.
    `p_holm` is `p_value` adjusted for every comparison the eval makes (the same figure as its
    pair's), which `significant` and the verdict read."""

    system: str
    difference: float
    only_system: int
    only_baseline: int
    p_value: float
    p_holm: float | None = None
    significant: bool
    verdict: str


class PairComparison(BaseModel):
    """Two systems on the questions both answered: the paired counts, the difference of
    their accuracies (first − second) with Newcombe's 95% interval, McNemar's exact p-value,
    and that p-value adjusted for every pair of the eval (Holm), which `significant` reads."""

    first: str
    second: str
    questions: int
    both: int
    only_first: int
    only_second: int
    neither: int
    difference: float
    ci_low: float
    ci_high: float
    p_value: float
    p_holm: float
    significant: bool
    verdict: str


class Departure(BaseModel):
    """A measured accuracy against its system's theory line: how many standard errors apart
    (negative: below), whether that is more than `DEPARTS`, and why it may be."""

    system: str
    theory: float
    measured: float
    standard_errors: float
    departs: bool
    verdict: str


class EvalSettings(BaseModel):
    """What a reader needs to repeat the eval: the vote method and tie rule, confer's tally and
    answer order, every member's model and weight (and where the weights came from), the versions, and how
    the questions were chosen (`limit`, `split`). `panel_config` is the panel as it ran
    (secrets redacted), from which `--resume` rebuilds it."""

    protocols: list[str]
    method: str
    tie_break: str | None = None
    tally: str
    answer_order: str = "parallel"
    weights: dict[str, float] = Field(default_factory=dict)
    weights_from: str | None = None
    models: dict[str, str] = Field(default_factory=dict)
    panel_version: str
    litellm_version: str
    python_version: str | None = None
    commit: str | None = Field(default=None, description="the git commit panel ran from, when it ran from a checkout")
    started_at: str | None = Field(default=None, description="ISO-8601 UTC, when the eval began")
    command: list[str] | None = Field(default=None, description="the command line, secrets redacted")
    limit: int | None = None
    split: float | None = None
    calibrate: str | None = None
    grader: str | None = Field(default=None, description="--grader as given (None: auto)")
    panel_config: dict[str, Any] = Field(default_factory=dict)


class EvalResult(BaseModel):
    eval_id: str
    status: Literal["running", "stale", "finished", "interrupted", "failed"] = "finished"
    dataset: str
    dataset_sha256: str = ""
    questions: int
    panel: str
    baseline: str
    grader: str
    seed: int
    concurrency: int
    settings: EvalSettings | None = None
    systems: list[SystemScore] = Field(default_factory=list)
    comparisons: list[Comparison] = Field(default_factory=list)
    pairs: list[PairComparison] = Field(default_factory=list)
    theory: dict[str, Theory] = Field(
        default_factory=dict, description="system -> its theory line, for the systems whose voters are all simulated"
    )
    stopping: dict[str, StoppingTheory] = Field(
        default_factory=dict,
        description="system -> the exact theory of its stopping rule (expected calls, accuracy), simulated voters only",
    )
    departures: list[Departure] = Field(default_factory=list)
    calibration: Calibration | None = None
    plan: list[SystemPlan] = Field(default_factory=list, description="every system as planned, in order")
    wall_times: dict[str, float] = Field(
        default_factory=dict, description="system -> seconds its questions took, summed over every session"
    )
    unkept: dict[str, Spent] = Field(
        default_factory=dict, description="system -> what its runs that left no graded item cost (counted in its score)"
    )
    sessions: int = Field(default=1, description="how many times it ran: 1, and one more for each --resume")
    asked: list[EvalItem] = Field(default_factory=list, description="the questions graded, with their gold answers")
    items: list[ItemResult]

    def scored(self) -> list[SystemScore]:
        """The systems that are scored: those whose answer their voters can produce."""
        return [score for score in self.systems if score.not_measurable is None]


def summarize(result: EvalResult) -> EvalResult:
    """Everything an eval's items decide, computed again from them and its plan: each system's
    score (runs paid for but left ungraded counted in), how its confidence did, the comparisons
    with the baseline, every pair, and the departures from theory. An interrupted eval
    summarizes what it has. The pairs are the checked systems' (the members alone, when the eval
    only calibrated), the systems that are not measurable left out; every comparison with the
    baseline is one of them, so its p-value is adjusted for all of them (Holm) and reads the
    same in both places. Its items come in the plan's order of systems and the order the
    questions were asked, not in the order their runs happened to finish."""
    items = in_order(result)
    by_system: dict[str, list[ItemResult]] = {plan.name: [] for plan in result.plan}
    for item in items:
        by_system.setdefault(item.system, []).append(item)
    scores = []
    for plan in result.plan:
        line = result.theory.get(plan.name)
        score = score_system(
            plan.name,
            plan.protocol,
            plan.members,
            by_system[plan.name],
            result.wall_times.get(plan.name, 0.0),
            simulated=plan.simulated,
            unkept=result.unkept.get(plan.name),
            posterior_brier=line.posterior_brier if line is not None else None,
        )
        stopped = (
            stop_score(
                plan.stop, plan.protocol, len(plan.members), by_system[plan.name], result.stopping.get(plan.name)
            )
            if plan.stop is not None
            else None
        )
        scores.append(score.model_copy(update={"not_measurable": plan.not_measurable, "stopping": stopped}))
    measured = {plan.name for plan in result.plan if plan.not_measurable is None}
    checked = [plan.name for plan in result.plan if plan.part == "check" and plan.name in measured]
    paired = checked or [plan.name for plan in result.plan if plan.name in measured]
    pairs = pair_comparisons({name: by_system[name] for name in paired})
    adjusted = {frozenset((pair.first, pair.second)): pair.p_holm for pair in pairs}
    baseline = by_system.get(BASELINE)
    comparisons = (
        [
            compare(name, by_system[name], baseline, p_holm=adjusted.get(frozenset((BASELINE, name))))
            for name in checked
            if name != BASELINE
        ]
        if baseline
        else []
    )
    knobs = {plan.name: plan.deliberation for plan in result.plan}
    departures = [
        found
        for score in scores
        if score.system in result.theory
        for found in [departure(score, result.theory[score.system], knobs.get(score.system))]
        if found is not None
    ]
    return result.model_copy(
        update={
            "items": items,
            "systems": scores,
            "comparisons": comparisons,
            "pairs": pairs,
            "departures": departures,
        }
    )


def in_order(result: EvalResult) -> list[ItemResult]:
    """The items by system, in the plan's order, then by question, in the order asked; an item
    of neither (from a system or question no longer planned) after the rest, as it came."""
    systems = {plan.name: place for place, plan in enumerate(result.plan)}
    questions = {item.id: place for place, item in enumerate(result.asked)}
    return sorted(
        result.items,
        key=lambda item: (systems.get(item.system, len(systems)), questions.get(item.question_id, len(questions))),
    )


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
    unkept: Spent | None = None,
    posterior_brier: float | None = None,
) -> SystemScore:
    """A system's score from its graded items, with what its ungraded runs cost (`unkept`)
    added to its calls, tokens and cost, and how its confidence did (`posterior_brier`: the
    exact posterior's Brier on simulated voters, to read its Brier against)."""
    spent = unkept or Spent()
    correct = sum(result.correct for result in results)
    low, high = wilson_interval(correct, len(results))
    cost = _money([*(result.cost for result in results), spent.cost])
    calls = sum(result.calls for result in results) + spent.calls
    unpriced = sorted({model for result in results for model in result.unpriced_models})
    basis: CostBasis = "simulated" if simulated else ledger_cost(calls, calls, cost, unpriced)[1]
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
        calls=calls,
        tokens=_total([*(result.tokens for result in results), spent.tokens]),
        cost=cost,
        cost_basis=basis,
        unpriced_models=unpriced,
        wall_time_s=round(wall_time_s, 3),
        simulated=simulated,
        judge_tokens=_total([result.judge_tokens for result in results]),
        judge_cost=_money([result.judge_cost for result in results]),
        calls_per_correct=calls / correct if correct else None,
        cost_per_correct=cost / correct if correct and cost is not None else None,
        unkept_runs=spent.runs,
        confidence=system_confidence(results, posterior_brier),
    )


def system_confidence(results: Sequence[ItemResult], posterior_brier: float | None) -> ConfidenceScore | None:
    """How a system's confidence did over its answered items; None when none of its items says
    anything of confidence (a stored eval older than confidences)."""
    if not any(item.confidence is not None or item.confidence_basis is not None for item in results):
        return None
    pairs = [(item.confidence, item.correct) for item in results if item.confidence is not None]
    bases = {item.confidence_basis for item in results if item.confidence is not None}
    reasons = [item.confidence_basis for item in results if item.confidence is None and item.confidence_basis]
    sources = {item.confidence_from for item in results if item.confidence is not None}
    basis = " / ".join(sorted(found for found in bases if found)) or None
    if basis is not None and sources == {"eval"}:
        basis += " (worked out by the eval from each run's ballots)"
    reason = max(set(reasons), key=reasons.count) if reasons else None
    return confidence_score(
        pairs, len(results) - len(pairs), basis=basis, reason=reason, posterior_brier=posterior_brier if pairs else None
    )


def describe_p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}"


def compare(
    system: str, results: Sequence[ItemResult], baseline: Sequence[ItemResult], *, p_holm: float | None = None
) -> Comparison:
    """Pair a system's grades with the baseline's, question by question, and say in words
    whether the difference could be chance: by McNemar's p-value, or by `p_holm`, the same
    adjusted for every comparison the eval makes, when given."""
    base = {result.question_id: result.correct for result in baseline}
    paired = [(result.correct, base[result.question_id]) for result in results if result.question_id in base]
    only_system = sum(mine and not theirs for mine, theirs in paired)
    only_baseline = sum(theirs and not mine for mine, theirs in paired)
    p = mcnemar_exact(only_system, only_baseline)
    read = p if p_holm is None else p_holm
    shown = describe_p(read) if p_holm is None else f"after Holm, {describe_p(read)}"
    difference = (only_system - only_baseline) / len(paired) if paired else 0.0
    split = f"{only_system} right only with {system}, {only_baseline} only with the baseline"
    if only_system + only_baseline == 0:
        verdict = f"no difference to test: {system} and the baseline were right on exactly the same questions."
    elif read < ALPHA:
        better = "better" if only_system > only_baseline else "worse"
        verdict = f"significant ({shown}): {system} is {better} than the baseline on these questions ({split})."
    elif only_system == only_baseline:
        verdict = f"not significant ({shown}): no difference ({split})."
    else:
        edge = "edge" if only_system > only_baseline else "deficit"
        verdict = (
            f"not significant ({shown}): {system}'s {edge} of {difference * 100:+.1f} points could be chance ({split})."
        )
    return Comparison(
        system=system,
        difference=difference,
        only_system=only_system,
        only_baseline=only_baseline,
        p_value=p,
        p_holm=p_holm,
        significant=read < ALPHA,
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


def system_theory(protocol: str, panel: Panel, places: dict[Place, int] | None) -> Theory | None:
    """The theory line of one system, when everyone it may call is a simulated voter (a real
    model has none); a line without a figure when its rule cannot be computed."""
    specs = [simulated_spec(member.model) for member in panel.callable_members()]
    if not all(spec is not None for spec in specs):
        return None
    voters = [spec for spec in specs[: len(panel.members)] if spec is not None]
    rule = _rule(protocol, panel, voters)
    if rule is None:
        why = registry.spec(protocol).no_theory or f"{protocol}'s answer is not a count of the voters' beliefs"
        return Theory(rule=protocol, accuracy=None, way="none", note=f"no closed form: {why}")
    if places is None:
        note = "no closed form: some questions have no options, so a wrong simulated answer is no option to count"
        return Theory(rule=rule.describe(), accuracy=None, way="none", note=note)
    line = theory(rule, [spec.p for spec in voters], places)
    herding = _herding_in_turn(protocol, panel, voters, rule, places)
    if herding is not None:
        line = line.model_copy(update={"herding": herding})
    return line.model_copy(update=optimum_line(protocol, panel, voters, places))


def system_stopping(protocol: str, panel: Panel, places: dict[Place, int] | None) -> StoppingTheory | None:
    """The exact theory of a system's stopping rule on simulated voters (expected calls and
    accuracy), asking them as the engine does: heaviest weight first; None without a rule,
    without options to count, or when a member is no simulated voter."""
    rule = panel.stop_rule
    specs = [simulated_spec(member.model) for member in panel.callable_members()]
    if rule is None or places is None or not all(spec is not None for spec in specs):
        return None
    voters = [spec for spec in specs[: len(panel.members)] if spec is not None]
    counted = _rule(protocol, panel, voters)
    if counted is None:
        return None
    # vote asks the heaviest weights first, whatever its method counts; confer in member order.
    order = ask_order([member.weight if isinstance(counted, Count) else 1.0 for member in panel.members])
    return stopping_theory(
        counted, [spec.p for spec in voters], places, theory_stop(rule, protocol, panel), order=order
    )


def under_stopping(line: Theory, stopped: StoppingTheory | None) -> Theory:
    """A system's theory line under its stopping rule, whose accuracy is the rule's own:
    `decided` keeps everyone's answer in vote (the same figure), and in confer when the voters
    state one confidence (unequal ones can outweigh the answers' count it stopped on);
    `confident(x)` answers on fewer ballots. Either way the posterior's Brier of everyone's
    ballots is no floor for a confidence worked out from fewer, and is left out."""
    if stopped is None:
        return line
    update: dict[str, Any] = {"posterior_brier": None, "rule": f"{line.rule}; {stopped.stop}"}
    if stopped.accuracy is not None:
        update |= {"accuracy": stopped.accuracy, "way": stopped.way, "standard_error": stopped.standard_error}
        update |= {"samples": stopped.samples}
    return line.model_copy(update=update)


# Stated confidences (or weights) this far from what the accuracy says are miscalibrated.
MISCALIBRATED = 0.005


def optimum_line(protocol: str, panel: Panel, voters: Sequence[OracleSpec], places: dict[Place, int]) -> dict[str, Any]:
    """Beside a rule whose members state confidences (confer) or carry weights (weighted vote)
    that their accuracy does not bear out: the accuracy their votes reach counted at the
    log-odds of that accuracy, the best any count of them can do. Empty when they are right,
    or when the questions have several numbers of options (one weight cannot fit all)."""
    kinds = {options for options, _ in places}
    if len(kinds) != 1:
        return {}
    k = kinds.pop()
    accuracies = [spec.p for spec in voters]
    if any(not 0 < p < 1 for p in accuracies):
        return {}
    best = [math.log((k - 1) * p / (1 - p)) for p in accuracies]
    if protocol == "confer":
        stated = [spec.reported() / 100 for spec in voters]
        if all(abs(said - p) <= MISCALIBRATED for said, p in zip(stated, accuracies, strict=True)):
            return {}
        said = f"these members stated {_listed([f'{value:g}' for value in stated])}"
    elif protocol in ("vote", "decide") and VoteSettings.of(panel).method in WEIGHTED_METHODS:
        weights = [member.weight for member in panel.members]
        if all(abs(weight - ideal) <= MISCALIBRATED for weight, ideal in zip(weights, best, strict=True)):
            return {}
        said = f"these members weigh {_listed([f'{value:.3g}' for value in weights])}"
    else:
        return {}
    # A tie goes to one of the tied: as good as any choice between answers equally likely.
    optimum = theory(Count("weighted_plurality", tuple(best), tie_break="first"), accuracies, places).accuracy
    if optimum is None:
        return {}
    note = (
        f"{said}; their accuracy ({_listed([f'{p:g}' for p in accuracies])}) gives {optimum * 100:.1f}%, "
        "counted at its log-odds log((K − 1)p/(1 − p)) (weighted_plurality, the optimum)"
    )
    return {"optimum": optimum, "optimum_note": note}


def _listed(values: Sequence[str]) -> str:
    """`0.8 each` when all are one value, else the values in member order."""
    return f"{values[0]} each" if len(set(values)) == 1 else ", ".join(values)


def _herding_in_turn(
    protocol: str, panel: Panel, voters: Sequence[OracleSpec], rule: Rule, places: dict[Place, int]
) -> float | None:
    """For confer whose herding voters answer in turn (and none is persuaded, which would move
    the votes too): the exact accuracy with herding as simulated."""
    if not isinstance(rule, Confer) or not answers_in_turn(protocol, panel):
        return None
    if not any(spec.herd for spec in voters) or any(spec.persuade for spec in voters):
        return None
    return herding_in_turn(rule, [spec.herd for spec in voters], [spec.p for spec in voters], places)


def simulated_spec(model: str) -> OracleSpec | None:
    """What a `demo/oracle@p?knobs` member is; None for any other model."""
    return oracle_spec(model.removeprefix("demo/")) if model.startswith("demo/") else None


def _rule(protocol: str, panel: Panel, voters: Sequence[OracleSpec]) -> Rule | None:
    """The counting rule a protocol applies to simulated voters, as the panel configures it:
    by the builder its spec names (`theory`), with the panel as that protocol runs it."""
    builder = registry.spec(protocol).theory
    if builder is None:
        return None
    build: RuleBuilder = registry.resolve(builder)
    return build(panel if panel.protocol == protocol else panel.model_copy(update={"protocol": protocol}), voters)


# Every pair of systems ----------------------------------------------------------------------------


def paired_counts(first: Sequence[ItemResult], second: Sequence[ItemResult]) -> tuple[int, int, int, int]:
    """(both right, only the first, only the second, neither) on the questions both answered."""
    theirs = {result.question_id: result.correct for result in second}
    pairs = [(result.correct, theirs[result.question_id]) for result in first if result.question_id in theirs]
    return (
        sum(mine and other for mine, other in pairs),
        sum(mine and not other for mine, other in pairs),
        sum(other and not mine for mine, other in pairs),
        sum(not mine and not other for mine, other in pairs),
    )


def pair_comparisons(by_system: dict[str, Sequence[ItemResult]]) -> list[PairComparison]:
    """Every pair of the systems given (in their order), with Holm's adjustment over all of them."""
    names = list(by_system)
    pairs = [(first, second) for index, first in enumerate(names) for second in names[index + 1 :]]
    counts = [paired_counts(by_system[first], by_system[second]) for first, second in pairs]
    p_values = [mcnemar_exact(only_first, only_second) for _, only_first, only_second, _ in counts]
    adjusted = holm(p_values)
    compared = []
    for (first, second), (both, only_first, only_second, neither), p, p_holm in zip(
        pairs, counts, p_values, adjusted, strict=True
    ):
        n = both + only_first + only_second + neither
        low, high = paired_difference_interval(both, only_first, only_second, neither)
        difference = (only_first - only_second) / n if n else 0.0
        compared.append(
            PairComparison(
                first=first,
                second=second,
                questions=n,
                both=both,
                only_first=only_first,
                only_second=only_second,
                neither=neither,
                difference=difference,
                ci_low=low,
                ci_high=high,
                p_value=p,
                p_holm=p_holm,
                significant=p_holm < ALPHA,
                verdict=pair_verdict(first, second, difference, (low, high), p_holm, only_first + only_second),
            )
        )
    return compared


def pair_verdict(
    first: str, second: str, difference: float, interval: tuple[float, float], p_holm: float, discordant: int
) -> str:
    spread = f"{difference * 100:+.1f} points (95% CI {interval[0] * 100:+.1f} to {interval[1] * 100:+.1f})"
    if discordant == 0:
        return f"{first} and {second} were right on exactly the same questions."
    if p_holm < ALPHA:
        better, worse = (first, second) if difference > 0 else (second, first)
        return f"{better} beats {worse}: {first} − {second} = {spread}, significant after Holm ({describe_p(p_holm)})."
    return f"{first} − {second} = {spread}: could be chance after Holm ({describe_p(p_holm)})."


# A measured accuracy against its theory line ---------------------------------------------------------

# How many standard errors from its theory line a measured accuracy may fall before the report
# says so: by chance alone, about one system in twenty goes past 2.
DEPARTS = 2.0


def departure(score: SystemScore, line: Theory, deliberation: str | None) -> Departure | None:
    """Where a scored system stands against its own theory line; None without a figure."""
    if line.accuracy is None or score.questions == 0 or score.not_measurable is not None:
        return None
    apart = standard_errors_apart(score.accuracy, line.accuracy, score.questions, line.standard_error)
    departs = abs(apart) > DEPARTS
    where = f"{abs(apart):.1f} standard errors {'below' if apart < 0 else 'above'}"
    figures = f"measured {score.accuracy * 100:.1f}%, theory {line.accuracy * 100:.1f}% for independent voters"
    if not departs:
        verdict = f"within {DEPARTS:g} standard errors of its theory line ({figures})."
    elif deliberation and apart < 0 and "herd" in deliberation:
        verdict = (
            f"{where} its theory line ({figures}): its voters herd ({deliberation}), following the answers "
            "they are shown instead of their own evidence — the cascade."
        )
    elif deliberation and apart > 0 and "persuade" in deliberation:
        verdict = (
            f"{where} its theory line ({figures}): its voters are persuaded by a right answer when they see "
            f"one ({deliberation}), which independent voters never are."
        )
    elif deliberation:
        verdict = f"{where} its theory line ({figures}): its voters deliberate ({deliberation})."
    else:
        verdict = (
            f"{where} its theory line ({figures}): independent voters should land within {DEPARTS:g} "
            "nineteen times in twenty."
        )
    return Departure(
        system=score.system,
        theory=line.accuracy,
        measured=score.accuracy,
        standard_errors=apart,
        departs=departs,
        verdict=verdict,
    )


# What simulated voters cannot play ----------------------------------------------------------------


def not_measurable(protocol: str, panel: Panel) -> str | None:
    """Why this system's answer cannot come from its simulated voters (`demo/oracle@p`), as its
    spec says (`unmeasurable`), or None: it can (its spec says nothing, or its theory has a
    rule for this panel: one member racing alone), or no member is simulated."""
    if not any(simulated_spec(member.model) is not None for member in panel.callable_members()):
        return None
    why = registry.spec(protocol).unmeasurable
    if why is None:
        return None
    voters = [spec for spec in map(simulated_spec, (member.model for member in panel.members)) if spec is not None]
    return None if _rule(protocol, panel, voters) is not None else why


# How a report names confer whose members answer in turn (where herding starts a cascade).
ANSWERING_IN_TURN = "answering in turn, each shown the answers before it"


def deliberation(panel: Panel, protocol: str) -> str | None:
    """The deliberation knobs of the panel's simulated members, `herd=0.5 (v1, v2)`, and for
    confer whose members answer in turn, that they do (herders then follow the first answers:
    the cascade); None without knobs."""
    knobs: dict[str, list[str]] = {}
    for member in panel.members:
        spec = simulated_spec(member.model)
        if spec is not None and spec.deliberates:
            shown = "&".join(part for part in spec.knobs().split("&") if part.startswith(("herd", "persuade")))
            knobs.setdefault(shown, []).append(member.name)
    if not knobs:
        return None
    found = "; ".join(f"{shown} ({', '.join(names)})" for shown, names in knobs.items())
    return f"{found}; {ANSWERING_IN_TURN}" if answers_in_turn(protocol, panel) else found
