"""A command run in process hands the process's signal handlers back as it found them.

A protocol command makes SIGTERM raise `Interrupted` while it runs (so `panel` exits 143 with
the run kept: tests/faults/test_signals.py); left installed in the host, pytest here, a later
SIGTERM would surface as an exception in whatever test happened to be running."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from panel_cli.cli import signals
from panel_cli.cli.signals import Interrupted, handlers_kept, on_sigterm_exit
from panel_cli.errors import UserError
from tests.helpers import cli, cli_json


def marker(signum: int, frame: object) -> None:
    """The host's own handler, told apart from anything panel installs."""


@pytest.fixture
def host_handlers() -> Iterator[None]:
    """The host's own handlers, for SIGINT, SIGTERM and SIGHUP: what pytest has may already be
    SIG_IGN (started in the background by a shell), which would hide a command leaving it so."""
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    for signum in before:
        signal.signal(signum, marker)
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


@pytest.mark.parametrize(
    "args",
    [
        ["confer", "configs/demo.yaml", "--max-rounds", "1", "--json"],
        ["vote", "configs/demo.yaml", "-q", "Tea or coffee?", "--options", "tea", "coffee", "--json"],
    ],
)
def test_a_command_in_process_leaves_sigterm_and_sigint_as_it_found_them(
    host_handlers: None, args: list[str], tmp_path: Path
) -> None:
    ran = cli(*args, "--db", str(tmp_path / "runs.db"))
    assert ran.exit_code == 0, ran.output
    assert signal.getsignal(signal.SIGTERM) is marker
    assert signal.getsignal(signal.SIGINT) is marker
    assert signal.getsignal(signal.SIGHUP) is marker


def test_a_replay_in_process_leaves_sigterm_as_it_found_it(host_handlers: None, tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    run_id = cli_json("confer", "configs/demo.yaml", "--max-rounds", "1", "--db", db)["run_id"]
    ran = cli("history", "replay", run_id, "--speed", "max", "--plain", "--db", db)
    assert ran.exit_code == 0 and "Replay of run" in ran.output, ran.output
    assert signal.getsignal(signal.SIGTERM) is marker


def test_a_command_refused_after_it_armed_sigterm_still_puts_the_handler_back(host_handlers: None) -> None:
    ran = cli("confer", "configs/demo.yaml", "--agents", "nobody")
    assert isinstance(ran.exception, UserError) and "'nobody' is not a member" in ran.exception.message
    assert signal.getsignal(signal.SIGTERM) is marker


def test_while_the_command_runs_sigterm_raises_interrupted(host_handlers: None) -> None:
    with handlers_kept():
        on_sigterm_exit()
        with pytest.raises(Interrupted) as caught:
            signal.raise_signal(signal.SIGTERM)
        assert caught.value.exit_code == 143
    assert signal.getsignal(signal.SIGTERM) is marker


def test_a_command_stopped_by_a_signal_in_process_still_hands_the_handlers_back(host_handlers: None) -> None:
    """Left ignored, SIGINT would be ignored by every subprocess a later test starts."""
    with pytest.raises(Interrupted), handlers_kept():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise Interrupted(signal.SIGINT)
    assert signal.getsignal(signal.SIGTERM) is marker
    assert signal.getsignal(signal.SIGINT) is marker


def test_a_replay_stopped_by_ctrl_c_in_process_hands_the_handlers_back(
    host_handlers: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from panel_cli.view import replay

    async def stopped(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    db = str(tmp_path / "runs.db")
    run_id = cli_json("confer", "configs/demo.yaml", "--max-rounds", "1", "--db", db)["run_id"]
    monkeypatch.setattr(replay, "play", stopped)
    ran = cli("history", "replay", run_id, "--plain", "--db", db)
    assert isinstance(ran.exception, Interrupted) and ran.exception.exit_code == 130
    assert signal.getsignal(signal.SIGTERM) is marker
    assert signal.getsignal(signal.SIGINT) is marker


def test_when_panel_is_the_process_a_signal_leaves_both_ignored_until_it_exits(
    host_handlers: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(signals._Process, "owned", True)
    with pytest.raises(Interrupted), handlers_kept():
        raise Interrupted(signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
