from __future__ import annotations

import re
from io import StringIO

import pytest
from rich.console import Console

from panel_cli.events import RunFinished, parse_event
from panel_cli.view.base import NullView, make_view
from panel_cli.view.environment import Environment
from panel_cli.view.live import LiveView
from panel_cli.view.plain import PlainView
from tests.helpers import terminal_screen
from tests.view.sample import confer_events, play, screen


class TerminalStream(StringIO):
    """Stands for stderr on a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _terminal_from_isatty(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rich lets these variables overrule isatty; the tests below decide by isatty alone."""
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)


def test_make_view_picks_by_mode_and_terminal() -> None:
    terminal = Environment(stdout=StringIO(), stderr=StringIO(), stdout_isatty=True, stderr_isatty=False)
    pipe = Environment(stdout=StringIO(), stderr=StringIO(), stdout_isatty=False, stderr_isatty=False)

    assert isinstance(make_view(terminal, json_mode=True, quiet=False), NullView)
    assert isinstance(make_view(terminal, json_mode=False, quiet=True), NullView)
    assert isinstance(make_view(terminal, json_mode=False, quiet=False), LiveView)
    plain = make_view(pipe, json_mode=False, quiet=False)
    assert isinstance(plain, PlainView) and plain.stream is pipe.stderr


async def test_json_on_a_terminal_draws_the_run_on_stderr() -> None:
    """stdout carries the JSON alone; a person at the terminal still watches the run."""
    env = Environment(stdout=StringIO(), stderr=TerminalStream(), stdout_isatty=True)
    view = make_view(env, json_mode=True, quiet=False)
    assert isinstance(view, LiveView) and view.console.file is env.stderr
    await play(view, confer_events())
    drawn = screen(view.console)
    assert "round 1 · vote" in drawn and "winner alice" in drawn
    assert env.stdout.getvalue() == ""


def test_quiet_draws_nothing_even_with_json_on_a_terminal() -> None:
    terminal = Environment(stdout=StringIO(), stderr=TerminalStream(), stdout_isatty=True)
    for json_mode in (True, False):
        assert isinstance(make_view(terminal, json_mode=json_mode, quiet=True), NullView)


async def test_null_view_prints_nothing(console: Console, capsys: pytest.CaptureFixture[str]) -> None:
    await play(NullView(), confer_events())
    assert screen(console) == ""
    assert capsys.readouterr() == ("", "")


async def test_replay_of_stored_events_draws_the_same(console: Console) -> None:
    stamped = await play(LiveView(console), confer_events())
    live_stream = StringIO()
    live_plain = PlainView(live_stream)
    for event in stamped:
        await live_plain(event)

    stored = [event.model_dump(mode="json") for event in stamped]
    replayed = [parse_event(payload) for payload in stored]
    assert isinstance(replayed[-1], RunFinished)

    replay_console = Console(file=StringIO(), force_terminal=True, width=120)
    replay_view = LiveView(replay_console)
    replay_stream = StringIO()
    plain = PlainView(replay_stream)
    for event in replayed:
        await replay_view(event)
        await plain(event)
    replay_view.close()

    # What each terminal shows at the end; the bytes differ with how often Live's clock redrew.
    assert terminal_screen(replay_console.file.getvalue()) == terminal_screen(console.file.getvalue())
    assert replay_stream.getvalue() == live_stream.getvalue()


_SGR = re.compile(r"\x1b\[([0-9;]*)m")


def _has_colour(output: str) -> bool:
    """True when any SGR sequence sets a foreground or background colour."""
    for params in _SGR.findall(output):
        codes = [int(code) for code in params.split(";") if code]
        if any(30 <= c <= 38 or 40 <= c <= 48 or 90 <= c <= 97 or 100 <= c <= 107 for c in codes):
            return True
    return False


@pytest.mark.parametrize("no_color", [None, "1"])
async def test_no_color_env_is_honoured(monkeypatch: pytest.MonkeyPatch, no_color: str | None) -> None:
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)
    console = Console(file=StringIO(), force_terminal=True, width=120)
    await play(LiveView(console), confer_events())
    assert isinstance(console.file, StringIO)
    assert _has_colour(console.file.getvalue()) is (no_color is None)
