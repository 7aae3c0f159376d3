"""`panel orchestrate` from the command line: the demo team with no file, the demo file, the
`--members` forms, a run that finds no valid plan, and the stored run read back by history.

Runs go through Typer's CliRunner in-process (a UserError then surfaces as the runner's
exception); the exit codes that only `main` gives (2 for bad input, 1 without an answer) are
checked in a subprocess.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from panel_cli.errors import UserError
from panel_cli.events import parse_event
from panel_cli.protocols.orchestrate.engine import DEFAULT_WORKERS
from tests.fakes.openai_server import FakeOpenAIServer, RecordedRequest, responder
from tests.helpers import ROOT, cli, cli_json, panel_process

DEMO_FILE = str(ROOT / "configs" / "orchestrate.yaml")
CYCLE = {
    "subtasks": [
        {"task_id": "t1", "worker": "research", "title": "a", "description": "a", "depends_on": ["t2"]},
        {"task_id": "t2", "worker": "writing", "title": "b", "description": "b", "depends_on": ["t1"]},
    ]
}
CYCLE_ERROR = "the dependencies form a cycle: t1 -> t2 -> t1 (each waits for the next)"


def test_demo_with_no_file_runs_the_default_team_offline(tmp_path: Path) -> None:
    result = cli_json(
        "orchestrate", "--demo", "-q", "How should we pick an AI coding assistant?", "--db", str(tmp_path / "r.db")
    )
    assert result["protocol"] == "orchestrate" and result["success"] is True
    assert result["workers"] == ["research", "analysis", "writing"]
    assert result["planner"] == "chairman" and result["chairman"] == "chairman"
    roots = [task for task in result["plan"] if not task["depends_on"]]
    assert len(roots) >= 2, "the demo plan has parallel branches"
    assert {task["worker"] for task in result["plan"]} == {"research", "analysis", "writing"}
    assert result["succeeded"] == len(result["plan"]) and result["failed"] == result["skipped"] == 0
    assert [
        set(task) >= {"id", "worker", "depends_on", "status", "started_at", "ended_at", "output"}
        for task in result["tasks"]
    ] == [True] * 4
    assert result["final_answer"].startswith("[simulated] Synthesis by the")
    assert result["calls"] == 1 + len(result["plan"]) + 1


def test_the_demo_file_runs_offline_and_validates_without_warnings(tmp_path: Path) -> None:
    result = cli_json("orchestrate", DEMO_FILE, "--db", str(tmp_path / "r.db"))
    assert result["planner"] == "planner" and result["chairman"] == "editor"
    assert result["workers"] == ["research", "analysis", "writing"] and result["success"] is True
    assert result["warnings"] == []
    checked = cli("validate", DEMO_FILE)
    assert checked.exit_code == 0, checked.output
    assert "warning" not in checked.output
    assert "workers: research, analysis, writing" in checked.output
    assert "timeouts: plan 2m, task 2m, synthesis 2m" in checked.output


def test_panel_run_dispatches_to_orchestrate(tmp_path: Path) -> None:
    outcome = cli("run", DEMO_FILE, "--quiet", "--db", str(tmp_path / "r.db"))
    assert outcome.exit_code == 0, outcome.output
    assert outcome.stdout.startswith("[simulated] Synthesis by the skeptic")


def test_members_keep_only_some_workers_of_the_file(tmp_path: Path) -> None:
    result = cli_json(
        "orchestrate",
        DEMO_FILE,
        "--members",
        "research,writing",
        "--max-plan-attempts",
        "1",
        "--timeout",
        "1m",
        "--db",
        str(tmp_path / "r.db"),
    )
    assert result["workers"] == ["research", "writing"]
    assert {task["worker"] for task in result["plan"]} == {"research", "writing"}
    assert result["planner"] == "planner" and result["success"] is True


def test_a_planner_left_out_by_members_still_plans(tmp_path: Path) -> None:
    file = tmp_path / "team.yaml"
    file.write_text(
        "protocol: orchestrate\nquestion: Q?\nplanner: boss\nchairman: boss\nmembers:\n"
        "  - {name: boss, model: demo/sage}\n  - {name: research, model: demo/historian}\n  - {name: writing, model: demo/engineer}\n"
    )
    result = cli_json("orchestrate", str(file), "--members", "writing", "--db", str(tmp_path / "r.db"))
    assert result["workers"] == ["writing"] and result["planner"] == "boss" and result["chairman"] == "boss"


def test_members_without_a_file_are_the_models_of_the_default_workers(
    fake_server: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def respond(request: RecordedRequest) -> str:
        prompt = str(request.messages[-1]["content"])
        if "[panel-task: plan]" in prompt:
            workers = re.search(r"Workers:\n((?:- .+\n)+)", prompt).group(1).split()[1::2]
            return json.dumps(
                {
                    "subtasks": [
                        {"task_id": f"t{i}", "worker": w, "title": w, "description": w, "depends_on": []}
                        for i, w in enumerate(workers)
                    ]
                }
            )
        return f"{request.model} says so"

    fake_server.default(responder(respond))
    monkeypatch.setenv("OPENAI_API_BASE", fake_server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    result = cli_json(
        "orchestrate",
        "--members",
        "openai/a,openai/b",
        "--planner",
        "openai/p",
        "--chairman",
        "openai/c",
        "-q",
        "Q?",
        "--db",
        str(tmp_path / "r.db"),
    )
    assert result["workers"] == ["research", "analysis", "writing"]
    assert result["planner"] == "planner" and result["chairman"] == "chairman"
    worker_models = {
        r.messages[0]["content"]: r.model for r in fake_server.requests if r.messages[0]["role"] == "system"
    }
    assert worker_models == {
        DEFAULT_WORKERS["research"]: "a",
        DEFAULT_WORKERS["analysis"]: "b",
        DEFAULT_WORKERS["writing"]: "a",
    }
    assert [r.model for r in fake_server.requests][0] == "p" and fake_server.requests[-1].model == "c"


@pytest.mark.subprocess
def test_no_valid_plan_exits_1_with_the_error(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    """The planner keeps sending a cycle: re-asked once with the error, then the run fails."""
    fake_server.default(responder(lambda request: json.dumps(CYCLE)))
    db = tmp_path / "r.db"
    done = panel_process(
        "orchestrate",
        "--members",
        "openai/a",
        "--max-plan-attempts",
        "2",
        "-q",
        "Q?",
        "--json",
        "--db",
        str(db),
        env={"OPENAI_API_BASE": fake_server.url, "OPENAI_API_KEY": "test"},
    )
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["final_answer"] is None and result["reached_answer"] is False and result["success"] is False
    assert result["failure_reason"] == f"No valid plan after 2 attempts: {CYCLE_ERROR}"
    assert f"panel: No valid plan after 2 attempts: {CYCLE_ERROR} (run {result['run_id']})." in done.stderr
    assert len(fake_server.requests) == 2
    assert f"That plan cannot be used: {CYCLE_ERROR}." in str(fake_server.requests[1].messages[-1]["content"])

    shown = cli("history", "show", result["run_id"], "--db", str(db))
    assert shown.exit_code == 0, shown.output
    assert "orchestrate" in shown.stdout and "no_answer" in shown.stdout


def test_history_reads_an_orchestrate_run_back(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    result = cli_json("orchestrate", "--demo", "-q", "Q?", "--db", str(db))
    listed = cli("history", "list", "--json", "--db", str(db))
    assert json.loads(listed.stdout)[0]["protocol"] == "orchestrate"
    shown = cli("history", "show", result["run_id"], "--db", str(db))
    assert shown.exit_code == 0, shown.output
    assert "subtasks" in shown.stdout and "Synthesis by the" in shown.stdout
    detail = json.loads(cli("history", "show", result["run_id"], "--json", "--db", str(db)).stdout)
    assert detail["result"]["plan"] == result["plan"] and detail["result"]["succeeded"] == 4
    events = [parse_event(payload) for payload in detail["events"]]
    types = [event.type for event in events]
    assert types.count("plan_accepted") == 1 and types.count("task_finished") == 4
    assert len(events[types.index("plan_accepted")].tasks) == 4


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["orchestrate", "-q", "Q?"], "Give a panel file or --members, e.g. panel orchestrate --members gpt-4o,claude"),
        (["orchestrate", DEMO_FILE, "--members", "research,nobody"], "'nobody' is not a member"),
        (["orchestrate", DEMO_FILE, "--planner", "nobody"], "The planner 'nobody' is not a member"),
        (["orchestrate", DEMO_FILE, "--chairman", "research,nobody"], "The chairman 'nobody' is not a member"),
        (["orchestrate", DEMO_FILE, "--timeout", "soon"], "--timeout: 'soon' is not a duration"),
        (
            ["orchestrate", "--members", "demo/nobody", "-q", "Q?"],
            "member 'demo/nobody': unknown demo persona 'nobody'",
        ),
    ],
)
def test_bad_input_is_one_sentence(args: list[str], message: str) -> None:
    outcome = cli(*args)
    assert isinstance(outcome.exception, UserError), outcome.output
    assert message in outcome.exception.message


@pytest.mark.subprocess
def test_bad_input_exits_2_from_a_real_process() -> None:
    done = panel_process("orchestrate", DEMO_FILE, "--planner", "nobody")
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("panel: The planner 'nobody' is not a member of panel 'orchestrate-demo'")
    assert "Traceback" not in done.stderr and done.stdout == ""
