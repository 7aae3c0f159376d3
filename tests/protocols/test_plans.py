"""The calls each protocol's plan counts, at least and at most, by hand; no litellm."""

from __future__ import annotations

from typing import Any

import pytest

from panel_cli.config import Panel
from panel_cli.protocols.orchestrate.plan import MAX_TASKS
from panel_cli.protocols.plans import RunPlan, plan_run

BOUND = 100


def panel(names: list[str], **fields: Any) -> Panel:
    members = [
        {"name": name, "model": f"demo/{persona}"}
        for name, persona in zip(names, ["sage", "skeptic", "engineer", "pragmatist", "historian"], strict=False)
    ]
    return Panel.model_validate({"name": "t", "members": members, **fields})


def plan(p: Panel) -> RunPlan:
    return plan_run(p, "Which database?", lambda member: BOUND)


def counts(run: RunPlan) -> list[tuple[str, str | None, int, int]]:
    """(stage, rounds, calls at least, calls at most) per stage."""
    out = []
    for stage in run.stages:
        low, high = stage.pooled or (sum(c.low for c in stage.calls), sum(c.high for c in stage.calls))
        out.append((stage.name, stage.rounds, low, high))
    return out


@pytest.mark.parametrize(("until", "rounds", "low"), [(True, 3, 1), (True, 1, 1), (False, 3, 3)])
def test_confer_may_converge_after_its_first_vote_round(until, rounds, low):
    """A round whose revisions move no answer ends the rounds, so the fewest is one round."""
    run = plan(panel(["a", "b", "c"], protocol="confer", max_rounds=rounds, until_convergence=until))
    assert counts(run) == [("answer", "0", 3, 3), ("vote", "1" if rounds == 1 else f"1–{rounds}", 3 * low, 3 * rounds)]
    vote = run.stages[1].calls[0]
    assert vote.quoted == 3 * BOUND and vote.schema is not None
    assert (
        "=== Answer A" in vote.prompt[0]["content"] and "Your current answer is Answer A." in vote.prompt[0]["content"]
    )


def test_council_review_quotes_every_answer_and_backup_chairmen_only_at_most():
    run = plan(panel(["a", "b", "c"], protocol="council", chairman=["a", "b"]))
    assert counts(run) == [("answer", None, 3, 3), ("review", None, 3, 3), ("synthesis", None, 1, 2)]
    assert [c.quoted for c in run.stages[1].calls] == [3 * BOUND] * 3
    assert run.stages[2].calls[0].quoted == 6 * BOUND  # three answers and three reviews


def test_council_without_self_review_quotes_the_others_only():
    run = plan(panel(["a", "b", "c"], protocol="council", self_review=False))
    assert [c.quoted for c in run.stages[1].calls] == [2 * BOUND] * 3


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"mode": "fanout"}, [("answer", None, 3, 3)]),
        ({"mode": "race"}, [("answer", None, 3, 3)]),
        ({"mode": "consensus", "scorer": "judge:a"}, [("answer", None, 3, 3), ("judge", None, 3, 3)]),
        ({"mode": "synthesize", "aggregator": "b"}, [("answer", None, 3, 3), ("synthesis", None, 1, 1)]),
    ],
)
def test_ensemble_modes(fields, expected):
    assert counts(plan(panel(["a", "b", "c"], protocol="ensemble", **fields))) == expected


def test_vote_and_decide_with_a_leader():
    assert counts(plan(panel(["a", "b", "c"], protocol="vote", options=["x", "y"]))) == [("vote", None, 3, 3)]
    decided = plan(panel(["a", "b", "c"], protocol="decide", options=["x", "y"], leader="c"))
    assert counts(decided) == [("vote", None, 3, 3), ("leader", None, 0, 1)]


def test_delphi_rounds_and_synthesis():
    run = plan(panel(["a", "b", "c"], protocol="delphi", max_rounds=4))
    assert counts(run) == [("contribution", "1", 3, 3), ("contribution", "2–4", 3, 9), ("synthesis", None, 1, 1)]
    assert run.stages[2].calls[0].quoted == 4 * 3 * BOUND
    single = plan(panel(["a", "b"], protocol="delphi", max_rounds=1))
    assert counts(single) == [("contribution", "1", 2, 2), ("synthesis", None, 1, 1)]


