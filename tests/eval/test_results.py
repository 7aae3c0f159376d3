"""From graded runs to scores and plain-word comparisons, by hand."""

from __future__ import annotations

import math

import pytest

from panel_cli.config import Panel
from panel_cli.eval.datasets import EvalItem
from panel_cli.eval.grading import Grade
from panel_cli.eval.results import (
    EvalResult,
    ItemResult,
    Spent,
    SystemPlan,
    compare,
    deliberation,
    departure,
    gold_places,
    not_measurable,
    pair_comparisons,
    score_system,
    summarize,
    system_theory,
)
from panel_cli.eval.stats import holm, mcnemar_exact, paired_difference_interval
from panel_cli.eval.theory import Theory, uniform_places


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


def oracles(*accuracies: float, weights: list[float] | None = None, **fields) -> Panel:
    members = [
        {"name": f"v{i}", "model": f"demo/oracle@{p}", **({"weight": weights[i - 1]} if weights else {})}
        for i, p in enumerate(accuracies, start=1)
    ]
    return Panel.model_validate({"members": members, **fields})


FOUR = uniform_places(4)


def test_each_protocol_gets_the_theory_of_its_own_rule():
    jury = oracles(*[0.7] * 5)
    figures = {
        protocol: round(system_theory(protocol, jury, FOUR).accuracy, 3) for protocol in ("vote", "confer", "council")
    }
    assert figures == {"vote": 0.837, "confer": 0.910, "council": 0.903}
    two_thirds = system_theory("vote", jury.model_copy(update={"method": "supermajority"}), FOUR)
    assert round(two_thirds.accuracy, 3) == 0.528 and two_thirds.way == "exact"
    assert "more than 0.667 of the votes" in two_thirds.rule


def test_weights_and_the_leader_come_from_the_panel():
    accuracies = [0.9, 0.6, 0.6, 0.6, 0.6]
    mixed = oracles(*accuracies)
    weighted = oracles(*accuracies, weights=[math.log(3 * p / (1 - p)) for p in accuracies])
    optimum = system_theory("vote", weighted.model_copy(update={"method": "weighted_plurality"}), FOUR)
    assert round(optimum.accuracy, 3) == 0.928
    assert round(system_theory("vote", weighted.model_copy(update={"method": "weighted"}), FOUR).accuracy, 3) == 0.890
    # Weights count only under the weighted methods: a majority of these voters is 0.786 either way.
    assert round(system_theory("vote", weighted, FOUR).accuracy, 3) == 0.786
    # A decision's leader settles what the count leaves open: v1 (0.9) chooses when no option has a majority.
    led = system_theory("decide", mixed.model_copy(update={"leader": "v1"}), FOUR)
    assert led.accuracy > 0.9 and "the leader v1 chooses its own belief" in led.rule


def test_a_system_with_a_real_model_has_no_theory_and_a_protocol_without_a_count_says_so():
    assert system_theory("vote", Panel.model_validate({"members": [{"name": "a", "model": "demo/sage"}]}), FOUR) is None
    real_chair = oracles(0.7, 0.7, 0.7, chairman={"name": "chair", "model": "demo/sage"})
    assert system_theory("council", real_chair, FOUR) is None, "the chairman writes the answer"
    delphi = system_theory("delphi", oracles(0.7, 0.7, 0.7), FOUR)
    assert (delphi.accuracy, delphi.way) == (None, "none") and delphi.note.startswith("no closed form: delphi's answer")
    short = system_theory("vote", oracles(0.7, 0.7, 0.7), None)
    assert (short.accuracy, short.way) == (None, "none") and "some questions have no options" in short.note


def test_the_baseline_is_its_member_alone():
    alone = oracles(0.55).model_copy(update={"protocol": "ensemble", "mode": "race"})
    line = system_theory("ensemble", alone, FOUR)
    assert (line.accuracy, line.way, line.rule) == (pytest.approx(0.55), "exact", "v1 alone")


def test_gold_places_count_where_each_question_puts_its_answer():
    items = [
        EvalItem(id="a", question="?", answer="red", options=["red", "blue"]),
        EvalItem(id="b", question="?", answer="blue", options=["red", "blue"]),
        EvalItem(id="c", question="?", answer="blue", options=["red", "blue"]),
        EvalItem(id="d", question="?", answer="z", options=["x", "y", "z"]),
    ]
    assert gold_places(items) == {(2, 0): 1, (2, 1): 2, (3, 2): 1}
    assert gold_places([*items, EvalItem(id="e", question="?", answer="45")]) is None
    assert gold_places([]) is None


