"""orchestrate's plans (docs/protocols.md#orchestrate): read a planner's reply into subtasks (the
arithmetic of a valid task graph is in `graph.py`).

A plan is model output, so it is hostile until checked: every field is validated, and every
problem is written as a sentence the planner can act on, because the same text goes back to
it when it is asked to plan again. Task ids become fence labels in other prompts and rows in
the view, so they are short words, never free text.

Pure functions with no I/O: the engine decides what to feed them, the tests check them by
hand.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from panel_cli.events import PlannedTask
from panel_cli.llm.structured import NO_OBJECT, NoObject, TwoObjects, reply_object

MAX_TASKS = 50
# A reply holding two objects with different subtasks holds two plans, and is no plan.
PLAN_DECISIVE = ("subtasks",)
MAX_ID_LENGTH = 40
# How many problems one rejection lists: enough to fix a plan in one go, short enough to read.
MAX_PROBLEMS = 5
SHOWN_VALUE = 40

_TASK_ID = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.-]{{0,{MAX_ID_LENGTH - 1}}}")


class PlanError(ValueError):
    """Why a reply is not a usable plan, as the sentences the planner is sent back."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        shown = "; ".join(self.problems[:MAX_PROBLEMS])
        more = len(self.problems) - MAX_PROBLEMS
        super().__init__(shown + (f"; and {more} more problem{'s' if more > 1 else ''}" if more > 0 else ""))

    @property
    def message(self) -> str:
        return str(self)


def _shown(value: Any) -> str:
    """A value from the reply, quoted on one short line, so a hostile value cannot flood an error."""
    text = " ".join(str(value).split())
    if len(text) > SHOWN_VALUE:
        text = text[: SHOWN_VALUE - 1] + "…"
    return f"'{text}'"


def _listing(names: Sequence[str]) -> str:
    return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]


def _known_worker(value: str, workers: Sequence[str]) -> str | None:
    """The worker a plan names: exactly, else the one worker it matches ignoring case."""
    if value in workers:
        return value
    folded = [worker for worker in workers if worker.casefold() == value.strip().casefold()]
    return folded[0] if len(folded) == 1 else None


def _read_task(index: int, entry: Any, workers: Sequence[str], problems: list[str]) -> PlannedTask | None:
    """One subtask, or None with its problems added. `worker_type` (seed 003's name) stands for
    `worker`; a subtask that gives both must give the same worker."""
    if not isinstance(entry, dict):
        problems.append(f"subtask {index} is not an object")
        return None
    before = len(problems)
    task_id = entry.get("task_id")
    if not isinstance(task_id, str) or not _TASK_ID.fullmatch(task_id):
        shown = "no task_id" if task_id is None else f"task_id {_shown(task_id)}"
        problems.append(
            f"subtask {index} has {shown}; a task_id is 1 to {MAX_ID_LENGTH} letters, digits, '-', '_' or '.', starting with a letter or digit"
        )
        where = f"subtask {index}"
    else:
        where = task_id
    worker_name, worker_type = entry.get("worker"), entry.get("worker_type")
    named = worker_name if worker_name is not None else worker_type
    worker: str | None = None
    if worker_name is not None and worker_type is not None and worker_name != worker_type:
        problems.append(
            f"{where} gives worker {_shown(worker_name)} and worker_type {_shown(worker_type)}; give one worker"
        )
    elif named is None:
        problems.append(f"{where} names no worker; choose one of {_listing(workers)}")
    elif not isinstance(named, str) or (worker := _known_worker(named, workers)) is None:
        problems.append(f"{where}: worker {_shown(named)} is not one of the workers ({_listing(workers)})")
    texts: dict[str, str] = {}
    for field in ("title", "description"):
        value = entry.get(field, "")
        if not isinstance(value, str):
            problems.append(f"{where}: {field} must be a string")
        else:
            texts[field] = value.strip()
    if len(texts) == 2 and not (texts["title"] or texts["description"]):
        problems.append(f"{where} has neither a title nor a description; say what the worker must do")
    depends_on = entry.get("depends_on", [])
    if depends_on is None:
        depends_on = []
    if not isinstance(depends_on, list) or not all(isinstance(dep, str) for dep in depends_on):
        problems.append(f"{where}: depends_on must be a list of task_ids")
        depends_on = []
    priority = entry.get("priority", 0)
    if isinstance(priority, bool) or not isinstance(priority, int):
        problems.append(f"{where}: priority must be a whole number")
    if len(problems) > before or worker is None or not isinstance(task_id, str):
        return None
    return PlannedTask(
        task_id=task_id,
        worker=worker,
        title=texts["title"],
        description=texts["description"],
        depends_on=list(dict.fromkeys(depends_on)),
        priority=priority,
    )


