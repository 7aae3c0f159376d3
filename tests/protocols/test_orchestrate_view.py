"""How an orchestrate run is drawn: the task tree in the live view, the plain lines, the
summary, all from events alone (so a replay of stored events draws the same)."""

from __future__ import annotations

from io import StringIO

from rich.console import Console

from panel_cli.events import (
    BaseEvent,
    CallFinished,
    CallStarted,
    MemberInfo,
    PlanAccepted,
    PlannedTask,
    PlanProposed,
    PlanRejected,
    RunFinished,
    RunStarted,
    StageStarted,
    TaskFailed,
    TaskFinished,
    TaskSkipped,
    TaskStarted,
    parse_event,
)
from panel_cli.view.live import LiveView
from panel_cli.view.orchestrate import TaskStage, tree_rows
from panel_cli.view.plain import PlainView
from tests.view.sample import RUN_ID, play, screen

TASKS = [
    PlannedTask(task_id="t1", worker="research", title="Gather the facts"),
    PlannedTask(task_id="t2", worker="analysis", title="[/INST] [bold]size[/bold] the risks"),
    PlannedTask(task_id="t3", worker="analysis", title="Weigh the options", depends_on=["t1"]),
    PlannedTask(task_id="t4", worker="writing", title="Write it up", depends_on=["t3", "t2"]),
    PlannedTask(task_id="t5", worker="writing", title="Summarise", depends_on=["t1"]),
]
ERROR = "t9: worker '[red]x[/red]' is not one of the workers (research, analysis or writing)"
RESULT = {
    "success": False,
    "planner": "boss",
    "chairman": "boss",
    "plan_attempts": [{"attempt": 1}, {"attempt": 2}],
    "plan": [task.model_dump() for task in TASKS],
    "succeeded": 3,
    "failed": 1,
    "skipped": 1,
}


def call(member: str, stage: str, round_: int | None, text: str, about: str | None = None) -> list[BaseEvent]:
    call_id = f"{member}-{stage}-{round_}-{about}"
    common = {
        "call_id": call_id,
        "member": member,
        "model": f"openai/{member}",
        "stage": stage,
        "round": round_,
        "about": about,
    }
    return [CallStarted(**common), CallFinished(**common, text=text, latency=0.5, tokens_in=10, tokens_out=5)]


def orchestrate_events() -> list[BaseEvent]:
    members = [MemberInfo(name=name, model=f"openai/{name}") for name in ("research", "analysis", "writing")]
    return [
        RunStarted(protocol="orchestrate", panel="team", question="Which assistant?", members=members),
        StageStarted(stage="plan", round=1, members=["boss"]),
        *call("boss", "plan", 1, '{"subtasks": []}'),
        PlanProposed(attempt=1, planner="boss"),
        PlanRejected(attempt=1, planner="boss", error=ERROR),
        StageStarted(stage="plan", round=2, members=["boss"]),
        *call("boss", "plan", 2, '{"subtasks": [...]}'),
        PlanProposed(attempt=2, planner="boss"),
        PlanAccepted(attempt=2, planner="boss", tasks=TASKS),
        StageStarted(stage="subtasks", members=["research", "analysis", "writing"]),
        TaskStarted(task_id="t1", worker="research"),
        TaskStarted(task_id="t2", worker="analysis"),
        *call("research", "subtasks", None, "the facts", about="t1"),
        TaskFinished(task_id="t1", worker="research", duration=1.25, preview="The facts: [b]three[/b] vendors"),
        TaskStarted(task_id="t3", worker="analysis"),
        TaskStarted(task_id="t5", worker="writing"),
        TaskFailed(task_id="t2", worker="analysis", duration=2.0, kind="timeout", error="timeout"),
        TaskSkipped(task_id="t4", worker="writing", blocked_by="t2", reason="t2 failed"),
        TaskFinished(task_id="t3", worker="analysis", duration=0.5, preview="Option B wins"),
        TaskFinished(task_id="t5", worker="writing", duration=0.25, preview="In short"),
        StageStarted(stage="synthesis", members=["boss"]),
        *call("boss", "synthesis", None, "The answer."),
        RunFinished(final_answer="The answer.", result=RESULT),
    ]


