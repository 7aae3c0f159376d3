"""The engines under `stop:` on seeded simulated voters, through the eval's own runner
(docs/protocols.md#stopping-early): `decided` answers exactly what asking everyone answers,
question by question, and pays less; `confident(x)`'s stopped answers are right at least x of
the time; the eval reports calls per question beside the exact theory's."""

from __future__ import annotations

import math
from typing import Any

import pytest

from panel_cli.config import Panel
from panel_cli.eval.datasets import Dataset, EvalItem
from panel_cli.eval.results import EvalResult
from panel_cli.eval.runner import plan_eval, run_eval
from panel_cli.eval.stopped import stop_for
from panel_cli.export.eval_markdown import markdown

OPTIONS = ["alpha", "bravo", "charlie", "delta"]
MIXED = (0.9, 0.6, 0.6, 0.6, 0.6)


def dataset(n: int) -> Dataset:
    """Four-option questions, the gold option equally often in each place."""
    items = [
        EvalItem(id=f"q{index}", question=f"Question {index}: which?", answer=OPTIONS[index % 4], options=OPTIONS)
        for index in range(n)
    ]
    return Dataset(source=f"generated:{n}", items=items)


def oracles(accuracies: tuple[float, ...], **fields: Any) -> Panel:
    members = [{"name": f"v{i}", "model": f"demo/oracle@{p:g}"} for i, p in enumerate(accuracies, start=1)]
    return Panel.model_validate({"name": "jury", "members": members, **fields})


def optimal(**fields: Any) -> Panel:
    """0.9 + 4 × 0.6, each weighing the log-odds of its accuracy over four options."""
    panel = oracles(MIXED, method="weighted_plurality", **fields)
    weighted = [
        member.model_copy(update={"weight": math.log(3 * p / (1 - p))})
        for member, p in zip(panel.members, MIXED, strict=True)
    ]
    return panel.model_copy(update={"members": weighted})


async def evaluate(panel: Panel, protocol: str, n: int) -> EvalResult:
    plan = plan_eval(panel, dataset(n), protocols=protocol, baseline=None, grader=None, seed=11)
    return await run_eval(plan, store=None, secrets=[], eval_id=f"stop-{protocol}", seed=11, concurrency=8)


def answers(result: EvalResult, system: str) -> dict[str, str | None]:
    return {item.question_id: item.final_answer for item in result.items if item.system == system}


def calls(result: EvalResult, system: str) -> int:
    return sum(item.calls for item in result.items if item.system == system)


@pytest.mark.parametrize(
    ("protocol", "fields", "n"),
    [
        ("vote", {"method": "plurality"}, 200),
        ("vote", {"method": "plurality", "tie_break": "first"}, 200),
        ("vote", {"method": "majority"}, 200),
        ("vote", {"method": "supermajority", "threshold": 0.6}, 120),
        ("vote", {"method": "ranked_choice"}, 120),
        ("decide", {"method": "majority", "leader": "v1"}, 120),
        ("confer", {}, 150),
        ("confer", {"tally": "votes"}, 150),
        ("ensemble", {"mode": "majority"}, 60),
    ],
)
async def test_decided_answers_every_question_as_asking_everyone_does(protocol, fields, n):
    """The same seeded oracles (each holds the same belief in both evals) with and without
    `stop: decided`: the same final answer on every question, for no more calls."""
    everyone = await evaluate(oracles((0.7,) * 5, **fields), protocol, n)
    stopped = await evaluate(oracles((0.7,) * 5, stop="decided", **fields), protocol, n)

    assert answers(stopped, protocol) == answers(everyone, protocol)
    assert calls(stopped, protocol) <= calls(everyone, protocol)


async def test_decided_asks_the_strongest_first_and_saves_what_the_theory_says():
    """0.9 + 4 × 0.6 at their log-odds: 2.77 calls a question in exact theory, measured within a
    few standard errors of it, answers identical to everyone's, and the eval says so."""
    everyone = await evaluate(optimal(), "vote", 300)
    stopped = await evaluate(optimal(stop="decided"), "vote", 300)

    assert answers(stopped, "vote") == answers(everyone, "vote")
    line = stopped.stopping["vote"]
    assert line.way == "exact" and line.calls == pytest.approx(2.7692, abs=1e-4)
    measured = next(score for score in stopped.systems if score.system == "vote").stopping
    assert measured is not None and measured.rule == "decided"
    assert measured.calls_per_question == calls(stopped, "vote") / 300
    assert abs(measured.calls_per_question - line.calls) < 0.15
    assert measured.expected_calls == line.calls
    assert "vote, stop: decided: " in markdown(stopped) and "the exact theory: 2.77" in markdown(stopped)
    assert "stop" not in (next(plan for plan in stopped.plan if plan.name == "baseline").stop or "")


async def test_confer_is_measured_against_its_answers_and_its_vote():
    """5 × 0.7 confer: the exact theory counts the answers and the vote among those who answered
    (6.13 calls a question), and the calls measured come within a few standard errors of it."""
    stopped = await evaluate(oracles((0.7,) * 5, stop="decided"), "confer", 300)

    line = stopped.stopping["confer"]
    assert line.way == "exact" and line.calls == pytest.approx(6.1265, abs=1e-4)
    measured = next(score for score in stopped.systems if score.system == "confer").stopping
    assert measured is not None and measured.expected_calls == line.calls
    assert abs(measured.calls_per_question - line.calls) < 0.3
    assert "confer, stop: decided: " in markdown(stopped) and "(the exact theory: 6.13)" in markdown(stopped)


async def test_confident_answers_are_right_at_least_as_often_as_the_target():
    """confident(0.9): the answers it stopped on before asking everyone are right at least 90%
    of the time, within their interval, and the whole accuracy is the rule's exact theory's."""
    result = await evaluate(optimal(stop="confident(0.9)"), "vote", 400)
    score = next(found for found in result.systems if found.system == "vote")
    measured = score.stopping

    assert measured is not None and measured.target == 0.9 and measured.stopped
    assert measured.stopped_accuracy is not None and measured.holds is True
    se = math.sqrt(measured.stopped_accuracy * (1 - measured.stopped_accuracy) / measured.stopped)
    assert measured.stopped_accuracy >= 0.9 - 2 * se
    line = result.stopping["vote"]
    assert line.accuracy is not None and result.theory["vote"].accuracy == line.accuracy
    assert abs(score.accuracy - line.accuracy) <= 3 * math.sqrt(line.accuracy * (1 - line.accuracy) / 400)
    assert measured.calls_per_question < 5
    assert all(item.confidence is not None for item in result.items if item.system == "vote")


def test_each_system_runs_under_the_rule_it_reads():
    decided = oracles((0.7,) * 3, stop="decided")
    confident = optimal(stop="confident(0.9)")
    assert [stop_for(protocol, decided) for protocol in ("vote", "decide", "confer", "council")] == [
        "decided",
        "decided",
        "decided",
        None,
    ]
    assert stop_for("ensemble", decided) is None
    assert stop_for("ensemble", decided.model_copy(update={"mode": "majority"})) == "decided"
    assert [stop_for(protocol, confident) for protocol in ("vote", "decide", "confer")] == [
        "confident(0.9)",
        "confident(0.9)",
        None,
    ]
