"""The eval machinery against theory: five simulated voters of known accuracy, voting by
majority, must be right as often as the Condorcet jury theorem says, within the sampling
error of the number of questions asked. Seeded, so the same every run."""

from __future__ import annotations

import pytest

from panel_cli.config import Panel
from panel_cli.eval.datasets import Dataset, EvalItem
from panel_cli.eval.runner import plan_eval, run_eval
from panel_cli.eval.stats import jury_probability, proportion_tolerance

QUESTIONS = 400
VOTERS = 5
COLOURS = ["red", "green", "blue", "yellow"]


def simulated_dataset(n: int) -> Dataset:
    items = [
        EvalItem(id=f"s{index}", question=f"Simulated question {index}?", answer=COLOURS[index % 4], options=COLOURS)
        for index in range(n)
    ]
    return Dataset(source="simulated", items=items)


def jury(p: float) -> Panel:
    return Panel.model_validate(
        {"name": f"jury@{p}", "members": [{"name": f"v{i}", "model": f"demo/oracle@{p}"} for i in range(1, VOTERS + 1)]}
    )


@pytest.mark.parametrize("p, theory", [(0.7, 0.837), (0.6, 0.683)])
async def test_majority_vote_of_five_simulated_voters_matches_the_jury_theorem(p, theory):
    plan = plan_eval(jury(p), simulated_dataset(QUESTIONS), protocols="vote", baseline=None, grader=None)
    result = await run_eval(plan, store=None, secrets=[], eval_id="jury-test", seed=2024, concurrency=16)
    expected = jury_probability(VOTERS, p)
    assert round(expected, 3) == theory
    assert result.theory["vote"].accuracy == pytest.approx(expected, abs=1e-12)
    assert result.theory["baseline"].accuracy == pytest.approx(p)
    baseline, voted = result.systems
    # The tolerance comes from the sample: 4 standard errors of a proportion over QUESTIONS questions.
    assert abs(voted.accuracy - expected) <= proportion_tolerance(expected, QUESTIONS)
    assert abs(baseline.accuracy - p) <= proportion_tolerance(p, QUESTIONS)
    assert voted.calls == VOTERS * QUESTIONS
    assert baseline.calls == QUESTIONS
