"""`panel council` and `panel ensemble` from the command line.

The `--members` form runs in a subprocess against the fake server, exactly as a user runs
it (litellm picks the endpoint from OPENAI_API_BASE). Other runs go through Typer's
CliRunner in-process; bad input runs in a subprocess too, since only `main` turns a user
error into exit code 2.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from panel_cli.cli.app import app
from tests.fakes.openai_server import (
    FakeOpenAIServer,
    RecordedRequest,
    error,
    responder,
)
from tests.helpers import ROOT, cli, panel_process


def council_member(request: RecordedRequest) -> str:
    """Answers, reviews (ranking in the order shown) and syntheses, by the prompt's task."""
    prompt = str(request.messages[-1]["content"])
    task = re.findall(r"\[panel-task: ([a-z.]+)\]", prompt)[-1]
    if task == "council.review":
        labels = re.findall(r"^=== Model ([A-Z]+) \[[0-9a-f]{8}\] ===$", prompt, re.MULTILINE)
        return "FINAL RANKING: " + ", ".join(f"Model {label}" for label in labels)
    if task == "council.synthesis":
        return f"The council's answer, by {request.model}."
    return f"{request.model} thinks so."


@pytest.mark.subprocess
def test_members_form_without_a_file_end_to_end(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    fake_server.default(responder(council_member))
    db = tmp_path / "runs.db"
    done = panel_process(
        "council",
        "--members",
        "openai/a,openai/b",
        "--chairman",
        "openai/b",
        "-q",
        "How should we architect auth?",
        "--json",
        "--db",
        str(db),
        env={"OPENAI_API_BASE": fake_server.url, "OPENAI_API_KEY": "test"},
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["outcome"] == "answered"
    assert result["final_answer"] == "The council's answer, by b."
    assert result["stage3_synthesis"]["chairman"] == "openai/b"
    assert result["labels"] == {"Model A": "openai/a", "Model B": "openai/b"}
    assert [e["name"] for e in result["aggregate_ranking"]] == ["openai/a", "openai/b"]
    assert sorted(r.model for r in fake_server.requests) == ["a", "a", "b", "b", "b"]
    assert all(r.headers.get("authorization") == "Bearer test" for r in fake_server.requests)
    assert db.exists() and result["run_id"]


def test_the_question_on_stdin_and_the_answer_on_stdout(tmp_path: Path) -> None:
    outcome = cli(
        "council",
        "--members",
        "demo/sage,demo/skeptic,demo/sage",
        "--quiet",
        "--db",
        str(tmp_path / "r.db"),
        input="Which queue should we use?\n",
    )
    assert outcome.exit_code == 0, outcome.output
    assert outcome.stdout.startswith("[simulated] Synthesis by the sage")
    assert "Which queue should we use?" in outcome.stdout


def test_a_council_with_no_answers_exits_1(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    fake_server.default(error(400, "nope"))
    runner_env = {"OPENAI_API_BASE": fake_server.url, "OPENAI_API_KEY": "test", "COLUMNS": "200"}
    outcome = CliRunner(env=runner_env).invoke(
        app, ["council", "--members", "openai/a,openai/b", "-q", "Q?", "--quiet", "--db", str(tmp_path / "r.db")]
    )
    assert outcome.exit_code == 1
    assert outcome.stdout == "", "no answer: nothing on stdout"
    assert "panel: Council deliberation failed: no responses collected (run " in outcome.stderr
    assert len(fake_server.requests) == 2


def test_the_demo_council_file_with_its_options(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    outcome = cli(
        "council",
        str(ROOT / "configs" / "council.yaml"),
        "--no-anonymize",
        "--timeout",
        "1m",
        "--json",
        "--db",
        str(db),
    )
    assert outcome.exit_code == 0, outcome.output
    result = json.loads(outcome.stdout)
    assert result["anonymize"] is False and result["shuffle"] is True and result["seed"] == 7
    assert all(review["ranking"] for review in result["stage2_reviews"]), "named reviews are parsed too"
    assert result["stage3_synthesis"]["chairman"] == "sage"
    assert set(result["bias"]) >= {"own_first_share", "shown_first_share"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ensemble", "configs/ensemble.yaml", "--mode", "race"], "first to answer"),
        (["ensemble", "configs/ensemble.yaml", "--mode", "fanout"], "### sage"),
        (["ensemble", "configs/ensemble.yaml", "--mode", "majority"], "[simulated]"),
        (["ensemble", "configs/ensemble.yaml", "--scorer", "judge:engineer"], "judge engineer"),
        (
            ["ensemble", "configs/ensemble.yaml", "--mode", "synthesize", "--aggregator", "optimist"],
            "Synthesis by the optimist",
        ),
    ],
)
def test_ensemble_modes_on_the_demo_file(args: list[str], message: str, tmp_path: Path) -> None:
    file = str(ROOT / args[1])
    outcome = cli(args[0], file, *args[2:], "--json", "--db", str(tmp_path / "r.db"))
    assert outcome.exit_code == 0, outcome.output
    result = json.loads(outcome.stdout)
    assert result["mode"] == (args[3] if args[2] == "--mode" else "consensus")
    assert message in result["final_answer"] + result["reason"]


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["council", "-q", "Q?"], "Give a panel file or --members"),
        (["council", "--members", "demo/sage", "-q", "Q?"], "A council needs at least 2 members"),
        (
            ["council", "--members", "demo/sage,demo/nobody", "-q", "Q?"],
            "member 'demo/nobody': unknown demo persona 'nobody'",
        ),
        (["council", "configs/council.yaml", "--chairman", "nobody"], "'nobody' is not a member"),
        (["council", "configs/council.yaml", "--timeout", "soon"], "--timeout: 'soon' is not a duration"),
        (["council", "configs/council.yaml", "--members", "sage,nobody"], "'nobody' is not a member"),
        (["council", "configs/council.yaml", "--members", "sage,sage"], "--members: 'sage' is given twice."),
        (["confer", "configs/demo.yaml", "--agents", "sage,sage"], "--members: 'sage' is given twice."),
        (["council", "--members", "gpt-5-ultra,demo/sage", "-q", "Q?"], "write openai/gpt-5-ultra (panel models"),
        (["council", "--members", "sage,skeptic", "-q", "Q?"], "did you mean demo/sage?"),
        (["ensemble", "configs/ensemble.yaml", "--mode", "vote"], "--mode: 'vote' is not a mode; choose fanout, race"),
        (["ensemble", "configs/ensemble.yaml", "--scorer", "longest"], "The scorer 'longest' is not known"),
        (["ensemble", "configs/ensemble.yaml", "--scorer", "judge:zed"], "The judge 'zed' is not a member"),
        (
            ["ensemble", "configs/ensemble.yaml", "--mode", "race", "--aggregator", "sage"],
            "--aggregator applies to --mode synthesize",
        ),
        (
            ["ensemble", "configs/ensemble.yaml", "--mode", "synthesize", "--aggregator", "zed"],
            "The aggregator 'zed' is not a member",
        ),
    ],
)
def test_bad_input_is_one_sentence_and_exit_2(args: list[str], message: str) -> None:
    done = panel_process(*args)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1
    assert done.stdout == ""