# Every pair, departures from theory, what simulated voters cannot play --------------------------


def test_every_pair_is_compared_with_holms_adjustment():
    a = results("a", [True] * 20 + [False] * 10)
    b = results("b", [False] * 12 + [True] * 8 + [False] * 10)
    c = results("c", [True] * 30)
    pairs = pair_comparisons({"a": a, "b": b, "c": c})
    assert [(pair.first, pair.second) for pair in pairs] == [("a", "b"), ("a", "c"), ("b", "c")]
    ab, ac, bc = pairs
    assert (ab.both, ab.only_first, ab.only_second, ab.neither) == (8, 12, 0, 10)
    assert ab.p_value == mcnemar_exact(12, 0) and ac.p_value == mcnemar_exact(0, 10)
    assert [pair.p_holm for pair in pairs] == pytest.approx(holm([ab.p_value, ac.p_value, bc.p_value]))
    assert ab.difference == pytest.approx(12 / 30)
    assert (ab.ci_low, ab.ci_high) == pytest.approx(paired_difference_interval(8, 12, 0, 10))
    assert ab.significant and "a beats b" in ab.verdict and "significant after Holm" in ab.verdict
    assert bc.significant and bc.verdict.startswith("c beats b")


def test_a_pair_right_on_the_same_questions_says_so():
    (pair,) = pair_comparisons({"a": results("a", [True, False]), "b": results("b", [True, False])})
    assert (pair.p_holm, pair.significant) == (1.0, False)
    assert pair.verdict == "a and b were right on exactly the same questions."


def line(accuracy: float) -> Theory:
    return Theory(rule="r", accuracy=accuracy, way="exact")


def test_a_departure_below_the_line_of_herding_voters_is_the_cascade():
    scored = score_system("confer", "confer", ["a"], results("confer", [True] * 850 + [False] * 150), 1.0)
    found = departure(scored, line(0.91), "herd=0.5 (v1, v2)")
    assert found is not None and found.departs
    assert found.standard_errors == pytest.approx((0.85 - 0.91) / math.sqrt(0.91 * 0.09 / 1000))
    assert "its voters herd (herd=0.5 (v1, v2))" in found.verdict and "the cascade" in found.verdict
    close = departure(
        score_system("confer", "confer", ["a"], results("confer", [True] * 905 + [False] * 95), 1.0), line(0.91), None
    )
    assert close is not None and not close.departs and close.verdict.startswith("within 2 standard errors")
    above = departure(
        score_system("confer", "confer", ["a"], results("confer", [True] * 970 + [False] * 30), 1.0),
        line(0.91),
        "persuade=0.3 (v1)",
    )
    assert above is not None and above.departs and "persuaded by a right answer" in above.verdict


def test_what_simulated_voters_cannot_play():
    oracles = Panel.model_validate({"members": [{"name": f"v{i}", "model": "demo/oracle@0.7"} for i in range(3)]})
    assert not_measurable("delphi", oracles).startswith("delphi's answer is its facilitator's summary")
    assert not_measurable("ensemble", oracles) is not None
    assert not_measurable("orchestrate", oracles) is not None and not_measurable("supervise", oracles) is not None
    for protocol in ("confer", "council", "vote", "decide"):
        assert not_measurable(protocol, oracles) is None
    alone = oracles.model_copy(update={"members": oracles.members[:1], "mode": "race"})
    assert not_measurable("ensemble", alone) is None
    real = Panel.model_validate({"members": [{"name": "g", "model": "openai/gpt-4o"}]})
    assert not_measurable("delphi", real) is None


def test_deliberation_names_the_knobs_and_who_has_them():
    panel = Panel.model_validate(
        {
            "members": [
                {"name": "a", "model": "demo/oracle@0.7?herd=0.5&confidence=p"},
                {"name": "b", "model": "demo/oracle@0.7?herd=0.5"},
                {"name": "c", "model": "demo/oracle@0.7?persuade=0.2"},
                {"name": "d", "model": "demo/oracle@0.7"},
            ]
        }
    )
    assert deliberation(panel, "council") == "herd=0.5 (a, b); persuade=0.2 (c)"
    assert deliberation(panel.model_copy(update={"members": panel.members[3:]}), "council") is None


