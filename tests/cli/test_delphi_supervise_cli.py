"""`panel delphi` and `panel supervise` from the command line: the demo files, the options,
`--members` for delphi (supervise is file-only), `panel run`, `panel validate`, `panel
history`, and bad input.

Runs go through Typer's CliRunner in-process on the offline demo personas; bad input runs in
a subprocess, since only `main` turns a user error into one sentence and exit code 2."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from panel_cli.cli.app import app
from tests.helpers import ROOT, cli, cli_json, panel_process

DELPHI = str(ROOT / "configs" / "delphi.yaml")
SUPERVISE = str(ROOT / "configs" / "supervise.yaml")


def test_the_demo_delphi_file(tmp_path):
    result = cli_json("delphi", DELPHI, "--db", str(tmp_path / "r.db"))
    assert (result["protocol"], result["reached_answer"], result["warnings"]) == ("delphi", True, [])
    assert [len(r["contributions"]) for r in result["rounds"]] == [4, 4, 4]
    assert (result["converged"], result["stopped_early"], result["max_rounds"]) == (True, True, 4)
    assert [c["changed"] for c in result["rounds"][2]["contributions"]] == [False] * 4
    assert "## Points of consensus" in result["final_answer"] and "## Points of divergence" in result["final_answer"]
    assert result["synthesis"]["chairman"] == "sage" and result["calls"] == 4 * 3 + 1


def test_delphi_options_override_the_file(tmp_path):
    result = cli_json(
        "delphi", DELPHI, "--max-rounds", "2", "--no-convergence", "--timeout", "1m", "--db", str(tmp_path / "r.db")
    )
    assert len(result["rounds"]) == 2 and result["max_rounds"] == 2 and not result["stopped_early"]


def test_delphi_with_members_and_no_file(tmp_path):
    result = cli_json(
        "delphi",
        "--members",
        "demo/sage,demo/skeptic,demo/engineer",
        "--chairman",
        "demo/engineer",
        "-q",
        "Which queue?",
        "--max-rounds",
        "2",
        "--db",
        str(tmp_path / "r.db"),
    )
    assert result["experts"] == ["demo/sage", "demo/skeptic", "demo/engineer"]
    assert result["synthesis"]["chairman"] == "demo/engineer" and result["question"] == "Which queue?"


def test_delphi_reads_the_question_on_stdin(tmp_path):
    outcome = cli(
        "delphi",
        "--members",
        "demo/sage,demo/historian",
        "--quiet",
        "--db",
        str(tmp_path / "r.db"),
        input="Which queue should we use?\n",
    )
    assert outcome.exit_code == 0, outcome.output
    assert outcome.stdout.startswith("[simulated] Delphi synthesis by the sage")


def test_the_demo_supervise_file(tmp_path):
    result = cli_json("supervise", SUPERVISE, "--db", str(tmp_path / "r.db"))
    assert (result["protocol"], result["warnings"], result["loop_end"], result["approved"]) == (
        "supervise",
        [],
        "approved",
        True,
    )
    assert result["correction_rounds"] == 1 and result["max_rounds"] == 2 and result["critic"] == "reviewer"
    (rejected,) = result["rounds"][0]["review"]["rejected"]
    assert [d["worker"] for d in result["rounds"][1]["deliveries"]] == [rejected], (
        "the demo critic rejects once, then approves"
    )
    assert result["rounds"][1]["review"]["verdict"] == "APPROVED"
    assert result["synthesis"]["chairman"] == "planner" and result["final_answer"].startswith(
        "[simulated] Consolidated by"
    )


def test_supervise_options(tmp_path):
    outcome = cli(
        "supervise",
        SUPERVISE,
        "--max-rounds",
        "1",
        "-q",
        "Plan a team offsite.",
        "--quiet",
        "--db",
        str(tmp_path / "r.db"),
    )
    assert outcome.exit_code == 0, outcome.output
    assert outcome.stdout.startswith("[simulated] Consolidated by the pragmatist from 3 deliverables.")


def test_demo_replaces_every_model_the_critic_included(tmp_path):
    file = tmp_path / "team.yaml"
    file.write_text(
        "protocol: supervise\nquestion: Ship it?\nmembers:\n  - name: a\n    model: openai/gpt-4o\n    task: Do part one.\n"
        "  - name: b\n    model: anthropic/claude-sonnet-4-5\n    task: Do part two.\n"
        "critic:\n  name: boss\n  model: openai/gpt-4o-mini\n"
    )
    env = {"OPENAI_API_KEY": "", "ANTHROPIC_API_KEY": ""}
    outcome = CliRunner(env={"COLUMNS": "200", **env}).invoke(
        app, ["supervise", str(file), "--demo", "--json", "--db", str(tmp_path / "r.db")]
    )
    assert outcome.exit_code == 0, outcome.output
    assert json.loads(outcome.stdout)["approved"] is True


@pytest.mark.parametrize(("file", "protocol"), [(DELPHI, "delphi"), (SUPERVISE, "supervise")])
def test_run_dispatches_on_the_files_protocol(tmp_path, file, protocol):
    assert cli_json("run", file, "--db", str(tmp_path / "r.db"))["protocol"] == protocol


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--tally", "log_odds"],
            "--tally is confer's option; {file} runs supervise (panel supervise -h lists its options).",
        ),
        (
            ["--mode", "race"],
            "--mode is ensemble's option; {file} runs supervise (panel supervise -h lists its options).",
        ),
        (["--chairman", "x"], "--chairman is an option of council, delphi and orchestrate; {file} runs supervise"),
    ],
)
def test_run_says_whose_option_a_file_of_another_protocol_does_not_take(args, said, monkeypatch):
    monkeypatch.chdir(ROOT)  # a short path: the sentence stays on one line of the error box
    outcome = cli("run", "configs/supervise.yaml", *args)
    assert outcome.exit_code == 2
    assert outcome.output.startswith("Usage: panel run [OPTIONS]")
    assert said.format(file="configs/supervise.yaml") in outcome.output
    assert "No such option" not in outcome.output


def test_run_refuses_an_option_no_protocol_takes_as_click_does():
    outcome = cli("run", SUPERVISE, "--bogus")
    assert outcome.exit_code == 2
    assert outcome.output.startswith("Usage: panel run [OPTIONS]") and "No such option: --bogus" in outcome.output


@pytest.mark.parametrize(
    ("args", "setup"),
    [
        (
            ["supervise", "configs/supervise.yaml"],
            "members: planner, engineer, writer  critic reviewer (inline)  chairman planner",
        ),
        (
            ["orchestrate", "configs/orchestrate.yaml"],
            "members: research, analysis, writing  planner planner  chairman editor",
        ),
        (["delphi", "configs/delphi.yaml"], "members: sage, skeptic, engineer, historian  chairman sage"),
        (
            ["ensemble", "configs/ensemble.yaml", "--mode", "race"],
            "members: sage, pragmatist, optimist, engineer  mode race",
        ),
    ],
)
def test_the_start_line_names_who_critiques_plans_and_writes(args, setup, monkeypatch):
    """The roles beside the members: supervise's critic and chairman, orchestrate's planner and
    chairman (neither is among the members those two list), delphi's chairman, ensemble's mode."""
    monkeypatch.chdir(ROOT)
    outcome = cli(*args, columns=None)
    assert outcome.exit_code == 0, outcome.output
    start = outcome.stderr.splitlines()[0]
    assert f"  {setup}  run " in start


def test_validate_accepts_both_demo_files_without_a_warning():
    outcome = cli("validate", DELPHI, SUPERVISE)
    assert outcome.exit_code == 0, outcome.output
    assert outcome.stderr == ""
    for line in (
        "delphi-demo: delphi, 4 members",
        "chairman: sage",
        "max_rounds: 4",
        "until_convergence: yes (stop when every expert reports no change)",
        "timeouts: answer 2m, synthesis 2m",
        "supervise-demo: supervise, 3 members",
        "workers: planner, engineer, writer",
        "critic: reviewer (inline)",
        "max_rounds: 2 correction rounds",
        "timeouts: task 2m, review 2m, synthesis 2m",
    ):
        assert line in outcome.stdout


def test_history_shows_both_protocols(tmp_path):
    db = str(tmp_path / "r.db")
    delphi_id = cli_json("delphi", DELPHI, "--db", db)["run_id"]
    supervise_id = cli_json("supervise", SUPERVISE, "--db", db)["run_id"]

    listed = cli("history", "list", "--db", db)
    assert listed.exit_code == 0 and "delphi" in listed.stdout and "supervise" in listed.stdout
    for run_id, stages in (
        (delphi_id, ("contribution", "synthesis")),
        (supervise_id, ("work", "critique", "correction", "synthesis")),
    ):
        shown = cli("history", "show", run_id, "--db", db)
        assert shown.exit_code == 0, shown.output
        assert "╭─ answer" in shown.stdout and all(stage in shown.stdout for stage in stages)
    stored = json.loads(cli("history", "show", supervise_id, "--json", "--db", db).stdout)
    assert stored["protocol"] == "supervise" and stored["result"]["approved"] is True
    assert [e["type"] for e in stored["events"]].count("supervise_verdict") == 2
    stored = json.loads(cli("history", "show", delphi_id, "--json", "--db", db).stdout)
    assert [e["type"] for e in stored["events"]].count("delphi_contribution") == 12


def test_supervise_is_file_only_and_says_so():
    helped = cli("supervise", "--help")
    assert helped.exit_code == 0 and "Needs a panel file" in helped.stdout
    assert "(no --members)" in helped.stdout and helped.stdout.count("--members") == 1, "said, and no such option"
    assert "--members" in cli("delphi", "--help").stdout
    refused = cli("supervise", SUPERVISE, "--members", "planner")
    assert refused.exit_code == 2 and "No such option: --members" in refused.output


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("args", "text", "message"),
    [
        (
            ["delphi", "--members", "demo/sage", "-q", "Q?"],
            None,
            "panel: A Delphi panel needs at least 2 experts; panel 'delphi' has 1.",
        ),
        (["delphi", DELPHI, "--chairman", "nobody"], None, "'nobody' is not a member"),
        (
            ["supervise"],
            "members:\n  - name: a\n    model: demo/sage\n    task: t\n  - name: b\n    model: demo/skeptic\ncritic: a\n",
            "line 5: members[1]: 'b' has no task; give every worker a task (or make it the critic or the chairman).",
        ),
        (
            ["supervise"],
            "members:\n  - name: a\n    model: demo/sage\n    task: t\n",
            "A supervised panel needs a critic",
        ),
    ],
)
def test_bad_input_is_one_sentence_and_exit_2(tmp_path, args, text, message):
    if text is not None:
        file = tmp_path / "team.yaml"
        file.write_text(text)
        args = [*args, str(file)]
    done = panel_process(*args)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1
