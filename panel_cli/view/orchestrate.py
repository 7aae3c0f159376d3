"""How orchestrate looks: the task graph as a tree that updates as subtasks start and end, the
plain lines of its events, and its facts in the run's summary.

The tree is drawn from events alone (the accepted plan, then each subtask's start and end), so
a replay draws it as the run did. Each subtask hangs under its deepest dependency, so its
indent is its depth, and its row lists every dependency it waits for. Plan titles, outputs
and errors are model text: they go in as `Text`, never as markup.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.text import Text

from panel_cli.protocols.orchestrate.graph import tree_order
from panel_cli.view import fmt
from panel_cli.view.tables import (
    LATENCY_WIDTH,
    TEXT_WIDTH,
    TOOLS_WIDTH,
    Column,
    Preview,
    RunSoFar,
    StageState,
    fitted_table,
    warning_line,
)
from panel_cli.view.tools import ToolActivity, tools_cell

if TYPE_CHECKING:
    # Only named: the tree reads each event by its fields, so `panel history show` draws a
    # stored plan from its payloads without loading the event models.
    from panel_cli.events import (
        PlanAccepted,
        PlanProposed,
        PlanRejected,
        TaskFailed,
        TaskFinished,
        TaskSkipped,
        TaskStarted,
    )

TaskState = Literal["pending", "running", "succeeded", "failed", "skipped"]

TASK_STYLES: dict[TaskState, str] = {
    "pending": "dim",
    "running": "cyan",
    "succeeded": "green",
    "failed": "bold red",
    "skipped": "yellow",
}
ERROR_LIMIT = 200


@dataclass
class TaskRow:
    task_id: str
    worker: str
    title: str
    depends_on: list[str]
    prefix: str = ""
    status: TaskState = "pending"
    start: float | None = None
    duration: float | None = None
    note: str = ""


def tree_rows(plan: PlanAccepted) -> list[TaskRow]:
    """The plan's subtasks in drawing order (`tree_order`), each with the branch lines
    (`├─ `, `│  └─ `) that lead to it."""
    by_id = {task.task_id: task for task in plan.tasks}
    rows: list[TaskRow] = []
    for task_id, lasts in tree_order({task.task_id: task.depends_on for task in plan.tasks}):
        task = by_id[task_id]
        rows.append(TaskRow(task_id, task.worker, task.title, task.depends_on, prefix=branch_lines(lasts)))
    return rows


def branch_lines(lasts: tuple[bool, ...]) -> str:
    """A root has none; below the roots, a bar for each ancestor with siblings still to come,
    then the row's own branch."""
    if len(lasts) <= 1:
        return ""
    return "".join("   " if last else "│  " for last in lasts[1:-1]) + ("└─ " if lasts[-1] else "├─ ")


def task_stage(stage: str, round_: int | None, seen: RunSoFar) -> StageState:
    """orchestrate's subtasks stage: the task graph once the plan is in, else the calls' table."""
    return TaskStage(stage, round_, plan=seen.plan) if seen.plan is not None else StageState(stage, round_)


@dataclass
class TaskStage(StageState):
    """The subtasks stage of an orchestrate run: drawn as the task graph rather than as a
    table of calls (the calls still count in the run's totals)."""

    plan: PlanAccepted | None = None
    tasks: list[TaskRow] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.plan is not None and not self.tasks:
            self.tasks = tree_rows(self.plan)

    @property
    def progress(self) -> str:
        done = sum(row.status in ("succeeded", "failed", "skipped") for row in self.tasks)
        running = sum(row.status == "running" for row in self.tasks)
        return f"subtasks · {done}/{len(self.tasks)} done" + (f", {running} running" if running else "")

    def update(self, event: TaskStarted | TaskFinished | TaskFailed | TaskSkipped) -> None:
        row = next((row for row in self.tasks if row.task_id == event.task_id), None)
        if row is None:
            return
        match event.type:
            case "task_started":
                row.status = "running"
                origin = self.plan.ts if self.plan is not None else 0.0
                row.start = max(event.ts - origin, 0.0) if event.ts and origin else None
            case "task_finished":
                row.status, row.duration, row.note = "succeeded", event.duration, event.preview
            case "task_failed":
                row.status, row.duration, row.note = "failed", event.duration, event.error
            case "task_skipped":
                row.status, row.note = "skipped", event.reason

    def render(self) -> RenderableType:
        return Group(TaskTable(self), *(warning_line(warning) for warning in self.warnings))


