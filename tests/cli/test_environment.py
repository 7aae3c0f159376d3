"""A command writes only to the streams its `Environment` gives it (as httpie's does): the same run
serves a terminal, a pipe or a caller that captures both, and the process's own stdout and
stderr see nothing of it."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import typer

from panel_cli.cli.protocol_commands import run_protocol
from panel_cli.cli.signals import handlers_kept
from panel_cli.protocols.registry import spec
from panel_cli.view.environment import Environment
from tests.helpers import ROOT

DEMO = ROOT / "configs" / "demo.yaml"
VOTE = ROOT / "configs" / "vote.yaml"


def streams(*, terminal: bool) -> Environment:
    return Environment(stdin=None, stdout=StringIO(), stderr=StringIO(), stdout_isatty=terminal, stderr_isatty=terminal)


def run_on(env: Environment, protocol: str, panel: Path, tmp_path: Path, **values: Any) -> None:
    with handlers_kept():
        run_protocol(spec(protocol), {"panel_file": panel, "db": tmp_path / "r.db", **values}, env)


@pytest.fixture(autouse=True)
def _terminal_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)


def test_json_goes_to_the_given_stdout_and_nothing_else_anywhere(tmp_path, capfd) -> None:
    env = streams(terminal=False)
    run_on(env, "confer", DEMO, tmp_path, json_mode=True)
    assert json.loads(env.stdout.getvalue())["reached_answer"] is True
    assert env.stderr.getvalue() == ""
    assert capfd.readouterr() == ("", "")


def test_a_pipe_gets_the_answer_and_plain_progress_on_the_given_stderr(tmp_path, capfd) -> None:
    env = streams(terminal=False)
    run_on(env, "confer", DEMO, tmp_path)
    assert env.stdout.getvalue().startswith("[simulated] ")
    assert env.stderr.getvalue().startswith("run started  confer  demo")
    assert capfd.readouterr() == ("", "")


def test_a_terminal_gets_the_live_view_on_the_given_stdout(tmp_path, capfd) -> None:
    env = streams(terminal=True)
    run_on(env, "confer", DEMO, tmp_path)
    drawn = env.stdout.getvalue()
    assert "round 1 · vote" in drawn and "[simulated]" in drawn
    assert capfd.readouterr() == ("", "")


def test_the_question_is_read_from_the_given_stdin(tmp_path, capfd) -> None:
    env = streams(terminal=False)
    env.stdin = StringIO("Which one, piped?\n")
    run_on(env, "vote", VOTE, tmp_path, question="-", json_mode=True)
    assert json.loads(env.stdout.getvalue())["question"] == "Which one, piped?"
    assert capfd.readouterr() == ("", "")


def test_a_gates_verdict_and_exit_come_through_the_given_stderr(tmp_path, capfd) -> None:
    env = streams(terminal=False)
    with pytest.raises(typer.Exit) as exited:
        run_on(env, "vote", VOTE, tmp_path, gate="PostgreSQL", quiet=True)
    assert exited.value.exit_code == 1
    assert env.stdout.getvalue() == "MySQL\n"
    assert env.stderr.getvalue().startswith("panel: gate failed: MySQL won, not PostgreSQL (run ")
    assert capfd.readouterr() == ("", "")