def test_items_are_listed_by_system_and_question_however_their_runs_finished():
    """Runs of an eval finish in any order; its items read in the plan's order of systems,
    then the order the questions were asked."""
    plan = [
        SystemPlan(name=name, protocol="vote", members=["a"], models={"a": "demo/a"}) for name in ("vote", "confer")
    ]
    asked = [EvalItem(id=f"q{index}", question="?", answer="x") for index in range(3)]
    finished = [
        *reversed(results("confer", [True, False, True])),
        *results("vote", [False, True, False])[::-1],
    ]
    result = EvalResult(
        eval_id="e1",
        dataset="d",
        questions=3,
        panel="p",
        baseline="",
        grader="option",
        seed=0,
        concurrency=4,
        plan=plan,
        asked=asked,
        items=finished,
    )
    listed = [(item.system, item.question_id) for item in summarize(result).items]
    assert listed == [
        ("vote", "q0"),
        ("vote", "q1"),
        ("vote", "q2"),
        ("confer", "q0"),
        ("confer", "q1"),
        ("confer", "q2"),
    ]


def test_a_comparison_with_the_baseline_reads_the_same_holm_figure_as_its_pair():
    """The report's verdicts are one family: the comparison with the baseline and the pair it is
    part of give the same adjusted p-value, and a raw p below 0.05 that Holm lifts above it is
    not called significant anywhere."""
    baseline = [True] * 40 + [False] * 20
    confer = [True] * 40 + [True] * 7 + [False] * 13  # 7 right only with confer: p = 0.0156
    council = [True] * 38 + [False] * 2 + [False] * 20
    vote = [True] * 40 + [False] * 20
    plan = [
        SystemPlan(name=name, protocol=protocol, members=["v1"], models={})
        for name, protocol in (("baseline", "ensemble"), ("confer", "confer"), ("council", "council"), ("vote", "vote"))
    ]
    items = [
        *results("baseline", baseline),
        *results("confer", confer),
        *results("council", council),
        *results("vote", vote),
    ]
    result = summarize(
        EvalResult(
            eval_id="e",
            dataset="d",
            questions=60,
            panel="p",
            baseline="v1",
            grader="g",
            seed=0,
            concurrency=1,
            plan=plan,
            items=items,
        )
    )
    pairs = {(pair.first, pair.second): pair for pair in result.pairs}
    for comparison in result.comparisons:
        pair = pairs[("baseline", comparison.system)]
        assert comparison.p_holm == pair.p_holm and comparison.significant == pair.significant
    confer_vs = next(comparison for comparison in result.comparisons if comparison.system == "confer")
    assert confer_vs.p_value < 0.05 < confer_vs.p_holm
    assert confer_vs.verdict.startswith(f"not significant (after Holm, p = {confer_vs.p_holm:.2g})")


def test_an_optimum_line_stands_beside_members_whose_stated_confidence_is_off():
    mixed = oracles(0.9, 0.6, 0.6, 0.6, 0.6)
    line = system_theory("confer", mixed, FOUR)
    assert line.optimum == pytest.approx(0.92832, abs=1e-5)
    assert line.optimum_note.startswith("these members stated 0.8 each; their accuracy (0.9, 0.6, 0.6, 0.6, 0.6)")
    calibrated = Panel.model_validate(
        {
            "tally": "log_odds",
            "members": [
                {"name": f"v{i}", "model": f"demo/oracle@{p}?confidence=p"} for i, p in enumerate((0.9, 0.6, 0.6), 1)
            ],
        }
    )
    assert system_theory("confer", calibrated, FOUR).optimum is None, "stated what they are worth"
    uneven = oracles(0.9, 0.6, 0.6, weights=[1.0, 1.0, 1.0]).model_copy(update={"method": "weighted_plurality"})
    weighed = system_theory("vote", uneven, FOUR)
    assert weighed.optimum is not None and weighed.optimum_note.startswith("these members weigh 1 each")
    assert system_theory("vote", oracles(0.9, 0.6, 0.6), FOUR).optimum is None, "majority reads no weight"


def test_what_ungraded_runs_cost_is_counted_in_the_score():
    spent = Spent().plus(3, 30, None).plus(2, None, 0.25)
    assert spent == Spent(runs=2, calls=5, tokens=30, cost=0.25)
    scored = score_system("vote", "vote", ["a"], results("vote", [True, False], calls=4, tokens=10), 1.0, unkept=spent)
    assert (scored.calls, scored.tokens, scored.cost, scored.unkept_runs) == (13, 50, 0.25, 2)