def test_supervise_critic_retries_and_corrections():
    workers = [{"name": n, "model": "demo/sage", "task": f"do {n}"} for n in ("w1", "w2")]
    p = Panel.model_validate(
        {
            "name": "t",
            "protocol": "supervise",
            "members": [*workers, {"name": "boss", "model": "demo/skeptic"}],
            "critic": "boss",
            "max_rounds": 2,
        }
    )
    run = plan(p)
    # 2 workers; the critic reviews up to 3 times, each asked once more at most; 2 correction rounds.
    assert counts(run) == [
        ("work", "1", 2, 2),
        ("critique", "1–3", 1, 6),
        ("correction", "2–3", 0, 4),
        ("synthesis", None, 1, 1),
    ]
    correction = run.stages[2].calls[0]
    assert correction.longest is not None and len(correction.longest) == 5  # work, reply, fix, reply, fix


def test_orchestrate_subtasks_are_pooled():
    run = plan(
        panel(
            ["lead", "research", "writing"],
            protocol="orchestrate",
            planner="lead",
            chairman="lead",
            max_plan_attempts=2,
        )
    )
    assert counts(run) == [("plan", "1–2", 1, 2), ("subtasks", None, 1, MAX_TASKS), ("synthesis", None, 1, 1)]
    assert [c.member.name for c in run.stages[1].calls] == ["research", "writing"]
    assert run.notes and "planner decides" in run.notes[0]


FIVE = ["a", "b", "c", "d", "e"]


@pytest.mark.parametrize(
    ("fields", "low"),
    [
        ({"method": "plurality"}, 5),
        ({"method": "plurality", "stop": "decided"}, 3),
        ({"method": "majority", "stop": "decided"}, 3),
        ({"method": "unanimous", "stop": "decided"}, 2),
    ],
)
def test_a_stopping_rule_makes_the_first_wave_the_fewest_calls(fields, low):
    """Under `stop: decided` a vote makes at least the calls its first wave asks (the fewest
    whose ballots could settle it: two who disagree settle that nothing is unanimous) and at
    most everyone's."""
    run = plan(panel(FIVE, protocol="vote", options=["A", "B", "C"], **fields))
    assert counts(run) == [("vote", None, low, 5)]


def test_confident_asks_at_least_the_heaviest_whose_agreement_reaches_the_target():
    """Weights log(2 · 0.9/0.1) over three options: one ballot gives 0.9, two 0.994: two at least
    for 0.95, the heaviest first (e weighs more)."""
    weights = [2.89, 2.89, 2.89, 2.89, 5.0]
    members = [{"name": name, "model": "demo/sage", "weight": w} for name, w in zip(FIVE, weights, strict=True)]
    confident = Panel.model_validate(
        {"name": "t", "protocol": "vote", "options": ["A", "B", "C"], "members": members, "stop": "confident(0.95)"}
    )
    run = plan(confident)
    assert counts(run) == [("vote", None, 1, 5)]
    assert [call.member.name for call in run.stages[0].calls if call.low] == ["e"]


def test_confer_and_ensemble_under_decided():
    confer = plan(panel(FIVE, protocol="confer", stop="decided", max_rounds=2))
    assert counts(confer) == [("answer", "0", 3, 5), ("vote", "1–2", 0, 10)]
    majority = plan(panel(FIVE, protocol="ensemble", mode="majority", stop="decided"))
    assert counts(majority) == [("answer", None, 4, 5)]


def test_a_decision_whose_leader_would_choose_stops_early_only_on_a_winner():
    """Unanimous with a leader: only five agreeing ballots stop before the leader; majority: three."""
    unanimous = plan(panel(FIVE, protocol="decide", options=["A", "B"], method="unanimous", leader="a", stop="decided"))
    assert counts(unanimous)[0] == ("vote", None, 5, 5)
    majority = plan(panel(FIVE, protocol="decide", options=["A", "B"], method="majority", leader="a", stop="decided"))
    assert counts(majority)[0] == ("vote", None, 3, 5)
