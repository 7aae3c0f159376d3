"""The figures of issue 20, measured through `panel eval`'s own runner: optimal and calibrated
weights, confer by log-odds, and simulated voters that herd or are persuaded.

Run by hand (never part of the tests), with the demo personas in-process and no delay:

    PANEL_DEMO_DELAY=0 python bench/deliberation.py [--questions 1000] [--seed 7] [--only herd]

Each row is one eval system on generated four-option questions (the gold option equally often
in each place): its theory line as the eval reports it, the accuracy measured, its binomial
standard error, and whether the issue's check holds. Every run is a real run of the protocol's
engine through the gateway, as `panel eval` makes it (no store: nothing is written). The last
rows check every exact theory line the evals reported against a brute-force enumeration
written here, independently of `panel_cli.eval.theory`: every profile of beliefs, counted by
hand.

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
import time
from collections.abc import Callable, Sequence
from itertools import product
from typing import Any

os.environ.setdefault("PANEL_DEMO_DELAY", "0")

from panel_cli.config import Panel  # noqa: E402
from panel_cli.eval.datasets import Dataset, EvalItem  # noqa: E402
from panel_cli.eval.results import EvalResult, SystemScore  # noqa: E402
from panel_cli.eval.runner import plan_eval, run_eval  # noqa: E402

OPTIONS = ("alpha", "bravo", "charlie", "delta")
MIXED = (0.9, 0.6, 0.6, 0.6, 0.6)
JURY = (0.7,) * 5
OPTIMUM = 0.928  # the Nitzan–Paroush optimum on 0.9 + 4 × 0.6, four options (theory_table.py)
INDEPENDENT_CONFER = 0.910  # confer's plurality on 5 × 0.7


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
EVALS = ("optimal", "calibrated", "log-odds", "independent", "herd", "persuade", "persuade-sequential")


async def figures(
    n: int, seed: int, only: str | None = None
) -> tuple[list[Row], list[tuple[str, float, float]], dict[str, EvalResult]]:
    rows: list[Row] = []
    evals: dict[str, EvalResult] = {}
    if only in (None, "optimal"):
        await optimal(n, seed, rows, evals)
    if only in (None, "calibrated"):
        await calibrated(n, seed, rows, evals)
    if only in (None, "log-odds"):
        await log_odds(n, seed, rows, evals)
    for name, knobs, order, check in JURY_EVALS:
        if only in (None, name):
            await jury(name, knobs, order, check, n, seed, rows, evals)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=1000, help="questions per eval (calibration gets twice that)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--only", choices=EVALS, help="run this one eval (and check its theory lines) alone")
    args = parser.parse_args()
    started = time.perf_counter()
    rows, checked, _ = asyncio.run(figures(args.questions, args.seed, args.only))
    print(f"{args.questions} four-option questions per eval, seed {args.seed}; m = measured, SE its standard error.\n")
    print(f"{'system':<78} {'theory':>7} {'measured':>9} {'SE':>6}  {'holds':<5} check")
    for label, theory, measured, se, check, holds in rows:
        line = f"{theory:.3f}" if theory is not None else "—"
        mark = "" if not check else ("yes" if holds else "NO")
        print(f"{label:<78} {line:>7} {measured:>9.3f} {se:>6.3f}  {mark:<5} {check}")
    print(f"\n{'theory line (as the eval reported it) against a brute-force enumeration':<78} {'eval':>7} {'brute':>9}")
    for label, brute, reported in checked:
        mark = "yes" if abs(brute - reported) <= 0.001 else "NO"
        print(f"{label:<78} {reported:>7.4f} {brute:>9.4f}  {mark}  |eval − brute| ≤ 0.001")
    print(f"\ntook {time.perf_counter() - started:.0f}s")


if __name__ == "__main__":
    main()
