"""`panel confer` as a user runs it: offline, against demo or the fake server; a real subprocess for
stdin, signals and exit codes, in process for the rest."""

from __future__ import annotations

import io
import json
import os
import signal
import sqlite3
from pathlib import Path

import pytest
from rich.console import Console

from panel_cli.events import MemberInfo, RunStarted
from panel_cli.view.live import LiveView
from tests.fakes.openai_server import hang, responder
from tests.helpers import (
    cli,
    cli_json,
    panel_process,
    run_python,
    start_panel,
    stored_count,
    wait_until,
    write_panel,
)

pytestmark = pytest.mark.subprocess


def test_demo_json_is_the_only_thing_on_stdout(tmp_path):
    result = panel_process("confer", "configs/demo.yaml", "--json", "--db", str(tmp_path / "runs.db"))
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["final_answer"].startswith("[simulated]")
    assert data["winner"] in {"sage", "skeptic", "pragmatist", "engineer"}
    assert data["calls"] == 4 * (1 + len(data["rounds"]))
    rows = sqlite3.connect(tmp_path / "runs.db").execute("select id, status from runs").fetchall()
    assert rows == [(data["run_id"], "finished")]


def test_dash_q_dash_reads_the_question_from_stdin_and_agents_subset(tmp_path):
    result = panel_process(
        "confer",
        "configs/demo.yaml",
        "--agents",
        "skeptic,sage",
        "--max-rounds",
        "1",
        "--json",
        "-q",
        "-",
        stdin="Tea or coffee?",
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["question"] == "Tea or coffee?"
    assert set(data["initial_answers"]) == {"skeptic", "sage"} and data["calls"] == 4


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["confer", "configs/missing.yaml"], "configs/missing.yaml: no such file."),
        (["confer", "configs/demo.yaml", "--agents", "sage,ghost"], "'ghost' is not a member"),
        (["confer", "configs/demo.yaml", "--max-rounds", "0"], "--max-rounds"),
    ],
)
def test_user_errors_exit_2_with_one_sentence(args, message):
    result = panel_process(*args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_panel_file_names_file_line_and_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("members:\n  - name: a\n    model: demo/sage\n    temprature: 0.2\n")
    result = panel_process("validate", str(bad))
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        == f"panel: {bad}, line 4: members[0].temprature: unknown field (did you mean 'temperature'?)."
    )


def test_every_missing_key_is_listed_at_once_before_any_call(tmp_path, monkeypatch):
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "MY_PROXY_KEY"):
        monkeypatch.delenv(name, raising=False)
    file = tmp_path / "p.yaml"
    file.write_text(
        "question: hi\nmembers:\n  - name: claude\n    model: anthropic/claude-sonnet-4-5\n"
        "  - name: gpt\n    model: openai/gpt-4o\n"
        "  - name: proxy\n    model: openai/x\n    api_base: http://127.0.0.1:9\n    api_key_env: MY_PROXY_KEY\n"
    )
    result = panel_process("confer", str(file), "--db", str(tmp_path / "runs.db"))
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert lines == [
        "panel: Member 'claude' (anthropic/claude-sonnet-4-5) needs ANTHROPIC_API_KEY.",
        "panel: Member 'gpt' (openai/gpt-4o) needs OPENAI_API_KEY.",
        "panel: Member 'proxy' (openai/x) needs the environment variable MY_PROXY_KEY (its api_key_env).",
        "panel: Set them, or try the panel offline with --demo.",
    ]
    assert not (tmp_path / "runs.db").exists(), "nothing was started"


def test_no_answer_exits_1(tmp_path, fake_server):
    from tests.fakes.openai_server import error

    fake_server.default(error(400, "refused"))
    file = write_panel(tmp_path / "p.yaml", fake_server, ["a", "b"], "question: hi")
    result = panel_process("confer", str(file), "--json", "--db", str(tmp_path / "runs.db"))
    assert result.returncode == 1
    assert json.loads(result.stdout)["final_answer"] is None
    status = sqlite3.connect(tmp_path / "runs.db").execute("select status from runs").fetchone()
    assert status == ("no_answer",)


