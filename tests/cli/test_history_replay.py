"""`panel history replay`: the stored timing scaled by --speed (checked on the waits asked
for, never on a clock), the speed's spelling, unreadable events, and Ctrl-C or SIGTERM in the
middle of a replay, in a real process."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer

from panel_cli.cli.history import history_app
from panel_cli.errors import UserError
from panel_cli.events import BaseEvent, RunFinished, RunStarted, StageStarted
from panel_cli.view import replay
from panel_cli.view.replay import pauses, play, stored_events
from tests.cli.test_history import keep_at
from tests.helpers import HANG_GUARD, cli, hear_ctrl_c
from tests.store.sample_runs import answer_calls, confer_run, run_started, vote_round

ROOT = Path(__file__).resolve().parents[2]

app = typer.Typer()
app.add_typer(history_app, name="history")


def at(*times: float) -> list[BaseEvent]:
    """Events stamped at `times`, as the bus stamps them."""
    return [StageStarted(stage="answer", seq=seq, ts=ts) for seq, ts in enumerate(times, start=1)]


class FakeView:
    """A view that only notes what it was given, and whether it was closed."""

    def __init__(self) -> None:
        self.seen: list[BaseEvent] = []
        self.closed = False

    async def __call__(self, event: BaseEvent) -> None:
        self.seen.append(event)

    def close(self) -> None:
        self.closed = True


def test_each_pause_is_the_stored_gap_divided_by_the_speed() -> None:
    events = at(100.0, 101.0, 103.5, 103.5, 110.0)
    assert pauses(events, 10) == pytest.approx([0, 0.1, 0.25, 0, 0.65])
    assert pauses(events, 1) == pytest.approx([0, 1, 2.5, 0, 6.5])
    assert pauses(events, 0.5) == pytest.approx([0, 2, 5, 0, 13])
    assert pauses(events, None) == [0, 0, 0, 0, 0]
    assert pauses(at(100.0, 99.0), 1) == [0, 0], "a clock that stepped back waits nothing"
    assert pauses([], 10) == []


async def test_play_waits_the_pauses_then_feeds_every_event_in_order() -> None:
    events = at(100.0, 102.0, 102.0, 106.0)
    waits: list[float] = []
    view = FakeView()

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    await play(view, events, speed=2, sleep=sleep)
    assert waits == [1.0, 2.0], "no call to sleep for no pause"
    assert view.seen == events and view.closed


async def test_a_replay_stopped_midway_still_closes_its_view() -> None:
    """Ctrl-C lands in a pause: the view is closed (Live stopped, the cursor given back)."""
    view = FakeView()

    async def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        await play(view, at(1.0, 2.0, 3.0), speed=1, sleep=interrupted)
    assert len(view.seen) == 1 and view.closed


def test_an_event_this_version_cannot_read_is_left_out() -> None:
    payloads = [
        run_started().model_dump(mode="json"),
        {"type": "from_a_newer_panel", "run_id": "r1", "seq": 2, "ts": 1.0},
        {
            "type": "stage_started",
            "run_id": "r1",
            "seq": 3,
            "ts": 2.0,
        },  # no stage: not a stage_started this version reads
        RunFinished(final_answer="yes").model_dump(mode="json"),
    ]
    events = stored_events(payloads)
    assert [type(event) for event in events] == [RunStarted, RunFinished]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A confer run whose first stage opened as it started, and whose later events came a minute apart."""
    path = tmp_path / "runs.db"
    events = confer_run("slow")
    keep_at(path, "slow", events, [1_700_000_000 + 60 * max(0, index - 1) for index in range(len(events))])
    return path