def find_cycle(depends: Mapping[str, Sequence[str]]) -> list[str] | None:
    """A dependency cycle as the ids along it, first repeated at the end (`t1, t2, t1`: t1
    waits for t2, which waits for t1); None when there is none. Dependencies on ids that are
    not in `depends` are ignored."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in depends[node]:
            if dep not in depends:
                continue
            if state.get(dep) == 1:
                return path[path.index(dep) :] + [dep]
            if dep not in state and (cycle := visit(dep)) is not None:
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in depends:
        if node not in state and (cycle := visit(node)) is not None:
            return cycle
    return None


def read_plan(text: str, workers: Sequence[str], max_tasks: int = MAX_TASKS) -> list[PlannedTask]:
    """The subtasks of a planner's reply (its own JSON object, `{"subtasks": [...]}`: the first
    outside what it quotes, `panel_cli.llm.structured.reply_object`), or PlanError with every
    problem: one plan, unique ids, known workers, known dependencies, none on itself, no
    cycle, at most `max_tasks` subtasks."""
    try:
        data = reply_object(text, PLAN_DECISIVE)
    except TwoObjects as exc:
        raise PlanError([f"{exc}; reply with one plan"]) from None
    except NoObject as exc:
        if str(exc) != NO_OBJECT:
            raise PlanError([str(exc)]) from None
        raise PlanError(
            ['the reply holds no JSON object; reply with one object of the form {"subtasks": [...]}']
        ) from None
    entries = data.get("subtasks")
    if not isinstance(entries, list):
        raise PlanError(
            ["the plan has no 'subtasks' list" if entries is None else "'subtasks' must be a list of subtasks"]
        )
    if not entries:
        raise PlanError(["the plan has no subtasks"])
    if len(entries) > max_tasks:
        raise PlanError([f"the plan has {len(entries)} subtasks; at most {max_tasks} are allowed"])
    problems: list[str] = []
    tasks: list[PlannedTask] = []
    first_use: dict[str, int] = {}
    for index, entry in enumerate(entries, start=1):
        task = _read_task(index, entry, workers, problems)
        if task is None:
            # An id is still taken by a subtask with other problems: its dependents are not unknown.
            task_id = entry.get("task_id") if isinstance(entry, dict) else None
            if isinstance(task_id, str):
                first_use.setdefault(task_id, index)
            continue
        if task.task_id in first_use:
            problems.append(
                f"task_id {_shown(task.task_id)} is used twice (subtasks {first_use[task.task_id]} and {index})"
            )
            continue
        first_use[task.task_id] = index
        tasks.append(task)
    for task in tasks:
        for dep in task.depends_on:
            if dep == task.task_id:
                problems.append(f"{task.task_id} depends on itself")
            elif dep not in first_use:
                problems.append(f"{task.task_id} depends on {_shown(dep)}, which is not a task_id in the plan")
    if problems:
        raise PlanError(problems)
    cycle = find_cycle({task.task_id: task.depends_on for task in tasks})
    if cycle is not None:
        raise PlanError([f"the dependencies form a cycle: {' -> '.join(cycle)} (each waits for the next)"])
    return tasks
