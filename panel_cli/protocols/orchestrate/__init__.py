"""orchestrate: a planner splits the question into a dependency graph of subtasks for specialised
workers; each runs as soon as its dependencies are done; a chairman writes the answer
(docs/protocols.md#orchestrate)."""

from panel_cli.protocols.options import chairman, timeout
from panel_cli.protocols.registry import CommandOption, ProtocolSpec, RequestKind

PROTOCOL = ProtocolSpec(
    name="orchestrate",
    summary="A planner splits the question into subtasks for specialised workers; each runs as soon as its "
    "dependencies are done; a chairman writes the answer.",
    source="panel_cli.protocols.orchestrate.team:panel_for_command",
    settings="panel_cli.protocols.orchestrate.settings:OrchestrateSettings",
    stage_views={"subtasks": "panel_cli.view.orchestrate:task_stage"},
    options=(
        CommandOption(
            name="members",
            flag="--members",
            help="With a file: only these workers, comma-separated. Without one: models (aliases or litellm ids) "
            "for the default workers research, analysis and writing, in turn.",
            completion="member_names",
        ),
        CommandOption(
            name="planner",
            flag="--planner",
            help="Who plans: a member (with a file) or a model (without). Default: the chairman.",
            completion="member_names",
        ),
        chairman(),
        CommandOption(
            name="max_plan_attempts",
            flag="--max-plan-attempts",
            help="Ask the planner at most this many times for a valid plan (default 3).",
            kind="int",
            field="max_plan_attempts",
            minimum=1,
            maximum=10,
        ),
        timeout(("plan", "task"), "Time limit for each plan attempt and each subtask, like 90s, 3m or none."),
    ),
    requests=(
        RequestKind("plan", demo="panel_cli.llm.demo_replies:plan"),
        RequestKind("orchestrate.task", demo="panel_cli.llm.demo_replies:orchestrate_task"),
        RequestKind("orchestrate.synthesis", demo="panel_cli.llm.demo_replies:orchestrate_synthesis"),
    ),
    plain_lines="panel_cli.view.orchestrate:PLAIN_LINES",
    no_theory="orchestrate's answer is put together from sub-tasks, not a count of the voters' beliefs",
    unmeasurable="orchestrate's answer is put together from sub-tasks; simulated voters write no plan or sub-task",
)