@pytest.mark.parametrize(
    ("speed", "factor", "pace"),
    [
        (None, 10.0, "10× speed"),
        ("10", 10.0, "10× speed"),
        ("1", 1.0, "real time"),
        ("2.5", 2.5, "2.5× speed"),
        ("0", None, "no waiting"),
        ("MAX", None, "no waiting"),
        ("inf", None, "no waiting"),
    ],
)
def test_the_speed_is_said_first_and_paces_the_events(
    db: Path, speed: str | None, factor: float | None, pace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[float | None] = []

    def paced(events: list[BaseEvent], speed: float | None) -> list[float]:
        asked.append(speed)
        return [0.0] * len(events)  # the minute-long gaps are not waited here

    monkeypatch.setattr(replay, "pauses", paced)
    args = ["history", "replay", "slo", "--db", str(db)] + (["--speed", speed] if speed else [])
    result = cli(*args, catch_exceptions=False, columns=160)
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert first.startswith("Replay of run slow from ") and first.endswith(f", {pace}; no model is called.")
    assert asked == [factor]


@pytest.mark.parametrize("speed", ["fast", "-1", "nan", "", "10x", "1e-300", "0.001"])
def test_a_speed_that_is_no_number_is_one_sentence(db: Path, speed: str) -> None:
    with pytest.raises(UserError) as raised:
        cli("history", "replay", "slow", "--speed", speed, "--db", str(db), catch_exceptions=False, columns=160)
    assert raised.value.message == (
        "--speed takes a number of times faster than the run from 0.01 up (10, 1, 0.5),"
        f" or 0 or max for no waiting, not '{speed}'."
    )


def test_a_run_with_no_events_has_nothing_to_replay(tmp_path: Path) -> None:
    """A database written before events were kept: the run row alone."""
    path = tmp_path / "runs.db"
    keep_at(path, "bare", [run_started()], [1_700_000_000])
    import sqlite3

    with sqlite3.connect(path) as connection:
        connection.execute("DELETE FROM events")
    with pytest.raises(UserError, match="^Run bare has no stored events to replay.$"):
        cli("history", "replay", "bare", "--db", str(path), catch_exceptions=False, columns=160)


def start_replay(db: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "panel_cli", "history", "replay", "slow", "--speed", "1", "--db", str(db), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        preexec_fn=hear_ctrl_c,
    )


def read_until(process: subprocess.Popen[bytes], marker: bytes, limit: float = HANG_GUARD) -> bytes:
    """What the process wrote on stdout up to `marker`; the replay then sits in a minute's pause."""
    assert process.stdout is not None
    seen = b""
    deadline = time.monotonic() + limit
    while marker not in seen:
        assert time.monotonic() < deadline, f"no {marker!r} in {seen!r}"
        ready, _, _ = select.select([process.stdout], [], [], 0.5)
        if ready:
            chunk = os.read(process.stdout.fileno(), 65536)
            assert chunk, f"the replay ended early: {seen!r}"
            seen += chunk
    return seen


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("signum", "code", "said"),
    [(signal.SIGINT, 130, "interrupted by SIGINT."), (signal.SIGTERM, 143, "interrupted by SIGTERM.")],
)
def test_a_signal_stops_a_plain_replay_cleanly(db: Path, signum: int, code: int, said: str) -> None:
    process = start_replay(db, "--plain")
    read_until(process, b"[round 0] answer started")
    process.send_signal(signum)
    out, err = process.communicate(timeout=HANG_GUARD)
    assert process.returncode == code
    assert err.decode() == f"panel: {said}\n"
    assert b"call started" not in out, "stopped in the first pause"


@pytest.mark.subprocess
def test_ctrl_c_in_the_live_view_gives_the_terminal_back(db: Path) -> None:
    """On a terminal Live hides the cursor; stopped in a pause, the replay prints the stage in
    progress and shows the cursor again before it exits 130."""
    process = start_replay(db, env={"TTY_COMPATIBLE": "1", "NO_COLOR": "1"})
    seen = read_until(process, b"\x1b[?25l")
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=HANG_GUARD)
    assert process.returncode == 130 and err.decode() == "panel: interrupted by SIGINT.\n"
    shown = seen + out
    assert shown.rindex(b"\x1b[?25h") > shown.index(b"\x1b[?25l")
    assert b"round 0 \xc2\xb7 answer" in out, "the stage in progress, printed as it stood"
    assert b"Traceback" not in err


def test_replay_leaves_the_store_as_it_was(db: Path) -> None:
    before = db.read_bytes()
    result = cli("history", "replay", "slow", "--speed", "max", "--db", str(db), catch_exceptions=False, columns=160)
    assert result.exit_code == 0
    assert db.read_bytes() == before
    assert sorted(path.name for path in db.parent.iterdir() if path.name.startswith("runs")) == ["runs.db"]


def test_answer_calls_and_vote_round_replay_in_plain_lines(tmp_path: Path) -> None:
    """The plain form, line by line, for a run the store tests also use."""
    path = tmp_path / "runs.db"
    events = [run_started(), *answer_calls("r1"), *vote_round("r1")]
    keep_at(path, "r1", events, [1_700_000_000 + index for index in range(len(events))])
    lines = cli(
        "history", "replay", "r1", "--plain", "--speed", "max", "--db", str(path), columns=160
    ).stdout.splitlines()
    assert lines[1] == "run started  confer  db-choice  members: gpt, claude  run r1"
    assert "[round 1] call failed  claude  timeout: timed out after 300s" in lines
    assert "round 1 tallied: A=80 B=50 -> A (gpt)" in lines
    assert lines[-1] == "round 1 tallied: A=80 B=50 -> A (gpt)", "a run that never ended prints no answer"
