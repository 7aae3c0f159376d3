"""From graded runs to scores and plain-word comparisons, by hand."""

from __future__ import annotations

import pytest

from panel_cli.config import Panel
from panel_cli.eval.grading import Grade
from panel_cli.eval.results import ItemResult, compare, jury_theory, score_system


def results(
    system: str, right: list[bool], *, calls: int = 1, tokens: int | None = 10, cost: float | None = None
) -> list[ItemResult]:
    return [
        ItemResult(
            system=system,
            question_id=f"q{index}",
            run_id=f"r{index}",
            final_answer="x",
            grade=Grade(correct=correct, method="option"),
            calls=calls,
            tokens=tokens,
            cost=cost,
            duration_s=0.1,
        )
        for index, correct in enumerate(right)
    ]


def test_score_counts_and_interval():
    scored = score_system(
        "confer", "confer", ["a", "b"], results("confer", [True] * 7 + [False] * 3, calls=4, cost=0.01), 2.5
    )
    assert (scored.questions, scored.correct, scored.accuracy) == (10, 7, 0.7)
    assert (round(scored.ci_low, 4), round(scored.ci_high, 4)) == (0.3968, 0.8922)
    assert (scored.calls, scored.tokens, scored.cost, scored.wall_time_s) == (40, 100, pytest.approx(0.1), 2.5)
    assert (scored.answered, scored.failed) == (10, 0)


def test_unknown_tokens_and_cost_stay_unknown():
    scored = score_system("vote", "vote", ["a"], results("vote", [True, False], tokens=None, cost=None), 1.0)
    assert (scored.tokens, scored.cost) == (None, None)


def test_eight_against_two_is_not_significant():
    # 8 questions only confer got right, 2 only the baseline did: p = 0.109375.
    confer = [True] * 8 + [False] * 2 + [True] * 5
    baseline = [False] * 8 + [True] * 2 + [True] * 5
    compared = compare("confer", results("confer", confer), results("baseline", baseline))
    assert (compared.only_system, compared.only_baseline, compared.p_value, compared.significant) == (
        8,
        2,
        0.109375,
        False,
    )
    assert compared.difference == pytest.approx(6 / 15)
    assert compared.verdict == (
        "not significant (p = 0.11): confer's edge of +40.0 points could be chance "
        "(8 right only with confer, 2 only with the baseline)."
    )


def test_ten_against_none_is_significant():
    compared = compare("vote", results("vote", [True] * 10), results("baseline", [False] * 10))
    assert (compared.p_value, compared.significant) == (0.001953125, True)
    assert (
        compared.verdict
        == "significant (p = 0.002): vote is better than the baseline on these questions (10 right only with vote, 0 only with the baseline)."
    )


def test_a_worse_panel_is_said_to_be_worse():
    compared = compare("council", results("council", [False] * 12), results("baseline", [True] * 12))
    assert compared.verdict.startswith("significant (p < 0.001): council is worse than the baseline")
    small = compare("council", results("council", [False, True, True]), results("baseline", [True, True, True]))
    assert (
        small.verdict
        == "not significant (p = 1): council's deficit of -33.3 points could be chance (0 right only with council, 1 only with the baseline)."
    )


def test_no_discordant_question_and_an_even_split():
    same = compare("confer", results("confer", [True, False]), results("baseline", [True, False]))
    assert same.verdict == "no difference to test: confer and the baseline were right on exactly the same questions."
    assert (same.p_value, same.significant) == (1.0, False)
    even = compare("confer", results("confer", [True, False]), results("baseline", [False, True]))
    assert (
        even.verdict == "not significant (p = 1): no difference (1 right only with confer, 1 only with the baseline)."
    )


def test_comparison_pairs_by_question_not_by_position():
    confer = results("confer", [True, False])
    baseline = list(reversed(results("baseline", [True, False])))
    assert compare("confer", confer, baseline).only_system == 0


def test_jury_theory_only_for_a_panel_of_one_accuracy():
    jury = Panel.model_validate({"members": [{"name": f"v{i}", "model": "demo/oracle@0.7"} for i in range(5)]})
    theory = jury_theory(jury)
    assert theory is not None
    assert (theory.voters, theory.p, round(theory.accuracy, 5)) == (5, 0.7, 0.83692)
    mixed = Panel.model_validate(
        {"members": [{"name": "a", "model": "demo/oracle@0.7"}, {"name": "b", "model": "demo/oracle@0.6"}]}
    )
    assert jury_theory(mixed) is None
    personas = Panel.model_validate(
        {"members": [{"name": "a", "model": "demo/sage"}, {"name": "b", "model": "demo/sage"}]}
    )
    assert jury_theory(personas) is None