def test_the_plan_is_drawn_as_a_tree_under_each_subtasks_deepest_dependency():
    rows = tree_rows(PlanAccepted(attempt=1, planner="boss", tasks=TASKS))
    assert [(row.prefix, row.task_id) for row in rows] == [
        ("", "t1"),
        ("├─ ", "t3"),
        ("│  └─ ", "t4"),
        ("└─ ", "t5"),
        ("", "t2"),
    ]


async def test_the_live_view_draws_the_task_tree_as_subtasks_start_and_end():
    console = Console(file=StringIO(), force_terminal=True, width=160)
    await play(LiveView(console), orchestrate_events())
    text = screen(console)
    final = text[text.rindex("subtasks · plan by boss") :]
    table = final[: final.index("synthesis")]
    lines = [line for line in table.splitlines() if line.strip()]

    assert lines[1].split() == ["task", "worker", "after", "status", "start", "time", "title", "/", "output"]
    t1, t3, t4, t5, t2 = lines[3:8]
    assert (
        t1.split()[:3] == ["t1", "research", "succeeded"] and "1.25s" in t1 and "The facts: [b]three[/b] vendors" in t1
    )
    assert t3.split()[:5] == ["├─", "t3", "analysis", "t1", "succeeded"]
    assert t4.split()[:5] == ["│", "└─", "t4", "writing", "t3,"] and "skipped" in t4 and "t2 failed" in t4
    assert t5.split()[:5] == ["└─", "t5", "writing", "t1", "succeeded"]
    assert t2.split()[:3] == ["t2", "analysis", "failed"] and "timeout" in t2
    assert "+" in t1 and "+" not in t4, "a skipped subtask never started"
    assert "plan rejected: t9: worker '[red]x[/red]' is not one of the workers" in text
    assert "the planner is asked again" in text
    assert "plan 5 subtasks after 2 attempts" in text
    assert "subtasks 3 succeeded, 1 failed, 1 skipped" in text and "chairman boss" in text


async def test_a_running_subtask_shows_in_the_live_tree():
    stage = TaskStage("subtasks", None, plan=PlanAccepted(attempt=1, planner="boss", tasks=TASKS))
    stage.update(TaskStarted(task_id="t1", worker="research"))
    assert [row.status for row in stage.tasks] == ["running", "pending", "pending", "pending", "pending"]
    assert stage.progress == "subtasks · 0/5 done, 1 running"
    stage.update(TaskStarted(task_id="t-unknown", worker="research"))
    assert stage.progress == "subtasks · 0/5 done, 1 running"


async def test_plain_lines():
    stream = StringIO()
    await play(PlainView(stream), orchestrate_events())
    lines = stream.getvalue().splitlines()
    for expected in (
        "[round 1] plan proposed by boss",
        f"[round 1] plan rejected: {ERROR}; the planner is asked again",
        "[round 2] plan accepted: 5 subtasks",
        "  t4  writing  after t3, t2  Write it up",
        "  t2  analysis  [/INST] [bold]size[/bold] the risks",
        "[subtasks] t1 started  research",
        "[subtasks] t1 succeeded  research  1.25s",
        "[subtasks] t2 failed  analysis  2.00s  timeout",
        "[subtasks] t4 skipped  writing  t2 failed",
    ):
        assert expected in lines
    assert lines[-1].startswith(
        "run finished  plan 5 subtasks after 2 attempts  subtasks 3 succeeded, 1 failed, 1 skipped"
    )
    assert lines[-1].endswith(f"run {RUN_ID}")


def test_every_orchestrate_event_survives_the_store_round_trip():
    for event in orchestrate_events():
        assert parse_event(event.model_dump(mode="json")) == event


def test_a_final_rejection_says_no_attempt_is_left():
    line = PlainView(StringIO()).line(PlanRejected(attempt=3, planner="boss", error="t1 depends on itself", final=True))
    assert line == "[round 3] plan rejected: t1 depends on itself; no attempt is left"
