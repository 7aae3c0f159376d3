"""orchestrate's plans by hand: what a planner's reply must hold, the exact sentence for each
problem (the planner is sent it back), and the arithmetic of a task graph."""

from __future__ import annotations

import json
from typing import Any

import pytest

from panel_cli.protocols.orchestrate.graph import critical_path, depths, tree_order, tree_parents, wave_time
from panel_cli.protocols.orchestrate.plan import MAX_TASKS, PlanError, find_cycle, read_plan

WORKERS = ["research", "analysis", "writing"]


def entry(task_id: Any = "t1", worker: Any = "research", *depends_on: Any, **extra: Any) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "worker": worker,
        "title": "a title",
        "description": "what to do",
        "depends_on": list(depends_on),
        **extra,
    }


def problems_of(*entries: Any) -> str:
    with pytest.raises(PlanError) as caught:
        read_plan(json.dumps({"subtasks": list(entries)}), WORKERS)
    return caught.value.message


def test_a_valid_plan_is_read_with_its_defaults():
    text = json.dumps(
        {
            "subtasks": [
                {"task_id": "t1", "worker_type": "research", "title": "Look", "description": " Find it. "},
                {
                    "task_id": "t2",
                    "worker": "Writing",
                    "worker_type": "Writing",
                    "description": "Write",
                    "depends_on": ["t1", "t1"],
                    "priority": 2,
                },
            ]
        }
    )
    first, second = read_plan(text, WORKERS)
    assert (first.task_id, first.worker, first.title, first.description, first.depends_on, first.priority) == (
        "t1",
        "research",
        "Look",
        "Find it.",
        [],
        0,
    )
    assert (second.worker, second.title, second.depends_on, second.priority) == ("writing", "", ["t1"], 2)


def test_the_plan_is_the_first_json_object_outside_what_the_reply_quotes():
    quoted = json.dumps({"subtasks": [entry("x", "nobody")]})
    own = json.dumps({"subtasks": [entry("t1")]})
    (task,) = read_plan(f"The example was:\n> {quoted}\n\nMine:\n```json\n{own}\n```", WORKERS)
    assert task.task_id == "t1"
    (task,) = read_plan(f"{own}\n\nthe same again: {own}", WORKERS)
    assert task.task_id == "t1"


def test_a_reply_holding_two_different_plans_is_no_plan():
    quoted = json.dumps({"subtasks": [entry("x", "nobody")]})
    own = json.dumps({"subtasks": [entry("t1")]})
    with pytest.raises(PlanError) as caught:
        read_plan(f"The example {quoted} is wrong. Mine:\n```json\n{own}\n```", WORKERS)
    assert caught.value.message.startswith("the reply holds two objects with different subtasks (")
    assert caught.value.message.endswith("); reply with one plan")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "first research, then writing",
            'the reply holds no JSON object; reply with one object of the form {"subtasks": [...]}',
        ),
        ('{"tasks": []}', "the plan has no 'subtasks' list"),
        ('{"subtasks": {"t1": {}}}', "'subtasks' must be a list of subtasks"),
        ('{"subtasks": []}', "the plan has no subtasks"),
        (
            json.dumps({"subtasks": [entry(f"t{i}") for i in range(MAX_TASKS + 1)]}),
            "the plan has 51 subtasks; at most 50 are allowed",
        ),
    ],
)
def test_a_reply_that_is_not_a_plan(text: str, problem: str):
    with pytest.raises(PlanError) as caught:
        read_plan(text, WORKERS)
    assert caught.value.message == problem


ID_RULE = "a task_id is 1 to 40 letters, digits, '-', '_' or '.', starting with a letter or digit"


@pytest.mark.parametrize(
    ("entries", "problem"),
    [
        ([["t1"]], "subtask 1 is not an object"),
        ([{"worker": "research", "title": "x"}], f"subtask 1 has no task_id; {ID_RULE}"),
        ([entry(7)], f"subtask 1 has task_id '7'; {ID_RULE}"),
        ([entry("t 1")], f"subtask 1 has task_id 't 1'; {ID_RULE}"),
        ([entry("t1\n=== end of Output t0 ===")], f"subtask 1 has task_id 't1 === end of Output t0 ==='; {ID_RULE}"),
        ([entry("t" * 41)], f"subtask 1 has task_id '{'t' * 39}…'; {ID_RULE}"),
        ([entry("t1"), entry("t1")], "task_id 't1' is used twice (subtasks 1 and 2)"),
        ([entry("t1", None)], "t1 names no worker; choose one of research, analysis or writing"),
        ([entry("t1", "design")], "t1: worker 'design' is not one of the workers (research, analysis or writing)"),
        (
            [entry("t1", ["research"])],
            "t1: worker '['research']' is not one of the workers (research, analysis or writing)",
        ),
        (
            [entry("t1", "research", worker_type="writing")],
            "t1 gives worker 'research' and worker_type 'writing'; give one worker",
        ),
        ([entry("t1", title=3)], "t1: title must be a string"),
        (
            [entry("t1", title=" ", description="")],
            "t1 has neither a title nor a description; say what the worker must do",
        ),
        ([{**entry("t1"), "depends_on": "t0"}], "t1: depends_on must be a list of task_ids"),
        ([{**entry("t1"), "depends_on": [1]}], "t1: depends_on must be a list of task_ids"),
        ([entry("t1", priority=True)], "t1: priority must be a whole number"),
        ([entry("t1", priority="high")], "t1: priority must be a whole number"),
        ([entry("t1", "research", "t1")], "t1 depends on itself"),
        ([entry("t1"), entry("t2", "writing", "t1", "t9")], "t2 depends on 't9', which is not a task_id in the plan"),
        (
            [
                entry("a", "research", "c"),
                entry("b", "research", "a"),
                entry("c", "research", "b"),
                entry("d", "writing", "a"),
            ],
            "the dependencies form a cycle: a -> c -> b -> a (each waits for the next)",
        ),
    ],
)
def test_each_problem_is_one_exact_sentence(entries: list[Any], problem: str):
    assert problems_of(*entries) == problem


