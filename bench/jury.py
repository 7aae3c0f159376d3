"""The eval machinery against theory, on thousands of simulated questions.

Run by hand (never part of the tests):

    python bench/jury.py                      # 2,000 questions at p = 0.7 and p = 0.6, a few minutes
    python bench/jury.py --questions 5000 --p 0.7

Five simulated voters (`demo/oracle@p`: right with probability p on each question,
independently, otherwise a wrong option at random out of three) answer four-option questions
through `panel eval`'s runner: the baseline (one voter alone), vote, confer and council, every
question a real run of the real engine through the gateway (the transcript store
is left out: it does not change an answer, only the time).

Each protocol's accuracy is printed with its 95% Wilson interval beside two lines:
- the Condorcet jury theorem: a strict majority of 5 voters at p is right with probability
  0.837 (p = 0.7) or 0.683 (p = 0.6), which vote by majority must match;
- the exact expectation under the protocol's own rule, by enumerating all 4^5 ways five
  voters can hold an answer and counting each with the protocols' own arithmetic (confer's
  `tally`, council's `aggregate_rankings`), with the simulated voters' behaviour: confer's
  votes go to the first answer that gives the voter's belief (a plurality, ties to the earlier
  member), council's reviewers rank the answers that agree with them first and the chairman
  reports the answer ranked first. Confer and council can beat the theory line because a
  plurality needs no majority: two right voters win against three wrong ones that split.
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["LITELLM_OFFLINE_MODE"] = "True"
os.environ["PANEL_DEMO_DELAY"] = "0"

import argparse
import asyncio
import itertools
import math
import platform
import time
from collections.abc import Callable

from panel_cli.config import Panel
from panel_cli.eval.datasets import Dataset, EvalItem
from panel_cli.eval.results import EvalResult
from panel_cli.eval.runner import plan_eval, run_eval
from panel_cli.eval.stats import jury_probability, wilson_interval
from panel_cli.protocols.base import labels_for
from panel_cli.protocols.confer import engine as confer
from panel_cli.protocols.council.ranking import aggregate_rankings

VOTERS = 5
OPTIONS = ["amber", "cobalt", "jade", "ruby"]
GOLD = 0  # in the enumeration, belief 0 is the gold answer and 1..3 the wrong options


def dataset(n: int) -> Dataset:
    return Dataset(
        source=f"simulated:{n}",
        items=[
            EvalItem(
                id=f"s{index}", question=f"Simulated question {index}?", answer=OPTIONS[index % 4], options=OPTIONS
            )
            for index in range(n)
        ],
    )


def jury(p: float) -> Panel:
    return Panel.model_validate(
        {"name": f"oracle@{p}", "members": [{"name": f"v{i}", "model": f"demo/oracle@{p}"} for i in range(VOTERS)]}
    )


def confer_answer(beliefs: tuple[int, ...]) -> int:
    """confer's winner when each voter votes for the first answer that gives its belief."""
    labels = labels_for(len(beliefs))
    first = {belief: index for index, belief in reversed(list(enumerate(beliefs)))}
    votes = [
        confer.Vote(voter=f"v{index}", chosen_label=labels[first[belief]], confidence=80, revised_answer="")
        for index, belief in enumerate(beliefs)
    ]
    _, winner = confer.tally(votes, labels)
    assert winner is not None
    return beliefs[labels.index(winner)]


def council_answer(beliefs: tuple[int, ...]) -> int:
    """council's top-ranked answer when each reviewer ranks the answers agreeing with it first."""
    labels = [f"Model {label}" for label in labels_for(len(beliefs))]
    rankings = [
        [labels[j] for j, other in enumerate(beliefs) if other == belief]
        + [labels[j] for j, other in enumerate(beliefs) if other != belief]
        for belief in beliefs
    ]
    authors = {label: f"v{index}" for index, label in enumerate(labels)}
    top = aggregate_rankings(rankings, authors, {name: label for label, name in authors.items()})[0]
    return beliefs[int(top.name[1:])]


def vote_answer(beliefs: tuple[int, ...]) -> int | None:
    """A strict majority, or nothing."""
    best = max(set(beliefs), key=beliefs.count)
    return best if beliefs.count(best) * 2 > len(beliefs) else None


def exact(p: float, rule: Callable[[tuple[int, ...]], int | None]) -> float:
    """The chance that `rule` gives the gold answer, over every way the voters can hold one."""
    total = 0.0
    for beliefs in itertools.product(range(4), repeat=VOTERS):
        chance = math.prod(p if belief == GOLD else (1 - p) / 3 for belief in beliefs)
        if rule(beliefs) == GOLD:
            total += chance
    return total


async def measure(p: float, questions: int, seed: int, concurrency: int) -> tuple[EvalResult, float]:
    plan = plan_eval(jury(p), dataset(questions), protocols="vote,confer,council", baseline=None, grader=None)
    started = time.perf_counter()
    result = await run_eval(plan, store=None, secrets=[], eval_id=f"bench-{p}", seed=seed, concurrency=concurrency)
    return result, time.perf_counter() - started


def report(p: float, result: EvalResult, seconds: float) -> None:
    theory = jury_probability(VOTERS, p)
    expected = {
        "baseline": p,
        "vote": exact(p, vote_answer),
        "confer": exact(p, confer_answer),
        "council": exact(p, council_answer),
    }
    assert math.isclose(expected["vote"], theory)
    print(
        f"\np = {p}: {result.questions} questions, {VOTERS} voters; Condorcet jury theorem (strict majority): {theory:.4f}"
    )
    print(
        f"{'system':<9} {'accuracy':>9} {'95% interval':>17} {'exact, its rule':>16} {'off by (SE)':>12} {'calls':>8} {'wall':>8}"
    )
    for score in result.systems:
        low, high = wilson_interval(score.correct, score.questions)
        want = expected[score.system]
        standard_error = math.sqrt(want * (1 - want) / score.questions)
        print(
            f"{score.system:<9} {score.accuracy:>9.4f} {f'{low:.4f}–{high:.4f}':>17} {want:>16.4f} "
            f"{(score.accuracy - want) / standard_error:>+12.2f} {score.calls:>8,} {score.wall_time_s:>7.1f}s"
        )
    print(f"whole eval: {seconds:.1f}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=2000)
    parser.add_argument("--p", type=float, action="append", help="voter accuracy (repeatable; default 0.7 and 0.6)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    print(f"panel eval against theory · Python {platform.python_version()} · {os.cpu_count()} CPUs · seed {args.seed}")
    for p in args.p or [0.7, 0.6]:
        result, seconds = asyncio.run(measure(p, args.questions, args.seed, args.concurrency))
        report(p, result, seconds)


if __name__ == "__main__":
    main()
