"""`panel vote`, `panel decide`, `panel history decisions` and `panel history retally` from
the command line.

The line as a user types it (`--options A "B C" --members … -q …`), the error without
members and the question on stdin run as real processes; the rest in-process with Typer's
CliRunner. A user error becomes exit code 2 only in `main`, so bad input runs as a process.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import panel_cli
from panel_cli.cli.commands import spread_words
from panel_cli.errors import OptionError
from panel_cli.store.reader import TranscriptReader
from tests.fakes.openai_server import FakeOpenAIServer, RecordedRequest, responder
from tests.helpers import ROOT, cli, cli_refused, panel_process, run_python

VOTE = str(ROOT / "configs" / "vote.yaml")
DECIDE = str(ROOT / "configs" / "decide.yaml")


def invoke(*args: str, input: str | None = None) -> dict:
    """A run in-process that must end, with a winner (exit 0) or without (exit 1); its --json result."""
    outcome = cli(*args, "--json", input=input)
    result = json.loads(outcome.stdout)
    assert outcome.exit_code == (0 if result["reached_answer"] else 1), outcome.output
    return result


# --options ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "spread"),
    [
        (["--options", "A", "B C", "-q", "Q"], ["--options", "A", "--options", "B C", "-q", "Q"]),
        (["f.yaml", "--options", "A", "B"], ["f.yaml", "--options", "A", "--options", "B"]),
        (["--options", "A", "--", "f.yaml"], ["--options", "A", "--", "f.yaml"]),
        (["--options=A", "B"], ["--options=A", "B"]),
    ],
)
def test_options_take_every_word_up_to_the_next_flag(args, spread):
    assert spread_words(args, ("--options",)) == spread


def voter(request: RecordedRequest) -> str:
    """Members a and b vote `B C` in prose, c a structured `A`."""
    if request.model == "c":
        return json.dumps({"choice": "A", "ranking": ["A", "B C"], "confidence": 70, "reason": "simpler"})
    return "Between them I pick b c, clearly."


@pytest.mark.subprocess
def test_the_line_as_typed_end_to_end(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    fake_server.default(responder(voter))
    done = panel_process(
        "vote",
        "--options",
        "A",
        "B C",
        "--members",
        "openai/a,openai/b,openai/c",
        "-q",
        "Which one?",
        "--json",
        "--db",
        str(tmp_path / "runs.db"),
        env={"OPENAI_API_BASE": fake_server.url, "OPENAI_API_KEY": "test"},
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["protocol"], result["question"], result["winner"], result["final_answer"]) == (
        "vote",
        "Which one?",
        "B C",
        "B C",
    )
    assert result["options"] == ["A", "B C"] and result["vote_counts"] == {"A": 1, "B C": 2}
    assert (result["method"], result["quorum_met"], result["abstained"], result["rounds"]) == (
        "majority",
        True,
        [],
        None,
    )
    assert [(b["voter"], b["choice"], b["ranking"], b["confidence"], b["matched_by"]) for b in result["ballots"]] == [
        ("openai/a", "B C", ["B C"], None, "text"),
        ("openai/b", "B C", ["B C"], None, "text"),
        ("openai/c", "A", ["A", "B C"], 70, "structured"),
    ]
    assert len(fake_server.requests) == 3


@pytest.mark.subprocess
def test_without_members_one_sentence_names_every_way(tmp_path: Path) -> None:
    done = panel_process("vote", "--options", "A", "B", "-q", "Which?", env={"PANEL_CONFIG_DIR": str(tmp_path)})
    assert done.returncode == 2
    assert done.stderr == (
        'panel: Give a panel file or --members (e.g. panel vote --members gpt-4o,claude -q "Your question"), '
        f"keep a default panel in {tmp_path / 'defaults.yaml'} (members: as in a panel file), or add --demo to try five demo personas.\n"
    )


@pytest.mark.subprocess
def test_the_question_on_stdin(tmp_path: Path) -> None:
    done = panel_process(
        "vote",
        "--options",
        "PostgreSQL",
        "MySQL",
        "--demo",
        "--json",
        "--db",
        str(tmp_path / "r.db"),
        stdin="Which database?\n",
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["question"] == "Which database?" and result["winner"] == "MySQL"
    assert [b["voter"] for b in result["ballots"]] == ["sage", "skeptic", "pragmatist", "optimist", "engineer"]


@pytest.mark.subprocess
def test_no_question_at_all_says_where_one_comes_from() -> None:
    done = panel_process("vote", "--options", "A", "B", "--demo")
    assert done.returncode == 2
    assert "No question: give one with -q" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["vote", "--options", "A", "--demo", "-q", "Q?"],
            "A vote needs at least two options to choose between ('A' is the only one)",
        ),
        (
            ["vote", "--demo", "-q", "Q?"],
            "A vote needs at least two options to choose between: give them with --options A B",
        ),
        (
            ["vote", "--options", "Ship", "ship", "--demo", "-q", "Q?"],
            "--options: 'ship' is given twice (options match in any case).",
        ),
        (
            ["vote", "--options", "A", "B", "--method", "borda", "--demo", "-q", "Q?"],
            "--method: 'borda' is not a method; choose majority, supermajority, unanimous, ranked_choice, weighted, "
            "plurality or weighted_plurality.",
        ),
        (
            ["vote", "--options", "A", "B", "--threshold", "0.8", "--demo", "-q", "Q?"],
            "--threshold applies to --method supermajority, not majority.",
        ),
        (
            ["vote", "--options", "A", "B", "--method", "supermajority", "--threshold", "1.5", "--demo", "-q", "Q?"],
            "--threshold: a share above 0 and below 1, such as 0.75 (more than 75% of the votes), not 1.5.",
        ),
        (
            ["vote", "--options", "A", "B", "--quorum", "10", "--demo", "-q", "Q?"],
            "--quorum: 10 is more than the 5 voters; no vote can reach it.",
        ),
        (
            ["vote", "--options", "A", "B", "--no-match", "maybe", "--demo", "-q", "Q?"],
            "--no-match: 'maybe' is not a choice; choose abstain or first.",
        ),
        (
            ["decide", "--options", "A", "B", "--leader", "zed", "--demo", "-q", "Q?"],
            "The leader 'zed' is not a member of panel 'demo'",
        ),
        (["vote", VOTE, "--timeout", "soon"], "--timeout: 'soon' is not a duration"),
    ],
)
def test_bad_input_is_one_sentence_and_exit_2(args: list[str], message: str) -> None:
    done = panel_process(*args)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1


@pytest.mark.parametrize("args", [["--options", "--demo", "-q", "Q?"], ["-q", "Q?", "--options"]])
def test_options_given_without_words_is_a_usage_error(args: list[str]) -> None:
    outcome = cli("vote", *args)
    assert outcome.exit_code == 2
    assert "Invalid value for '--options': give the options after it, like --options PostgreSQL MySQL" in outcome.output


# where a problem is said: the option that gave the value, or the line of the file -------------


def test_a_value_given_on_the_command_line_is_blamed_on_its_option_not_a_line(tmp_path: Path) -> None:
    """configs/vote.yaml says `quorum: 4` on line 15 and gives no tie_break; the options override them."""
    assert cli_refused("vote", VOTE, "--quorum", "7") == "--quorum: 7 is more than the 6 voters; no vote can reach it."
    ignored = invoke("vote", VOTE, "--tie-break", "leader")
    assert ignored["warnings"] == [
        "--tie-break: used only by methods plurality and weighted_plurality, not ranked_choice."
    ]
    in_file = tmp_path / "vote.yaml"
    in_file.write_text(
        Path(VOTE).read_text().replace("quorum: 4 ", "quorum: 7 ").replace("no_match:", "tie_break: leader\nno_match:")
    )
    assert (
        cli_refused("vote", str(in_file))
        == f"{in_file}, line 15: quorum: 7 is more than the 6 voters; no vote can reach it."
    )
    quorum_ok = invoke("vote", str(in_file), "--quorum", "4")
    assert quorum_ok["warnings"] == [
        f"{in_file}, line 16: tie_break: used only by methods plurality and weighted_plurality, not ranked_choice."
    ]


# a supermajority's threshold ----------------------------------------------------------------------

NOT_A_SHARE = "a share above 0 and below 1, such as 0.75 (more than 75% of the votes), not 1; for every vote, use the method unanimous"


def test_one_range_for_the_threshold_in_the_file_the_options_retally_and_python(tmp_path: Path) -> None:
    """1 asked for more than every vote; a vote, a decision, a re-tally and the API refuse it alike."""
    in_file = tmp_path / "vote.yaml"
    in_file.write_text(Path(VOTE).read_text().replace("method: ranked_choice", "method: supermajority\nthreshold: 1"))
    assert cli_refused("vote", str(in_file)) == f"{in_file}, line 15: threshold: {NOT_A_SHARE}."
    for command, panel in (("vote", VOTE), ("decide", DECIDE)):
        refused = cli_refused(command, panel, "--method", "supermajority", "--threshold", "1")
        assert refused == f"--threshold: {NOT_A_SHARE}."
    run = invoke("vote", VOTE, "--method", "supermajority", "--threshold", "0.5")
    assert cli_refused("history", "retally", run["run_id"], "--threshold", "1") == f"--threshold: {NOT_A_SHARE}."
    with pytest.raises(OptionError, match=r"^--threshold: a share above 0 and below 1, .* not 1; for every vote"):
        panel_cli.run(VOTE, method="supermajority", threshold=1)


def test_a_supermajority_says_its_threshold_as_a_percentage() -> None:
    run = invoke("vote", VOTE, "--method", "supermajority", "--threshold", "0.8")
    assert run["failure_reason"] == "no option has more than 80% of the 6 votes (MySQL 3, SQLite 2, PostgreSQL 1)"
    shown = cli("history", "show", run["run_id"], "--plain").stdout
    assert "vote opened  supermajority (more than 80%) · quorum 4" in shown
    recount = cli("history", "retally", run["run_id"], "--threshold", "0.4").stdout
    assert "supermajority (more than 80%)" in recount and "supermajority (more than 40%)" in recount


# members --------------------------------------------------------------------------------------


def test_demo_with_no_members_seats_five_personas() -> None:
    result = invoke("vote", "--options", "PostgreSQL", "MySQL", "--demo", "-q", "Which database for a startup?")
    assert [b["voter"] for b in result["ballots"]] == ["sage", "skeptic", "pragmatist", "optimist", "engineer"]
    council = invoke("council", "--demo", "-q", "How should we store sessions?")
    assert [r["name"] for r in council["stage1_responses"]] == ["sage", "skeptic", "pragmatist", "optimist", "engineer"]
    assert council["final_answer"]


def test_the_default_panel_in_the_config_directory(tmp_path: Path) -> None:
    config = Path(os.environ["PANEL_CONFIG_DIR"])
    (config / "defaults.yaml").write_text(
        "members:\n  - {name: mine, model: demo/engineer}\n  - {name: yours, model: demo/historian}\n"
    )
    result = invoke("vote", "--options", "Tea", "Coffee", "-q", "Tea or coffee?")
    assert [b["voter"] for b in result["ballots"]] == ["mine", "yours"]
    kept = invoke("vote", "--options", "Tea", "Coffee", "--demo", "-q", "Tea or coffee?")
    assert [b["voter"] for b in kept["ballots"]] == ["mine", "yours"], "--demo keeps the default panel's members"


@pytest.mark.subprocess
def test_a_broken_default_panel_is_located(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    (config / "defaults.yaml").write_text("members:\n  - {name: mine, modle: demo/engineer}\n")
    done = panel_process("vote", "--options", "A", "B", "-q", "Q?", env={"PANEL_CONFIG_DIR": str(config)})
    assert done.returncode == 2
    assert f"{config / 'defaults.yaml'}, line 2: members[0].modle: unknown field" in done.stderr


# the demo files -------------------------------------------------------------------------------


def test_the_vote_demo_file_runs_a_runoff_offline() -> None:
    result = invoke("vote", VOTE)
    assert result["method"] == "ranked_choice" and result["quorum_met"] and len(result["rounds"]) >= 2
    assert result["winner"] == result["final_answer"] in result["options"]
    assert {b["matched_by"] for b in result["ballots"]} == {"structured", "text"}
    assert any(r["eliminated"] for r in result["rounds"])


def test_the_decide_demo_file_shows_the_leader_override() -> None:
    result = invoke("decide", DECIDE)
    assert (result["leader"], result["leader_override"], result["consensus_reached"]) == ("sage", True, False)
    assert result["winner"] in result["options"] and result["final_answer"] == result["winner"]


def test_run_dispatches_to_vote_and_decide_and_options_replace_the_files() -> None:
    assert invoke("run", VOTE)["protocol"] == "vote"
    assert invoke("run", DECIDE)["protocol"] == "decide"
    replaced = invoke("vote", VOTE, "--options", "Redis", "Memcached", "--method", "majority")
    assert (
        replaced["options"] == ["Redis", "Memcached"]
        and replaced["method"] == "majority"
        and replaced["rounds"] is None
    )


def test_validate_accepts_the_demo_files_with_no_warning() -> None:
    outcome = cli("validate", VOTE, DECIDE)
    assert outcome.exit_code == 0, outcome.output
    assert "warning" not in outcome.stderr
    assert "method: ranked_choice" in outcome.stdout and "leader: sage" in outcome.stdout


def test_quiet_prints_the_winning_option_alone() -> None:
    outcome = cli("decide", DECIDE, "--quiet")
    assert outcome.exit_code == 0, outcome.output
    assert outcome.stdout.strip() in ("Release on Friday", "Postpone a week", "Do not release")


def test_no_winner_exits_1_with_the_reason() -> None:
    outcome = cli("vote", VOTE, "--method", "unanimous", "--quiet")
    assert outcome.exit_code == 1 and outcome.stdout == ""
    assert "panel: the votes are split (" in outcome.stderr and "(run " in outcome.stderr


# history --------------------------------------------------------------------------------------


def test_history_decisions_by_topic(tmp_path: Path) -> None:
    db = str(tmp_path / "r.db")
    release = invoke("decide", DECIDE, "--db", db)
    invoke("decide", "--options", "Tea", "Coffee", "--demo", "-q", "Tea or coffee for the offsite?", "--db", db)
    listed = json.loads(cli("history", "decisions", "--topic", "RELEASE", "--json", "--db", db).stdout)
    assert [d["run_id"] for d in listed] == [release["run_id"]]
    (decision,) = listed
    assert decision["topic"] == "Should we release version 2.0 on Friday?" and decision["method"] == "unanimous"
    assert (decision["winner"], decision["leader"], decision["leader_override"]) == (release["winner"], "sage", True)
    assert decision["vote_counts"] == release["vote_counts"] and decision["total_votes"] == release["total_votes"]
    table = cli("history", "decisions", "--db", db)
    assert table.exit_code == 0 and "sage (chose)" in table.stdout and "Tea or coffee" in table.stdout
    empty = cli("history", "decisions", "--topic", "nothing like it", "--db", db)
    assert empty.stdout.startswith("No decisions about 'nothing like it' in ")


def test_retally_recounts_prints_beside_the_stored_and_records(tmp_path: Path) -> None:
    db = str(tmp_path / "r.db")
    run = invoke("vote", VOTE, "--db", db)
    outcome = cli("history", "retally", run["run_id"][:8], "--method", "majority", "--db", db)
    assert outcome.exit_code == 0, outcome.output
    assert "Re-tally of run" in outcome.stdout and "ranked_choice" in outcome.stdout and "majority" in outcome.stdout
    assert "no model was called" in outcome.stdout
    recount = json.loads(cli("history", "retally", run["run_id"], "--method", "majority", "--json", "--db", db).stdout)
    assert recount["stored"]["winner"] == run["winner"] and recount["stored"]["method"] == "ranked_choice"
    assert recount["retally"]["method"] == "majority" and recount["retally"]["vote_counts"] == run["vote_counts"]
    assert recount["retally"]["rounds"] is None
    with TranscriptReader.open(db) as reader:
        kept = reader.run_retallies(run["run_id"])
        assert reader.get_run(run["run_id"]).result["method"] == "ranked_choice", "the run itself is untouched"
    assert [(r.method, r.run_id) for r in kept] == [("majority", run["run_id"])] * 2
    assert kept[1].result == recount


def test_retally_by_plurality_and_weighted_plurality(tmp_path: Path) -> None:
    db = str(tmp_path / "r.db")
    run = invoke("vote", VOTE, "--db", db)
    counts = run["vote_counts"]
    top = max(counts.values())
    leaders = [option for option, count in counts.items() if count == top]
    for method in ("Plurality", "weighted-plurality"):
        for settle in ("none", "first"):
            args = [
                "history",
                "retally",
                run["run_id"],
                "--method",
                method,
                "--tie-break",
                settle,
                "--json",
                "--db",
                db,
            ]
            outcome = cli(*args)
            assert outcome.exit_code == 0, outcome.output
            recount = json.loads(outcome.stdout)["retally"]
            assert recount["method"] == method.lower().replace("-", "_") and recount["tie_break"] == settle
            assert recount["vote_counts"] == counts
            expected = leaders[0] if len(leaders) == 1 or settle == "first" else None
            assert recount["winner"] == expected and recount["tied"] == (leaders if len(leaders) > 1 else [])
    shown = cli("history", "retally", run["run_id"], "--method", "weighted_plurality", "--db", db)
    assert "weighted_plurality, tie_break none" in shown.stdout and "(weight " in shown.stdout


def test_retally_a_decision_keeps_the_leaders_choice(tmp_path: Path) -> None:
    db = str(tmp_path / "r.db")
    run = invoke("decide", DECIDE, "--db", db)
    recount = json.loads(cli("history", "retally", run["run_id"], "--json", "--db", db).stdout)
    assert (recount["retally"]["winner"], recount["retally"]["leader_override"]) == (run["winner"], True)


def test_retally_refusals(tmp_path: Path) -> None:
    from panel_cli.errors import UserError

    db = str(tmp_path / "r.db")
    vote_run = invoke("vote", VOTE, "--db", db)
    confer_run = invoke("confer", str(ROOT / "configs" / "demo.yaml"), "--max-rounds", "1", "--db", db)
    cases = [
        (
            ["retally", confer_run["run_id"]],
            f"Run {confer_run['run_id']} is a confer run; only decide and vote runs have ballots to re-tally.",
        ),
        (
            ["retally", vote_run["run_id"], "--threshold", "0.9"],
            "--threshold applies to --method supermajority, not ranked_choice.",
        ),
        (["retally", vote_run["run_id"], "--method", "borda"], "--method: 'borda' is not a method; choose majority"),
        (
            ["retally", vote_run["run_id"], "--tie-break", "coin"],
            "--tie-break: 'coin' is not a tie break; choose none, leader or first.",
        ),
    ]
    for args, message in cases:
        with pytest.raises(UserError) as caught:
            cli("history", *args, "--db", db, catch_exceptions=False)
        assert caught.value.message.startswith(message)


@pytest.mark.subprocess
def test_retally_runs_without_a_model_and_without_loading_litellm(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    run = invoke("vote", VOTE, "--db", str(db))
    code = (
        "import sys\n"
        f"sys.argv = ['panel', 'history', 'retally', {run['run_id']!r}, '--method', 'majority', '--db', {str(db)!r}]\n"
        "from panel_cli.cli.app import main\n"
        "try:\n    main()\nexcept SystemExit as exit:\n    assert not exit.code, exit.code\n"
        "print(sorted(m for m in sys.modules if m == 'litellm' or m.startswith(('litellm.', 'panel_cli.llm'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, "OPENAI_API_BASE": "http://127.0.0.1:9"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"
    with sqlite3.connect(db) as connection:
        assert connection.execute("SELECT count(*) FROM retallies").fetchone()[0] == 1


async def test_retally_of_a_run_that_never_finished(tmp_path: Path) -> None:
    """Interrupted after two ballots: the re-tally reads them from the stored events."""
    from panel_cli.events import EventBus, MemberInfo, RunInterrupted, RunStarted, VoteOpened, VoteReceived
    from panel_cli.store.subscriber import TranscriptStore

    db = tmp_path / "r.db"
    store = await TranscriptStore.open(db)
    bus = EventBus("cut-short-1", [store])
    members = [MemberInfo(name=name, model="demo/sage") for name in ("a", "b", "c")]
    await bus.emit(RunStarted(protocol="vote", panel="p", question="Which?", members=members))
    await bus.emit(VoteOpened(options=["X", "Y"], method="majority", threshold=0.667, quorum=1, voters=["a", "b", "c"]))
    await bus.emit(VoteReceived(voter="a", choice="X", ranking=["X", "Y"], matched_by="structured"))
    await bus.emit(VoteReceived(voter="b", choice="Y", ranking=["Y"], matched_by="text"))
    await bus.emit(RunInterrupted())
    await store.close()

    outcome = cli("history", "retally", "cut-short-1", "--method", "ranked_choice", "--db", str(db))
    assert outcome.exit_code == 0, outcome.output
    assert "The run did not finish (interrupted); there is no stored outcome to compare with." in outcome.stdout
    recount = json.loads(cli("history", "retally", "cut-short-1", "--json", "--db", str(db)).stdout)
    assert recount["stored"] is None and recount["retally"]["vote_counts"] == {"X": 1, "Y": 1}
    assert recount["retally"]["reason"] == "X and Y tie with 1 vote each, so none has more than half"


@pytest.mark.subprocess
def test_history_decisions_imports_no_model_code_nor_event_models(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        f"sys.argv = ['panel', 'history', 'decisions', '--db', {str(tmp_path / 'r.db')!r}]\n"
        "from panel_cli.cli.app import main\n"
        "try:\n    main()\nexcept SystemExit as exit:\n    assert not exit.code, exit.code\n"
        "heavy = ('litellm', 'panel_cli.llm', 'panel_cli.events', 'panel_cli.view.live', 'rich.live')\n"
        "print(sorted(h for h in heavy for m in sys.modules if m == h or m.startswith(h + '.')))\n"
    )
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"