def test_plain_progress_goes_to_stderr_and_the_answer_to_stdout(tmp_path):
    result = panel_process("confer", "configs/demo.yaml", "--max-rounds", "1", "--db", str(tmp_path / "r.db"))
    assert result.returncode == 0
    assert result.stdout.startswith("[simulated]") and result.stdout.count("\n") == 1
    assert "round 1 tallied" in result.stderr


@pytest.mark.parametrize("args", [["--help"], ["history", "list", "--help"], ["history", "list"]])
def test_fast_commands_do_not_import_litellm(args, tmp_path):
    code = (
        "import sys\n"
        f"sys.argv = ['panel', *{args!r}]\n"
        "from panel_cli.cli.app import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('LITELLM' if 'litellm' in sys.modules else 'NO-LITELLM')\n"
    )
    result = run_python(code)
    assert result.stdout.strip().endswith("NO-LITELLM"), result.stdout + result.stderr


def test_ctrl_c_mid_round_keeps_the_run_as_interrupted(tmp_path, fake_server):
    def answer_then_hang(request):
        return "an answer"

    fake_server.script("a", responder(answer_then_hang), hang())
    fake_server.script("b", responder(answer_then_hang), hang())
    file = write_panel(tmp_path / "p.yaml", fake_server, ["a", "b"], "question: hi")
    db = tmp_path / "runs.db"
    process = start_panel("confer", str(file), "--db", str(db))
    try:
        wait_until(lambda: len(fake_server.requests) >= 4, "the vote round to start", process=process)
        started = "select count(*) from events where type = 'call_started'"
        wait_until(lambda: stored_count(db, started) == 4, "the votes to be in the store", process=process)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    con = sqlite3.connect(db)
    assert con.execute("select status from runs").fetchone() == ("interrupted",)
    types = [row[0] for row in con.execute("select type from events order by seq")]
    assert types[0] == "run_started" and types[-1] == "run_interrupted"
    assert types.count("call_finished") == 2 and "stage_started" in types
    calls = con.execute("select stage, error_kind from calls order by ts").fetchall()
    assert calls[:2] == [("answer", None), ("answer", None)]
    assert ("vote", "cancelled") in calls


def test_no_key_reaches_the_database(tmp_path, fake_server, monkeypatch):
    secret = "fake-test-Zq8Xv3Lm1Np0Rt7Ws2Ke9Yb4"
    monkeypatch.setenv("OPENAI_API_KEY", secret)

    def leak(request):
        return f"my header was {request.headers.get('authorization')}"

    fake_server.script("a", responder(leak))
    fake_server.script("b", responder(leak))
    file = write_panel(tmp_path / "p.yaml", fake_server, ["a", "b"], f"question: is {secret} safe?", "max_rounds: 1")
    db = tmp_path / "runs.db"
    result = panel_process("confer", str(file), "--db", str(db), "--json")
    assert result.returncode == 0, result.stderr
    assert any(secret in str(r.headers) for r in fake_server.requests), "the key was really used"
    for path in tmp_path.glob("runs.db*"):
        assert secret.encode() not in path.read_bytes(), path.name
    assert secret not in result.stdout


# members, as every protocol takes them ----------------------------------------------------------