class TaskTable:
    """The tree as a table, laid out for the width it is drawn at (Live redraws it on resize)."""

    def __init__(self, stage: TaskStage) -> None:
        self.stage = stage

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        title = "subtasks" if self.stage.plan is None else f"subtasks · plan by {self.stage.plan.planner}"
        yield fitted_table(title, self.columns(), len(self.stage.tasks), options.max_width)

    def columns(self) -> list[Column]:
        rows = self.stage.tasks
        # A running subtask's output as it is written (its call's row is about the subtask).
        writing = {row.about: row.preview for row in self.stage.rows if row.about and row.status == "writing"}
        # The plan is known when the stage opens: its tasks and workers are the columns' floors.
        tasks = [Text.assemble((row.prefix, "dim"), (row.task_id, "bold")) for row in rows]
        return [
            Column("task", tasks, keep=0, floor=max((cell.cell_len for cell in tasks), default=0)),
            Column(
                "worker",
                [Text(row.worker) for row in rows],
                keep=2,
                floor=max((len(row.worker) for row in rows), default=0),
            ),
            Column("after", [Text(", ".join(row.depends_on)) for row in rows], keep=3, shrink_to=8),
            Column(
                "status",
                [Text(row.status, style=TASK_STYLES[row.status]) for row in rows],
                keep=0,
                floor=max(len(status) for status in TASK_STYLES),
            ),
            Column(
                "start",
                [Text("" if row.start is None else f"+{fmt.seconds(row.start)}") for row in rows],
                keep=6,
                floor=len("+") + LATENCY_WIDTH,
                justify="right",
            ),
            Column(
                "time",
                [Text("" if row.duration is None else fmt.seconds(row.duration)) for row in rows],
                keep=5,
                floor=LATENCY_WIDTH,
                justify="right",
            ),
            *self.tools_columns(),
            Column(
                "title / output",
                [_note(row, writing.get(row.task_id)) for row in rows],
                keep=4,
                shrink_to=TEXT_WIDTH,
                fill=True,
                style="dim",
            ),
        ]

    def tools_columns(self) -> list[Column]:
        """Each subtask's tool calls (its call's row is about the subtask), when a tool server
        serves one of the workers."""
        if not self.stage.uses_tools:
            return []
        used: dict[str, list[ToolActivity]] = {
            row.about: row.tools for row in self.stage.rows if row.about and row.tools
        }
        cells = [tools_cell(used.get(row.task_id, []), TOOLS_WIDTH) for row in self.stage.tasks]
        return [Column("tools", cells, keep=3, floor=TOOLS_WIDTH, shrink_to=16)]


def _note(row: TaskRow, so_far: str | None = None) -> Preview:
    """The title until the subtask ends, or the end of its output `so_far` while it is written;
    then its output's beginning, its error, or why it was skipped."""
    if so_far is not None and row.status == "running":
        return Preview(Text(so_far), from_end=True)
    text = fmt.one_line(row.note or row.title)
    return Preview(Text(text, style="red" if row.status == "failed" else ""))


def rejection_note(event: PlanRejected) -> str:
    """What the plan stage says of a rejected plan."""
    then = "no attempt is left" if event.final else "the planner is asked again"
    return f"plan rejected: {fmt.one_line(event.error, ERROR_LIMIT)}; {then}"


def _plan_proposed_line(event: PlanProposed) -> str:
    return f"[round {event.attempt}] plan proposed by {event.planner}"


def _plan_rejected_line(event: PlanRejected) -> str:
    return f"[round {event.attempt}] {rejection_note(event)}"


def _plan_accepted_line(event: PlanAccepted) -> str:
    lines = [f"[round {event.attempt}] plan accepted: {len(event.tasks)} subtask{'' if len(event.tasks) == 1 else 's'}"]
    for task in event.tasks:
        after = f"  after {', '.join(task.depends_on)}" if task.depends_on else ""
        lines.append(f"  {task.task_id}  {task.worker}{after}  {fmt.one_line(task.title, 80)}")
    return "\n".join(lines)


def _task_started_line(event: TaskStarted) -> str:
    return f"[subtasks] {event.task_id} started  {event.worker}"


def _task_finished_line(event: TaskFinished) -> str:
    return f"[subtasks] {event.task_id} succeeded  {event.worker}  {fmt.seconds(event.duration)}"


def _task_failed_line(event: TaskFailed) -> str:
    error = fmt.one_line(event.error, ERROR_LIMIT)
    return f"[subtasks] {event.task_id} failed  {event.worker}  {fmt.seconds(event.duration)}  {error}"


def _task_skipped_line(event: TaskSkipped) -> str:
    return f"[subtasks] {event.task_id} skipped  {event.worker}  {fmt.one_line(event.reason, ERROR_LIMIT)}"


# The plain view's line (or lines) for each orchestrate event.
PLAIN_LINES: dict[str, Callable[[Any], str]] = {
    "plan_proposed": _plan_proposed_line,
    "plan_rejected": _plan_rejected_line,
    "plan_accepted": _plan_accepted_line,
    "task_started": _task_started_line,
    "task_finished": _task_finished_line,
    "task_failed": _task_failed_line,
    "task_skipped": _task_skipped_line,
}
