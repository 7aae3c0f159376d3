"""`--gate`: a vote, a decision or supervise's critic as a verdict for CI (docs/exit-codes.md):
exit 0 when the run comes to the outcome gated on, 1 when it comes to another, 3 when it comes
to none; the reason on one line of stderr; the verdict in the `--json` result's `gate`.

Every ballot and verdict is scripted on the fake OpenAI server and read through litellm's real
path. In process, except the one run whose exit code is read from a real process."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAIServer, error, hang, reply, reply_json
from tests.helpers import cli, cli_refused, interrupted_run, panel_process, write_panel

VOTERS = ("a", "b", "c")


def ballot(choice: str) -> Any:
    return reply_json({"choice": choice, "ranking": [], "confidence": 80, "reason": "because"})


def voting(server: FakeOpenAIServer, tmp_path: Path, *fields: str, protocol: str = "vote") -> Path:
    return write_panel(
        tmp_path / "review.yaml",
        server,
        VOTERS,
        f"protocol: {protocol}",
        "question: Merge this change?",
        "options: [merge, block]",
        "defaults: {retries: 0}",
        *fields,
    )


def gated(panel: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    """`panel run PANEL ARGS --json` in process: exit code, result, stderr."""
    outcome = cli("run", str(panel), *args, "--json")
    return outcome.exit_code, json.loads(outcome.stdout), outcome.stderr


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "fake-test-key")


@pytest.mark.parametrize(
    ("gate", "code", "word", "reason"),
    [
        ("merge", 0, "passed", "merge won"),
        ("block", 1, "failed", "merge won, not block"),
        ("MERGE", 0, "passed", "merge won"),
    ],
)
def test_a_vote_gates_on_its_winner(fake_server, tmp_path, gate, code, word, reason) -> None:
    fake_server.script("a", ballot("merge"))
    fake_server.script("b", ballot("merge"))
    fake_server.script("c", ballot("block"))
    exit_code, result, stderr = gated(voting(fake_server, tmp_path, "method: majority"), "--gate", gate)
    option = gate.lower()
    assert exit_code == code
    assert result["gate"] == {"option": option, "passed": code == 0, "exit_status": code, "reason": reason}
    assert result["winner"] == "merge" and result["vote_counts"] == {"merge": 2, "block": 1}
    assert stderr.splitlines() == [f"panel: gate {word}: {reason} (run {result['run_id']})."]
    assert len(fake_server.requests) == 3


def test_a_tie_nothing_settles_is_undecided(fake_server, tmp_path) -> None:
    fake_server.script("a", ballot("merge"))
    fake_server.script("b", ballot("block"))
    fake_server.script("c", reply("I would rather not say."))
    exit_code, result, stderr = gated(voting(fake_server, tmp_path, "method: plurality"), "--gate", "merge")
    assert exit_code == 3
    assert (result["winner"], result["tied"], result["abstained"]) == (None, ["merge", "block"], ["c"])
    assert result["gate"]["exit_status"] == 3 and result["gate"]["passed"] is False
    assert result["gate"]["reason"] == f"no option won: {result['failure_reason']}"
    assert stderr.splitlines()[-1] == f"panel: gate undecided: {result['gate']['reason']} (run {result['run_id']})."


def test_a_quorum_not_met_is_undecided(fake_server, tmp_path) -> None:
    fake_server.script("a", ballot("merge"))
    fake_server.script("b", error(500))
    fake_server.script("c", error(500))
    exit_code, result, _ = gated(voting(fake_server, tmp_path, "quorum: 2"), "--gate", "merge")
    assert (exit_code, result["quorum_met"], result["ballots_cast"]) == (3, False, 1)
    assert result["gate"]["reason"].startswith("no option won: quorum not met")


def test_no_ballot_at_all_is_undecided(fake_server, tmp_path) -> None:
    fake_server.default(error(500))
    exit_code, result, _ = gated(voting(fake_server, tmp_path), "--gate", "block")
    assert (exit_code, result["ballots_cast"], result["gate"]["exit_status"]) == (3, 0, 3)


@pytest.mark.parametrize(("gate", "code"), [("block", 0), ("merge", 1)])
def test_a_decision_gates_on_its_leaders_choice_when_the_vote_chose_none(fake_server, tmp_path, gate, code) -> None:
    fake_server.script("a", ballot("merge"), ballot("block"))  # a votes merge, then, as leader, chooses block
    fake_server.script("b", ballot("block"))
    fake_server.script("c", reply("No opinion."))
    panel = voting(fake_server, tmp_path, "method: plurality", "leader: a", protocol="decide")
    exit_code, result, _ = gated(panel, "--gate", gate)
    assert (exit_code, result["winner"], result["leader_override"]) == (code, "block", True)
    assert result["gate"]["passed"] is (code == 0)


def test_a_gate_that_names_no_option_is_refused_before_any_call(fake_server, tmp_path) -> None:
    panel = voting(fake_server, tmp_path)
    message = cli_refused("vote", str(panel), "--gate", "ship")
    assert message == "--gate: 'ship' is not an option of this vote; its options are merge, block."
    assert fake_server.requests == []


@pytest.mark.subprocess
def test_the_exit_code_of_an_undecided_gate_reaches_the_shell(fake_server, tmp_path) -> None:
    fake_server.default(error(500))
    done = panel_process("vote", str(voting(fake_server, tmp_path)), "--gate", "merge", "--db", str(tmp_path / "r.db"))
    assert done.returncode == 3, done.stderr
    assert done.stderr.splitlines()[-1].startswith("panel: gate undecided: no option won: ")
    assert done.stdout == ""


# supervise ----------------------------------------------------------------------------------


def supervised(server: FakeOpenAIServer, tmp_path: Path) -> Path:
    path = tmp_path / "team.yaml"
    path.write_text(
        "name: team\nprotocol: supervise\nquestion: Write the release notes.\nmax_rounds: 1\n"
        "defaults: {retries: 0}\n"
        f"members:\n  - name: w\n    model: openai/w\n    api_base: {server.url}\n    task: Write them.\n"
        f"critic:\n  name: c\n  model: openai/c\n  api_base: {server.url}\n"
    )
    return path


REJECTED = {"verdict": "REJECTED", "feedback": {"w": "Say what changed."}}


@pytest.mark.parametrize(
    ("verdicts", "code", "loop_end"),
    [
        ([reply_json({"verdict": "APPROVED", "feedback": {}})], 0, "approved"),
        ([reply_json(REJECTED)], 1, "round_cap"),
        ([reply("Looks fine to me.")], 3, "no_verdict"),
    ],
)
def test_supervise_gates_on_the_critics_verdict(fake_server, tmp_path, verdicts, code, loop_end) -> None:
    fake_server.script("w", reply("Notes."))
    fake_server.script("c", *verdicts)
    exit_code, result, stderr = gated(supervised(fake_server, tmp_path), "--gate", "approved")
    assert (exit_code, result["loop_end"], result["gate"]["exit_status"]) == (code, loop_end, code)
    assert result["gate"]["option"] == "approved"
    assert stderr.splitlines()[-1].startswith("panel: gate ")


def test_supervise_gates_on_approval_alone(fake_server, tmp_path) -> None:
    message = cli_refused("supervise", str(supervised(fake_server, tmp_path)), "--gate", "rejected")
    assert message == "--gate: 'rejected' is not a verdict supervise gates on; give approved."
    assert fake_server.requests == []


def test_without_a_gate_the_result_says_none_and_no_answer_is_still_1(fake_server, tmp_path) -> None:
    fake_server.default(error(500))
    exit_code, result, stderr = gated(voting(fake_server, tmp_path))
    assert (exit_code, result["gate"]) == (1, None)
    assert stderr.splitlines()[-1] == f"panel: {result['failure_reason']} (run {result['run_id']})."


def test_a_gated_run_resumed_is_judged_by_its_gate(fake_server, tmp_path) -> None:
    """The gate is part of the run: interrupted and resumed, the run's exit code is still its
    verdict (1: it came to merge, not block), not the ungated 0."""
    panel = voting(fake_server, tmp_path)
    db = tmp_path / "runs.db"
    fake_server.script("a", ballot("merge"))
    fake_server.script("b", ballot("merge"))
    fake_server.script("c", hang())
    old_id = asyncio.run(interrupted_run(panel, db, lambda done: done == 2, gate={"gate": "block"}))
    fake_server.script("c", ballot("block"))

    outcome = cli("resume", old_id, "--db", str(db), "--json")

    assert outcome.exit_code == 1, outcome.output
    result = json.loads(outcome.stdout)
    assert (result["winner"], result["gate"]["option"], result["gate"]["passed"]) == ("merge", "block", False)
    assert "gate failed: merge won, not block" in outcome.stderr