def test_confer_takes_members_as_every_other_protocol(tmp_path: Path) -> None:
    """--members: models without a file, a subset of a file's (--agents is the same option), else
    the default panel in the config directory, else --demo's five personas."""
    models = cli_json("confer", "--members", "demo/sage,demo/skeptic", "--max-rounds", "1", "-q", "Tea or coffee?")
    assert sorted(models["initial_answers"]) == ["demo/sage", "demo/skeptic"] and models["calls"] == 4
    subset = cli_json("confer", "configs/demo.yaml", "--members", "skeptic,sage", "--max-rounds", "1")
    assert list(subset["initial_answers"]) == ["skeptic", "sage"]
    alias = cli_json("confer", "configs/demo.yaml", "--agents", "skeptic,sage", "--max-rounds", "1")
    assert list(alias["initial_answers"]) == ["skeptic", "sage"]
    demo = cli_json("confer", "--demo", "--max-rounds", "1", "-q", "Tea or coffee?")
    assert list(demo["initial_answers"]) == ["sage", "skeptic", "pragmatist", "optimist", "engineer"]
    (Path(os.environ["PANEL_CONFIG_DIR"]) / "defaults.yaml").write_text(
        "members:\n  - {name: mine, model: demo/engineer}\n  - {name: yours, model: demo/historian}\n"
    )
    default = cli_json("confer", "--max-rounds", "1", "-q", "Tea or coffee?")
    assert list(default["initial_answers"]) == ["mine", "yours"]


def test_a_one_member_confer_holds_no_vote_and_says_so(tmp_path: Path) -> None:
    """Its member would vote on its own answer round after round: it answers once, its answer stands."""
    alone = cli_json("confer", "configs/demo.yaml", "--members", "sage")
    assert (alone["calls"], alone["rounds"], alone["winner"], alone["final_answer_source"]) == (
        1,
        [],
        "sage",
        "first_answer",
    )
    assert alone["final_answer"] == alone["initial_answers"]["sage"]
    assert alone["warnings"] == ["--members: one member: no vote round is held, and its answer is the final answer."]
    file = tmp_path / "alone.yaml"
    file.write_text("question: Tea?\nmembers:\n  - {name: a, model: demo/sage}\n")
    validated = cli("validate", str(file))
    assert validated.exit_code == 0
    assert f"{file}, line 2: members: one member: no vote round is held" in validated.stderr
    estimate = cli_json("estimate", str(file))
    assert (estimate["calls_low"], estimate["calls_high"], [s["stage"] for s in estimate["stages"]]) == (
        1,
        1,
        ["answer"],
    )


# the rules in force, named wherever the run is shown ---------------------------------------------


def test_the_tally_and_answer_order_are_named_in_every_view_and_the_result() -> None:
    args = ("confer", "configs/demo.yaml", "--tally", "log_odds", "--answer-order", "sequential", "--max-rounds", "1")
    plain = cli(*args, columns=None)
    assert plain.exit_code == 0, plain.output
    start, *_, end = plain.stderr.splitlines()
    assert start.startswith("run started  confer  demo  members: sage, skeptic, pragmatist, engineer")
    assert start.endswith("  tally log_odds  answer_order sequential  run " + start.rsplit(" ", 1)[1])
    assert "  tally log_odds  answer_order sequential  confidence " in end
    result = cli_json(*args)
    assert (result["tally"], result["answer_order"]) == ("log_odds", "sequential")
    shown = cli("history", "show", result["run_id"]).stdout
    assert "tally log_odds · answer_order sequential" in shown
    replayed = cli("history", "show", result["run_id"], "--plain").stdout
    assert "  tally log_odds  answer_order sequential  run " in replayed
    default = cli_json("confer", "configs/demo.yaml", "--max-rounds", "1")
    assert (default["tally"], default["answer_order"]) == ("confidence", "parallel")


def test_the_live_header_names_the_rules_and_roles() -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=160, color_system=None)
    view = LiveView(console, animate=False)
    view.draw(
        RunStarted(
            protocol="confer",
            panel="demo",
            question="Q?",
            members=[MemberInfo(name="a", model="demo/sage"), MemberInfo(name="b", model="demo/skeptic")],
            headline={"tally": "log_odds", "answer_order": "sequential"},
        )
    )
    assert "tally log_odds · answer_order sequential" in console.file.getvalue()
