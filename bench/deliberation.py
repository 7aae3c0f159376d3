"""The figures of issues 20 and 30, measured through `panel eval`'s own runner: optimal and
calibrated weights (an always-wrong member among them), confer by log-odds, simulated voters
that herd or are persuaded; whether each answer's confidence is a probability (as the engines
report it); what stopping early would save in theory, and what the engines save under `stop:`.

Run by hand (never part of the tests), with the demo personas in-process and no delay:

    PANEL_DEMO_DELAY=0 python bench/deliberation.py [--questions 1000] [--seed 7] [--only herd]

Each row is one eval system on generated four-option questions (the gold option equally often
in each place): its theory line as the eval reports it, the accuracy measured, its binomial
standard error, and whether the issue's check holds. Every run is a real run of the protocol's
engine through the gateway, as `panel eval` makes it (no store: nothing is written). The last
rows check every exact theory line the evals reported against a brute-force enumeration
written here, independently of `panel_cli.eval.theory`: every profile of beliefs, counted by
hand.

Then each system's confidence (the probability its answer is right, worked out from its ballots)
against its answers: the expected calibration error and the Brier score over the exact
posterior's, for the members whose accuracy is known (optimal and calibrated weights, confer by
log-odds with confidences stated at p). Then the theory of stopping early (`stop: decided`), the
issue's figures: expected members asked, one at a time, in waves, in two waves. Then the
engines under `stop:`, each beside the same panel asking everyone on the same questions and seed:
calls per question, and how many answers came out identical (`--only stop-confer`, …); and what
confer's vote rounds buy (persuasion) and cost.

The four 5 × 0.7 confer evals share their questions and seed, so each voter holds the same
first belief in all four: they differ only in whether the voters herd or can be persuaded, and
in whether they answer at once or in turn (`answer_order: sequential`, where herding cascades).
`--only NAME` runs one eval alone (`--only herd`: the cascade).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from itertools import product
from typing import Any

os.environ.setdefault("PANEL_DEMO_DELAY", "0")

from panel_cli.config import Panel  # noqa: E402
from panel_cli.eval.datasets import Dataset, EvalItem  # noqa: E402
from panel_cli.eval.results import EvalResult, SystemScore  # noqa: E402
from panel_cli.eval.runner import plan_eval, run_eval  # noqa: E402
from panel_cli.eval.stopping import Stop, stopping_theory  # noqa: E402
from panel_cli.eval.theory import Confer, Count, theory, uniform_places  # noqa: E402
from panel_cli.protocols.stopping import ask_order  # noqa: E402

OPTIONS = ("alpha", "bravo", "charlie", "delta")
MIXED = (0.9, 0.6, 0.6, 0.6, 0.6)
JURY = (0.7,) * 5
OPTIMUM = 0.928  # the Nitzan–Paroush optimum on 0.9 + 4 × 0.6, four options (theory_table.py)
INDEPENDENT_CONFER = 0.910  # confer's plurality on 5 × 0.7
WRONG = (0.8, 0.7, 0.6, 0.0)  # three members and one always wrong
WRONG_AT_ZERO = 0.852  # weighted_plurality on WRONG, the always-wrong member's weight held at 0
# Issue 30's goals for a confidence whose members' accuracy is known.
ECE_GOAL = 0.03
BRIER_GOAL = 1.1


def dataset(n: int, offset: int = 0) -> Dataset:
    items = [
        EvalItem(
            id=f"q{offset + index}",
            question=f"Generated question {offset + index}: which option is right?",
            answer=OPTIONS[index % 4],
            options=list(OPTIONS),
        )
        for index in range(n)
    ]
    return Dataset(source=f"generated:{n}", items=items, sha256="generated")


def panel(name: str, accuracies: Sequence[float], knobs: str = "", **fields: Any) -> Panel:
    members = [
        {"name": f"v{index}", "model": f"demo/oracle@{p:g}{'?' + knobs if knobs else ''}"}
        for index, p in enumerate(accuracies, start=1)
    ]
    return Panel.model_validate({"name": name, "members": members, **fields})


def optimal_weights(accuracies: Sequence[float]) -> list[float]:
    return [math.log(3 * p / (1 - p)) for p in accuracies]


async def evaluate(
    panel_: Panel, data: Dataset, protocols: str, seed: int, *, calibrate: bool = False, split: float | None = None
) -> EvalResult:
    plan = plan_eval(
        panel_, data, protocols=protocols, baseline=None, grader=None, calibrate=calibrate, split=split, seed=seed
    )
    return await run_eval(plan, store=None, secrets=[], eval_id=f"bench-{panel_.name}", seed=seed, concurrency=8)


def score(result: EvalResult, system: str) -> SystemScore:
    return next(found for found in result.systems if found.system == system)


def standard_error(share: float, n: int) -> float:
    return math.sqrt(share * (1 - share) / n)


# Brute force: every profile of beliefs on four options, each rule counted by hand ---------------


def enumerate_accuracy(accuracies: Sequence[float], answer: Callable[[tuple[int, ...]], int | None]) -> float:
    """Gold is option 0; a voter holds it with its p, else each other option with (1 − p)/3."""
    total = 0.0
    for beliefs in product(range(4), repeat=len(accuracies)):
        chance = math.prod(p if belief == 0 else (1 - p) / 3 for p, belief in zip(accuracies, beliefs, strict=True))
        if answer(beliefs) == 0:
            total += chance
    return total


def most_weight(weights: Sequence[float]) -> Callable[[tuple[int, ...]], int | None]:
    """The option with the most weight; a tie at the top is no winner."""

    def answer(beliefs: tuple[int, ...]) -> int | None:
        sums = [sum(w for w, belief in zip(weights, beliefs, strict=True) if belief == option) for option in range(4)]
        top = max(sums)
        leaders = [option for option in range(4) if math.isclose(sums[option], top, rel_tol=1e-12, abs_tol=1e-12)]
        return leaders[0] if len(leaders) == 1 else None

    return answer


def confer_rule(weights: Sequence[float]) -> Callable[[tuple[int, ...]], int | None]:
    """The most summed weight; a tie to the answer of the earliest member holding a tied one."""

    def answer(beliefs: tuple[int, ...]) -> int | None:
        sums = {
            belief: sum(w for w, held in zip(weights, beliefs, strict=True) if held == belief) for belief in beliefs
        }
        top = max(sums.values())
        return next(belief for belief in beliefs if math.isclose(sums[belief], top, rel_tol=1e-12, abs_tol=1e-12))

    return answer


def in_turn_accuracy(accuracies: Sequence[float], herd: float) -> float:
    """confer's members answering in turn, gold option 0: each after the first, with
    probability `herd`, gives the answer most common among those before it (its own belief
    when that is among them, else the earliest), then a plurality, a tie to the answer given
    first. Every profile of beliefs and herding draws, counted by hand."""
    total = 0.0
    for beliefs in product(range(4), repeat=len(accuracies)):
        base = math.prod(p if belief == 0 else (1 - p) / 3 for p, belief in zip(accuracies, beliefs, strict=True))
        for draws in product((True, False), repeat=len(accuracies)):
            given: list[int] = []
            for belief, herds in zip(beliefs, draws, strict=True):
                top = max((given.count(answer) for answer in given), default=0)
                leaders = [answer for answer in given if given.count(answer) == top]
                given.append(leaders[0] if herds and leaders and belief not in leaders else belief)
            top = max(given.count(answer) for answer in given)
            winner = next(answer for answer in given if given.count(answer) == top)
            if winner == 0:
                total += base * math.prod(herd if herds else 1 - herd for herds in draws)
    return total


# The checks -------------------------------------------------------------------------------------


Row = tuple[str, float | None, float, float, str, bool]


def row(label: str, theory: float | None, measured: SystemScore, check: str, holds: bool) -> Row:
    return (label, theory, measured.accuracy, standard_error(measured.accuracy, measured.questions), check, holds)


# The evals, by the name `--only` takes.
EVALS = (
    "optimal",
    "calibrated",
    "always-wrong",
    "log-odds",
    "independent",
    "herd",
    "persuade",
    "persuade-sequential",
    "stop-plurality",
    "stop-weighted",
    "stop-confer",
    "stop-confer-votes",
    "stop-confident",
    "stop-persuade",
    "stop-persuade-votes",
)


async def figures(
    n: int, seed: int, only: str | None = None
) -> tuple[list[Row], list[tuple[str, float, float]], dict[str, EvalResult]]:
    rows: list[Row] = []
    evals: dict[str, EvalResult] = {}
    if only in (None, "optimal"):
        await optimal(n, seed, rows, evals)
    if only in (None, "calibrated"):
        await calibrated(n, seed, rows, evals)
    if only in (None, "always-wrong"):
        await always_wrong(n, seed, rows, evals)
    if only in (None, "log-odds"):
        await log_odds(n, seed, rows, evals)
    for name, knobs, order, check in JURY_EVALS:
        if only in (None, name):
            await jury(name, knobs, order, check, n, seed, rows, evals)
    for name, measure in STOPS.items():
        if only in (None, name):
            await measure(n, seed, evals)
    return rows, enumerated(evals), evals


async def optimal(n: int, seed: int, rows: list[Row], evals: dict[str, EvalResult]) -> None:
    mixed = panel(
        "optimal",
        MIXED,
        protocol="vote",
        method="weighted_plurality",
    )
    members = [m.model_copy(update={"weight": w}) for m, w in zip(mixed.members, optimal_weights(MIXED), strict=True)]
    mixed = mixed.model_copy(update={"members": members})
    evals["optimal"] = result = await evaluate(mixed, dataset(n), "vote", seed)
    vote, best = score(result, "vote"), score(result, "baseline")
    se = standard_error(vote.accuracy, n)
    rows.append(row("0.9 + 4×0.6: v1 alone (the best member)", result.theory["baseline"].accuracy, best, "", True))
    rows.append(
        row(
            "0.9 + 4×0.6: weighted_plurality, optimal weights",
            result.theory["vote"].accuracy,
            vote,
            f"|m − 0.928| ≤ 2 SE and m > {best.accuracy:.3f} (best member)",
            abs(vote.accuracy - OPTIMUM) <= 2 * se and vote.accuracy > best.accuracy and vote.accuracy > 0.9,
        )
    )


async def calibrated(n: int, seed: int, rows: list[Row], evals: dict[str, EvalResult]) -> None:
    calibrated = panel("calibrated", MIXED, protocol="vote", method="weighted_plurality")
    evals["calibrated"] = result = await evaluate(
        calibrated, dataset(2 * n, offset=10_000), "vote", seed, calibrate=True, split=0.5
    )
    vote = score(result, "vote")
    assert result.calibration is not None
    weights = ", ".join(f"{entry.weight:.2f}" for entry in result.calibration.members)
    rows.append(
        row(
            f"0.9 + 4×0.6: --calibrate half, weights {weights}, weighted_plurality on the other half",
            result.theory["vote"].accuracy,
            vote,
            "|m − 0.928| ≤ 2 SE",
            abs(vote.accuracy - OPTIMUM) <= 2 * standard_error(vote.accuracy, vote.questions),
        )
    )


async def always_wrong(n: int, seed: int, rows: list[Row], evals: dict[str, EvalResult]) -> None:
    """A member right on no question: calibrated, its weight is below 0 and its vote rules an
    option out, which weighs more than leaving it out (its weight held at 0: 0.852)."""
    wrong = panel("always-wrong", WRONG, protocol="vote", method="weighted_plurality")
    evals["always-wrong"] = result = await evaluate(
        wrong, dataset(2 * n, offset=40_000), "vote", seed, calibrate=True, split=0.5
    )
    vote = score(result, "vote")
    assert result.calibration is not None
    weights = ", ".join(f"{entry.weight:.2f}" for entry in result.calibration.members)
    line = result.theory["vote"].accuracy
    assert line is not None
    se = standard_error(vote.accuracy, vote.questions)
    rows.append(
        row(
            f"0.8, 0.7, 0.6 + always wrong: --calibrate half, weights {weights}, weighted_plurality",
            line,
            vote,
            f"|m − theory| ≤ 2 SE and m > {WRONG_AT_ZERO} (its weight at 0) + 2 SE",
            abs(vote.accuracy - line) <= 2 * se and vote.accuracy > WRONG_AT_ZERO + 2 * se,
        )
    )


async def log_odds(n: int, seed: int, rows: list[Row], evals: dict[str, EvalResult]) -> None:
    confer = panel("log-odds", MIXED, "confidence=p", tally="log_odds")
    evals["log-odds"] = result = await evaluate(confer, dataset(n, offset=20_000), "confer", seed)
    found = score(result, "confer")
    rows.append(
        row(
            "0.9 + 4×0.6 calibrated (confidence=p): confer, tally log_odds",
            result.theory["confer"].accuracy,
            found,
            "|m − 0.928| ≤ 2 SE",
            abs(found.accuracy - OPTIMUM) <= 2 * standard_error(found.accuracy, n),
        )
    )


# The 5 × 0.7 confer evals: name, oracle knobs, confer's answer order, the check. Herding moves
# confer only when its members answer in turn (README, "Simulated voters"): herders then follow
# the first answers, right or wrong, and a wrong start cascades.
JURY_EVALS = (
    ("independent", "", "parallel", "within 2 SE of 0.910"),
    ("herd", "herd=0.5", "sequential", "m < 0.910 by > 2 SE, the eval says the cascade, |m − herded| ≤ 2 SE"),
    ("persuade", "persuade=0.3", "parallel", "m > 0.910 and the eval says it departs"),
    ("persuade-sequential", "persuade=0.3", "sequential", "m > 0.910 and the eval says it departs"),
)


async def jury(
    name: str, knobs: str, order: str, check: str, n: int, seed: int, rows: list[Row], evals: dict[str, EvalResult]
) -> None:
    jury_panel = panel(name, JURY, knobs, answer_order=order)
    evals[name] = result = await evaluate(jury_panel, dataset(n, offset=30_000), "confer", seed)
    found = score(result, "confer")
    departure = next(item for item in result.departures if item.system == "confer")
    if not knobs:
        holds = not departure.departs
    elif "herd" in knobs:
        holds = departure.departs and departure.standard_errors < -2 and "the cascade" in departure.verdict
        herded = result.theory["confer"].herding
        holds = holds and found.accuracy < INDEPENDENT_CONFER and herded is not None
        holds = holds and abs(found.accuracy - herded) <= 2 * standard_error(found.accuracy, found.questions)
    else:
        holds = found.accuracy > INDEPENDENT_CONFER and departure.departs and departure.standard_errors > 0
    label = f"5×0.7{' ' + knobs if knobs else ''}, {order}: confer ({departure.standard_errors:+.1f} SE from theory)"
    rows.append(row(label, result.theory["confer"].accuracy, found, check, holds))


def enumerated(evals: dict[str, EvalResult]) -> list[tuple[str, float, float]]:
    """Every theory line the evals that ran reported, against the brute-force enumeration."""
    lines: list[tuple[str, str, str, Sequence[float], Callable[[tuple[int, ...]], int | None]]] = [
        ("best member alone", "optimal", "baseline", MIXED, lambda beliefs: beliefs[0]),
        ("weighted_plurality, optimal weights", "optimal", "vote", MIXED, most_weight(optimal_weights(MIXED))),
        ("confer log_odds, confidence = p", "log-odds", "confer", MIXED, confer_rule(optimal_weights(MIXED))),
        ("confer, 5 × 0.7 at 80", "independent", "confer", JURY, confer_rule([80.0] * 5)),
        ("5 × 0.7 alone (v1)", "herd", "baseline", JURY, lambda beliefs: beliefs[0]),
    ]
    if "calibrated" in evals:
        weights = [entry.weight for entry in evals["calibrated"].calibration.members]  # type: ignore[union-attr]
        lines.insert(2, ("weighted_plurality, calibrated weights", "calibrated", "vote", MIXED, most_weight(weights)))
    if "always-wrong" in evals:
        weights = [entry.weight for entry in evals["always-wrong"].calibration.members]  # type: ignore[union-attr]
        lines.append(
            (
                "weighted_plurality, an always-wrong member at its weight",
                "always-wrong",
                "vote",
                WRONG,
                most_weight(weights),
            )
        )
    checked = []
    herding = evals["herd"].theory["confer"].herding if "herd" in evals else None
    if herding is not None:
        checked.append(
            ("confer in turn, 5 × 0.7 herd=0.5 (with herding as simulated)", in_turn_accuracy(JURY, 0.5), herding)
        )
    for label, name, system, accuracies, answer in lines:
        if name not in evals:
            continue
        reported = evals[name].theory[system].accuracy
        assert reported is not None
        checked.append((label, enumerate_accuracy(accuracies, answer), reported))
    return checked


# Confidence: is it a probability? ---------------------------------------------------------------

# (label, eval, system): the systems whose members' accuracy is known to the panel.
KNOWN = (
    ("weighted_plurality, optimal weights", "optimal", "vote"),
    ("weighted_plurality, weights calibrated on the other half", "calibrated", "vote"),
    ("confer log_odds, confidences stated at p", "log-odds", "confer"),
)
ConfidenceRow = tuple[str, float, float, float | None, float | None, bool]


def confidence_rows(evals: dict[str, EvalResult]) -> list[ConfidenceRow]:
    """(label, ECE, Brier, the exact posterior's Brier, their ratio, the goals hold)."""
    found = []
    for label, name, system in KNOWN:
        if name not in evals:
            continue
        measured = score(evals[name], system).confidence
        assert measured is not None and measured.ece is not None and measured.brier is not None
        ratio = measured.brier_ratio
        holds = measured.ece <= ECE_GOAL and ratio is not None and ratio <= BRIER_GOAL
        found.append((label, measured.ece, measured.brier, measured.posterior_brier, ratio, holds))
    return found


def engines_confidence(evals: dict[str, EvalResult]) -> bool:
    """Whether every confidence of the systems whose members' accuracy is known came from the
    engine's own result (`confidence_from: run`), not worked out by the eval."""
    return all(
        item.confidence_from == "run"
        for _, name, system in KNOWN
        if name in evals
        for item in evals[name].items
        if item.system == system and item.confidence is not None
    )


def without_confidence(evals: dict[str, EvalResult]) -> list[tuple[str, str]]:
    """The systems whose members' accuracy is not known to the panel, and why they have none."""
    return [
        (f"{name}: {found.system}", found.confidence.reason or "")
        for name, result in evals.items()
        for found in result.systems
        if found.confidence is not None
        and found.confidence.items == 0
        and found.system != "baseline"
        and not found.system.startswith("alone:")
    ]


# Stopping early: the issue's figures --------------------------------------------------------------

FOUR = uniform_places(4)
OPTIMAL_MIXED = tuple(optimal_weights(MIXED))
# (label, rule, voters, asking order, how they are asked, the issue's expected calls)
STOPPING = (
    ("5×0.7 plurality, one at a time", Count("plurality", (1.0,) * 5), JURY, None, "one at a time", 3.99),
    ("5×0.7 majority, one at a time", Count("majority", (1.0,) * 5), JURY, None, "one at a time", 3.97),
    ("5×0.7 confer's count, one at a time", Confer("confidence", (80.0,) * 5), JURY, None, "one at a time", 3.88),
    (
        "0.9+4×0.6 weighted_plurality, strongest first, one at a time",
        Count("weighted_plurality", OPTIMAL_MIXED),
        MIXED,
        ask_order(OPTIMAL_MIXED),
        "one at a time",
        2.77,
    ),
    (
        "0.9+4×0.6 weighted_plurality, strongest first, two waves",
        Count("weighted_plurality", OPTIMAL_MIXED),
        MIXED,
        ask_order(OPTIMAL_MIXED),
        "two waves",
        3.34,
    ),
    (
        "0.9+4×0.6 weighted_plurality, strongest first, waves",
        Count("weighted_plurality", OPTIMAL_MIXED),
        MIXED,
        ask_order(OPTIMAL_MIXED),
        "waves",
        2.77,
    ),
)


def stopping_rows() -> list[tuple[str, float, float, float, float, float | None, bool]]:
    """(label, accuracy stopping, accuracy of everyone, calls, rounds, the issue's calls, holds)."""
    found = []
    for label, rule, voters, order, asking, issue in STOPPING:
        line = stopping_theory(rule, voters, FOUR, Stop(asking=asking), order=order)  # type: ignore[arg-type]
        everyone = theory(rule, voters, FOUR).accuracy
        assert line.accuracy is not None and line.calls is not None and line.rounds is not None and everyone
        holds = line.way == "exact" and abs(line.accuracy - everyone) < 1e-9 and abs(line.calls - issue) < 0.005
        found.append((label, line.accuracy, everyone, line.calls, line.rounds, issue, holds))
    return found


# Stopping early, measured: the engines asking in waves, each beside the same panel asking everyone.

# The issue's goals for the engines under a stopping rule.
PLURALITY_CALLS = 4.05
WEIGHTED_CALLS = 2.85
TWO_WAVES_CALLS = 3.4
CONFER_CALLS = 6.0
CONFIDENT = 0.95


def identical(first: EvalResult, second: EvalResult, system: str) -> int:
    """How many questions two evals answered alike (the same final answer, question by question)."""
    theirs = {item.question_id: item.final_answer for item in second.items if item.system == system}
    return sum(1 for item in first.items if item.system == system and theirs.get(item.question_id) == item.final_answer)


def per_question(result: EvalResult, system: str) -> float:
    found = score(result, system)
    return found.calls / found.questions


def optimal_panel(name: str, **fields: Any) -> Panel:
    mixed = panel(name, MIXED, protocol="vote", method="weighted_plurality", **fields)
    members = [m.model_copy(update={"weight": w}) for m, w in zip(mixed.members, optimal_weights(MIXED), strict=True)]
    return mixed.model_copy(update={"members": members})


async def stopped_and_everyone(
    name: str, build: Callable[..., Panel], protocols: str, n: int, seed: int, offset: int, evals: dict[str, EvalResult]
) -> tuple[EvalResult, EvalResult]:
    """The same panel on the same questions and seed, once under `stop: decided`, once asking everyone."""
    evals[f"{name}: everyone"] = everyone = await evaluate(build(f"{name}-all"), dataset(n, offset), protocols, seed)
    evals[name] = stopped = await evaluate(build(name, stop="decided"), dataset(n, offset), protocols, seed)
    return stopped, everyone


async def stop_plurality(n: int, seed: int, evals: dict[str, EvalResult]) -> None:
    await stopped_and_everyone(
        "stop-plurality",
        lambda name, **fields: panel(name, JURY, protocol="vote", method="plurality", **fields),
        "vote",
        n,
        seed,
        50_000,
        evals,
    )


async def stop_weighted(n: int, seed: int, evals: dict[str, EvalResult]) -> None:
    await stopped_and_everyone("stop-weighted", optimal_panel, "vote", n, seed, 60_000, evals)


async def stop_confer(n: int, seed: int, evals: dict[str, EvalResult]) -> None:
    await stopped_and_everyone(
        "stop-confer", lambda name, **fields: panel(name, JURY, **fields), "confer", n, seed, 30_000, evals
    )


async def stop_confer_votes(n: int, seed: int, evals: dict[str, EvalResult]) -> None:
    """confer counting one vote per member (`tally: votes`): a vote still to come weighs no more
    than one in hand, so a vote round is settled sooner than under summed confidences."""
    await stopped_and_everyone(
        "stop-confer-votes",
        lambda name, **fields: panel(name, JURY, tally="votes", **fields),
        "confer",
        n,
        seed,
        30_000,
        evals,
    )


async def stop_confident(n: int, seed: int, evals: dict[str, EvalResult]) -> None:
    built = optimal_panel("stop-confident", stop=f"confident({CONFIDENT})")
    evals["stop-confident"] = await evaluate(built, dataset(n, offset=70_000), "vote", seed)


async def stop_persuade(n: int, seed: int, evals: dict[str, EvalResult]) -> None:
    """Persuaded voters under `stop: decided`: what the vote can no longer buy when the members
    whose right answer would have persuaded the rest are never asked."""
    built = panel("stop-persuade", JURY, "persuade=0.3", stop="decided")
    evals["stop-persuade"] = await evaluate(built, dataset(n, offset=30_000), "confer", seed)


async def stop_persuade_votes(n: int, seed: int, evals: dict[str, EvalResult]) -> None:
    built = panel("stop-persuade-votes", JURY, "persuade=0.3", stop="decided", tally="votes")
    evals["stop-persuade-votes"] = await evaluate(built, dataset(n, offset=30_000), "confer", seed)


STOPS: dict[str, Callable[[int, int, dict[str, EvalResult]], Any]] = {
    "stop-plurality": stop_plurality,
    "stop-weighted": stop_weighted,
    "stop-confer": stop_confer,
    "stop-confer-votes": stop_confer_votes,
    "stop-confident": stop_confident,
    "stop-persuade": stop_persuade,
    "stop-persuade-votes": stop_persuade_votes,
}
StopRow = tuple[str, str, str, bool]


def stop_rows(evals: dict[str, EvalResult]) -> list[StopRow]:
    """(label, what was measured, the check, holds) for each stopping eval that ran."""
    found: list[StopRow] = []
    if "stop-plurality" in evals:
        stopped, everyone = evals["stop-plurality"], evals["stop-plurality: everyone"]
        calls, same, line = (
            per_question(stopped, "vote"),
            identical(stopped, everyone, "vote"),
            stopped.stopping["vote"],
        )
        found.append(
            (
                "5×0.7 vote plurality, stop: decided",
                f"{calls:.3f} calls (exact {line.calls:.3f}; everyone 5), {same}/{score(stopped, 'vote').questions} "
                "answers identical",
                f"calls ≤ {PLURALITY_CALLS}, every answer identical",
                calls <= PLURALITY_CALLS and same == score(stopped, "vote").questions,
            )
        )
    if "stop-weighted" in evals:
        stopped, everyone = evals["stop-weighted"], evals["stop-weighted: everyone"]
        calls, same = per_question(stopped, "vote"), identical(stopped, everyone, "vote")
        rule = Count("weighted_plurality", OPTIMAL_MIXED)
        waves = stopping_theory(rule, MIXED, FOUR, Stop(asking="waves"), order=ask_order(OPTIMAL_MIXED))
        two = stopping_theory(rule, MIXED, FOUR, Stop(asking="two waves"), order=ask_order(OPTIMAL_MIXED))
        assert waves.calls is not None and waves.rounds is not None and two.calls is not None and two.rounds is not None
        found.append(
            (
                "0.9+4×0.6 weighted_plurality, strongest first, stop: decided",
                f"{calls:.3f} calls in waves (exact {waves.calls:.3f} in {waves.rounds:.2f} rounds; two waves "
                f"{two.calls:.3f} in {two.rounds:.2f}), {same}/{score(stopped, 'vote').questions} answers identical",
                f"calls ≤ {WEIGHTED_CALLS}, two waves ≤ {TWO_WAVES_CALLS}, every answer identical",
                calls <= WEIGHTED_CALLS and two.calls <= TWO_WAVES_CALLS and same == score(stopped, "vote").questions,
            )
        )
    for name, tally in (("stop-confer", "confidence"), ("stop-confer-votes", "votes")):
        if name in evals:
            found.append(confer_stop_row(evals[name], evals[f"{name}: everyone"], tally))
    if "stop-confident" in evals:
        result = evals["stop-confident"]
        measured = score(result, "vote").stopping
        line = result.stopping["vote"]
        assert measured is not None and measured.stopped and measured.stopped_accuracy is not None
        se = standard_error(measured.stopped_accuracy, measured.stopped)
        found.append(
            (
                f"0.9+4×0.6 weighted_plurality, optimal weights, stop: confident({CONFIDENT:g})",
                f"stopped early on {measured.stopped}/{measured.questions}, right on {measured.stopped_accuracy:.3f} "
                f"(SE {se:.3f}); all answers {score(result, 'vote').accuracy:.3f} (exact {line.accuracy:.3f}); "
                f"{measured.calls_per_question:.3f} calls (exact {line.calls:.3f})",
                f"stopped answers ≥ {CONFIDENT:g} − 2 SE",
                measured.stopped_accuracy >= CONFIDENT - 2 * se,
            )
        )
    return found


def confer_stop_row(stopped: EvalResult, everyone: EvalResult, tally: str) -> StopRow:
    """5 × 0.7 confer under `stop: decided` beside everyone asked. The goal of 6 calls holds
    under `tally: votes`; under summed confidences a vote still to come may weigh 100 against the
    80 each vote in hand weighs, so settling a round takes more votes (exactly 6.13, the floor)."""
    mine, theirs = score(stopped, "confer"), score(everyone, "confer")
    calls, all_calls = per_question(stopped, "confer"), per_question(everyone, "confer")
    same = identical(stopped, everyone, "confer")
    line = stopped.stopping["confer"]
    assert line.calls is not None
    measured = (
        f"{calls:.3f} calls (exact {line.calls:.3f}, the answers and the vote among those who answered; "
        f"everyone, converging on what matters: {all_calls:.2f}; 15 before), accuracy "
        f"{mine.accuracy:.3f} against {theirs.accuracy:.3f}, {same}/{mine.questions} answers identical"
    )
    if tally == "votes":
        check = f"calls ≤ {CONFER_CALLS:g}, every answer identical"
        holds = calls <= CONFER_CALLS and same == mine.questions
    else:
        check = (
            f"every answer identical; calls within 3 SE of the exact {line.calls:.2f} (≤ {CONFER_CALLS:g}: tally votes)"
        )
        spread = statistics.stdev(item.calls for item in stopped.items if item.system == "confer")
        spread /= math.sqrt(mine.questions)
        holds = same == mine.questions and abs(calls - line.calls) <= 3 * spread
    return (f"5×0.7 confer, tally: {tally}, stop: decided", measured, check, holds)


def vote_rounds_rows(evals: dict[str, EvalResult]) -> list[tuple[str, float, float]]:
    """What confer's vote rounds buy and cost, 5 × 0.7: (label, accuracy, calls per question)."""
    labels = {
        "independent": "independent voters (the votes repeat the answers)",
        "persuade": "persuade=0.3 (a right answer shown can move a vote)",
        "stop-confer": "independent, stop: decided",
        "stop-persuade": "persuade=0.3, stop: decided",
        "stop-confer-votes": "independent, tally: votes, stop: decided",
        "stop-persuade-votes": "persuade=0.3, tally: votes, stop: decided",
    }
    return [
        (label, score(evals[name], "confer").accuracy, per_question(evals[name], "confer"))
        for name, label in labels.items()
        if name in evals
    ]


def exact_lines(evals: dict[str, EvalResult]) -> tuple[int, list[str], float]:
    """Every theory line the evals reported, and those not exact; and how long ranked choice
    with random rankings (the line that was simulated) takes to enumerate."""
    lines = [(f"{name}: {system}", line) for name, result in evals.items() for system, line in result.theory.items()]
    simulated = [label for label, line in lines if line.accuracy is not None and line.way != "exact"]
    started = time.process_time()
    runoff = theory(Count("ranked_choice", (1.0,) * 5, rankings="random"), JURY, FOUR)
    took = time.process_time() - started
    if runoff.way != "exact":
        simulated.append("5×0.7 ranked_choice, random rankings")
    return len(lines) + 1, simulated, took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=1000, help="questions per eval (calibration gets twice that)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--only", choices=EVALS, help="run this one eval (and check its theory lines) alone")
    args = parser.parse_args()
    started = time.perf_counter()
    rows, checked, evals = asyncio.run(figures(args.questions, args.seed, args.only))
    print(f"{args.questions} four-option questions per eval, seed {args.seed}; m = measured, SE its standard error.\n")
    print(f"{'system':<78} {'theory':>7} {'measured':>9} {'SE':>6}  {'holds':<5} check")
    for label, expected, measured, se, check, holds in rows:
        line = f"{expected:.3f}" if expected is not None else "—"
        mark = "" if not check else ("yes" if holds else "NO")
        print(f"{label:<78} {line:>7} {measured:>9.3f} {se:>6.3f}  {mark:<5} {check}")
    print(f"\n{'theory line (as the eval reported it) against a brute-force enumeration':<78} {'eval':>7} {'brute':>9}")
    for label, brute, reported in checked:
        mark = "yes" if abs(brute - reported) <= 0.001 else "NO"
        print(f"{label:<78} {reported:>7.4f} {brute:>9.4f}  {mark}  |eval − brute| ≤ 0.001")
    lines, simulated, took = exact_lines(evals)
    mark = "yes" if not simulated else "NO: " + ", ".join(simulated)
    print(
        f"{'every theory line exact (ranked choice, random rankings: ' + f'{took:.1f} s of CPU)':<78} {lines:>7} {'':>9}  {mark}"
    )

    print(f"\n{'confidence, members of known accuracy':<60} {'ECE':>6} {'Brier':>7} {'exact':>7} {'ratio':>6}  holds")
    for label, ece, brier, exact, ratio, holds in confidence_rows(evals):
        shown = f"{exact:.4f}" if exact is not None else "—"
        times = f"{ratio:.2f}" if ratio is not None else "—"
        print(f"{label:<60} {ece:>6.3f} {brier:>7.4f} {shown:>7} {times:>6}  {'yes' if holds else 'NO'}")
    print(f"checks: ECE ≤ {ECE_GOAL}, Brier ≤ {BRIER_GOAL} × the exact posterior's")
    for label, reason in without_confidence(evals):
        print(f"  no confidence, {label}: {reason}")
    print(f"confidences from the engines themselves: {'yes' if engines_confidence(evals) else 'NO'}")

    rows_ = stop_rows(evals)
    if rows_:
        print(f"\n{'stop: the engines, measured':<64} holds  measured; check")
        for label, measured, check, holds in rows_:
            print(f"{label:<64} {'yes' if holds else 'NO':<5}  {measured}; {check}")
    rounds = vote_rounds_rows(evals)
    if rounds:
        print(f"\n{'confer 5×0.7: what the vote rounds buy':<64} {'acc':>6} {'calls':>6}")
        for label, accuracy, calls in rounds:
            print(f"{label:<64} {accuracy:>6.3f} {calls:>6.2f}")

    print(
        f"\n{'stop: decided (theory, exact)':<64} {'acc':>6} {'all':>6} {'calls':>6} {'rounds':>6} {'issue':>6}  holds"
    )
    for label, accuracy, everyone, calls, rounds, issue, holds in stopping_rows():
        print(
            f"{label:<64} {accuracy:>6.4f} {everyone:>6.4f} {calls:>6.3f} {rounds:>6.3f} {issue:>6.2f}  "
            f"{'yes' if holds else 'NO'}"
        )
    print("checks: the answers are everyone's (acc = all), the calls the issue's to 0.005")
    print(f"\ntook {time.perf_counter() - started:.0f}s")


if __name__ == "__main__":
    main()