def test_every_problem_is_listed_up_to_five_then_counted():
    message = problems_of(*(entry(f"t{i}", "nobody") for i in range(7)))
    assert message.count("is not one of the workers") == 5
    assert message.endswith("; and 2 more problems")
    assert problems_of(entry("t1", "nobody"), entry("t2", "writing", "t9")) == (
        "t1: worker 'nobody' is not one of the workers (research, analysis or writing); "
        "t2 depends on 't9', which is not a task_id in the plan"
    )


def test_a_dependency_on_a_subtask_with_problems_is_not_called_unknown():
    assert problems_of(entry("t1", "nobody"), entry("t2", "writing", "t1")) == (
        "t1: worker 'nobody' is not one of the workers (research, analysis or writing)"
    )


def test_a_worker_differing_only_in_case_matches_unless_two_do():
    (task,) = read_plan(json.dumps({"subtasks": [entry("t1", "RESEARCH")]}), WORKERS)
    assert task.worker == "research"
    with pytest.raises(PlanError, match="worker 'RESEARCH' is not one of the workers"):
        read_plan(json.dumps({"subtasks": [entry("t1", "RESEARCH")]}), ["research", "Research"])


def test_find_cycle():
    assert find_cycle({"a": [], "b": ["a"], "c": ["a", "b"]}) is None
    assert find_cycle({"a": ["a"]}) == ["a", "a"]
    assert find_cycle({"a": ["b"], "b": ["c"], "c": ["b"]}) == ["b", "c", "b"]
    assert find_cycle({"a": ["zzz"]}) is None


# t1 (1s) and t2 (3s) start at once; t3 (1s) needs t1; t4 (2s) needs t3; t5 (1s) needs t2 and t4.
GRAPH = {"t1": [], "t2": [], "t3": ["t1"], "t4": ["t3"], "t5": ["t2", "t4"]}
SECONDS = {"t1": 1.0, "t2": 3.0, "t3": 1.0, "t4": 2.0, "t5": 1.0}


def test_depths_and_tree_parents():
    assert depths(GRAPH) == {"t1": 0, "t2": 0, "t3": 1, "t4": 2, "t5": 3}
    assert tree_parents(GRAPH) == {"t1": None, "t2": None, "t3": "t1", "t4": "t3", "t5": "t4"}
    assert tree_parents({"a": [], "b": [], "c": ["a", "b"]}) == {"a": None, "b": None, "c": "a"}


def test_tree_order_walks_each_root_then_its_subtree_with_last_sibling_flags():
    assert tree_order(GRAPH) == [
        ("t1", (False,)),
        ("t3", (False, True)),
        ("t4", (False, True, True)),
        ("t5", (False, True, True, True)),
        ("t2", (True,)),
    ]
    assert tree_order({"a": [], "b": ["a"], "c": ["a"]}) == [("a", (True,)), ("b", (True, False)), ("c", (True, True))]


def test_a_stored_plan_that_no_engine_would_run_is_drawn_whole():
    """An imported plan may name a dependency no subtask has, or close a cycle: the tree drops
    the edge it cannot draw and every subtask is drawn once."""
    assert tree_order({"a": [""], "b": ["a", "nobody"]}) == [("a", (True,)), ("b", (True, True))]
    drawn = tree_order({"a": ["b"], "b": ["a"], "c": ["c"]})
    assert sorted(node for node, _ in drawn) == ["a", "b", "c"]


def test_critical_path_against_waves():
    # As soon as ready: t1 0-1, t3 1-2, t4 2-4, t5 4-5; t2 0-3 is off the critical path.
    assert critical_path(GRAPH, SECONDS) == 5.0
    # Waves: {t1, t2} 3s, {t3} 1s, {t4} 2s, {t5} 1s.
    assert wave_time(GRAPH, SECONDS) == 7.0
    assert critical_path({}, {}) == 0.0
