"""What many tests do, in one place: write a panel file for the fake server, build a Panel or a
Member on it, run `panel` in process (CliRunner) or as a real process, wait on an event instead
of a clock, and read back what a terminal shows once the writing stops."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from typer.testing import CliRunner, Result

from panel_cli.cli.app import app
from panel_cli.config import Member, Panel, load_panel
from panel_cli.errors import UserError
from panel_cli.events import BaseEvent, EventBus
from panel_cli.exit_status import ExitStatus
from panel_cli.llm.gateway import Gateway
from panel_cli.protocols.base import engine_of
from panel_cli.protocols.registry import spec
from panel_cli.runs.execute import run_engine
from panel_cli.runs.panels import armed_gate
from panel_cli.store.subscriber import TranscriptStore
from tests.fakes.openai_server import FakeOpenAIServer
from tests.warm_panel import WARM_PANEL_WORKS, WarmPanel, WarmProcess

ROOT = Path(__file__).resolve().parents[1]
# A bound on waiting for something that must happen: it only turns a hang into a failure,
# so it is generous enough for a loaded machine and is never what a test measures.
HANG_GUARD = 120.0
# read(2)'s number in /proc/PID/syscall: x86-64 has its own table; arm64 and most others, 63.
READ_SYSCALL = {"x86_64": 0}.get(os.uname().machine, 63)


# -- panels on the fake server ---------------------------------------------------------------


def member(server: FakeOpenAIServer, name: str = "m", **fields: Any) -> Member:
    """A member whose model, `openai/NAME`, the fake server answers."""
    return Member(name=name, model=f"openai/{name}", api_base=server.url, **fields)


def make_panel(server: FakeOpenAIServer, names: Iterable[str], **fields: Any) -> Panel:
    """A panel `t` of members NAME with model `openai/NAME-model` on the fake server, and no
    retries unless `defaults` says so; `fields`: the panel's other fields."""
    members = [{"name": name, "model": f"openai/{name}-model", "api_base": server.url} for name in names]
    fields.setdefault("defaults", {"retries": 0})
    return Panel.model_validate({"name": "t", "members": members, **fields})


def write_panel(
    path: Path,
    server: FakeOpenAIServer | str,
    names: Iterable[str],
    *fields: str,
    name: str = "fake",
    model: str = "openai/{name}",
    member_lines: str = "",
) -> Path:
    """A panel file of members on the fake server (or at a URL). `fields` are top-level lines
    (`"question: hi"`, several lines in one string are fine), written before the members;
    `model` is formatted with each member's name; `member_lines` is added under every member
    (indented four spaces, ending in a newline)."""
    url = server if isinstance(server, str) else server.url
    head = "".join(f"{field.rstrip(chr(10))}\n" for field in fields if field)
    members = "".join(
        f"  - name: {each}\n    model: {model.format(name=each)}\n    api_base: {url}\n{member_lines}" for each in names
    )
    path.write_text(f"name: {name}\n{head}members:\n{members}")
    return path


# -- panel in process -------------------------------------------------------------------------


def cli(
    *args: str,
    input: str | None = None,
    env: Mapping[str, str] | None = None,
    columns: int | None = 200,
    catch_exceptions: bool = True,
) -> Result:
    """`panel ARGS` in process (typer's CliRunner): its exit code, stdout, stderr, output and
    any exception it raised. `columns`: the terminal width Rich sees (None: no COLUMNS at all,
    as in a pipe, whatever the test's own environment holds)."""
    runner = CliRunner(env={"COLUMNS": None if columns is None else str(columns), **(env or {})})
    return runner.invoke(app, list(args), input=input, catch_exceptions=catch_exceptions)


def cli_json(
    *args: str,
    code: int = 0,
    input: str | None = None,
    env: Mapping[str, str] | None = None,
    columns: int | None = 200,
) -> Any:
    """`panel ARGS --json` in process, which must exit `code`; its JSON on stdout."""
    outcome = cli(*args, "--json", input=input, env=env, columns=columns)
    assert outcome.exit_code == code, (outcome.output, outcome.exception)
    return json.loads(outcome.stdout)


def cli_ok(
    *args: str, input: str | None = None, env: Mapping[str, str] | None = None, columns: int | None = 200
) -> str:
    """`panel ARGS` in process, which must succeed (an exception is raised, not caught); what it printed."""
    outcome = cli(*args, input=input, env=env, columns=columns, catch_exceptions=False)
    assert outcome.exit_code == 0, outcome.output
    return outcome.output


def cli_refused(*args: str, input: str | None = None) -> str:
    """The one sentence `panel ARGS` in process is refused with: a `UserError`, exit 2."""
    outcome = cli(*args, input=input)
    assert isinstance(outcome.exception, UserError), (outcome.output, outcome.exception)
    assert outcome.exception.exit_code == ExitStatus.USER_ERROR
    return outcome.exception.message


# -- panel as a real process (signals, stdin, exit codes, imports) -----------------------------


def panel_process(
    *args: str,
    stdin: str = "",
    env: Mapping[str, str] | None = None,
    timeout: float = 120,
    cwd: Path = ROOT,
    fresh: bool = False,
) -> subprocess.CompletedProcess[str]:
    """`python -m panel_cli ARGS` to its end, `stdin` its whole input, `env` added to ours.
    A child of the warm panel unless `fresh` (tests/warm_panel.py says when that matters)."""
    process = panel_popen(args, fresh=fresh, env=env, cwd=cwd, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    with process:
        try:
            stdout, stderr = process.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def start_panel(
    *args: str,
    stdin: int = subprocess.DEVNULL,
    stderr: int = subprocess.PIPE,
    env: Mapping[str, str] | None = None,
    fresh: bool = False,
) -> subprocess.Popen[str]:
    """`python -m panel_cli ARGS` started, its stdout piped (and stderr, unless `stderr` says
    otherwise), for a test that signals it or reads it as it goes. A child of the warm panel
    unless `fresh`: a test of what happens while panel starts (imports, litellm loading, a
    signal in its first second) needs a fresh interpreter."""
    return panel_popen(args, fresh=fresh, env=env, cwd=ROOT, stdin=stdin, stderr=stderr)


def panel_popen(
    args: Iterable[str], *, fresh: bool, env: Mapping[str, str] | None, cwd: Path, stdin: int, stderr: int
) -> subprocess.Popen[str]:
    """`python -m panel_cli ARGS` with stdout piped: forked by the warm panel, or a fresh
    interpreter when `fresh`, when PANEL_TESTS_FRESH is set (to check that the warm panel
    hides nothing) or when the environment asks for what only a fresh one can honour."""
    environment = {**os.environ, **(env or {})}
    popen: dict[str, Any] = {"stdin": stdin, "stdout": subprocess.PIPE, "stderr": stderr, "text": True, "cwd": cwd}
    if not fresh and WARM_PANEL_WORKS and not os.environ.get("PANEL_TESTS_FRESH"):
        warm = WarmPanel.serving(environment)
        if warm is not None:
            return WarmProcess(warm, list(args), env=environment, **popen)
    return subprocess.Popen(
        [sys.executable, "-m", "panel_cli", *args], env=environment, preexec_fn=hear_ctrl_c, **popen
    )


def hear_ctrl_c() -> None:
    """Run in a child before it starts panel: SIGINT back to its default. A shell without job
    control starts a background command with SIGINT ignored, a child inherits an ignored
    signal, and Python then leaves it ignored: a suite started that way (`pytest &` in a
    script) would signal children that cannot hear Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_python(code: str, *, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`python -c CODE` in a fresh interpreter at the repository's root."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=timeout, check=False
    )


def finish(process: subprocess.Popen[str], timeout: float = HANG_GUARD) -> str:
    """Wait for a started process to end (killed if it outlasts `timeout`); its stderr."""
    try:
        _, stderr = process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return stderr


# -- waiting on events ----------------------------------------------------------------------


def wait_until(
    condition: Callable[[], bool],
    what: str,
    *,
    process: subprocess.Popen[Any] | None = None,
    guard: float = HANG_GUARD,
) -> None:
    """Poll `condition` until it holds. Fails if `process` ends first (it never will get
    there) or after `guard` seconds, which only turns a hang into a failure."""
    deadline = time.monotonic() + guard
    while not condition():
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the process ended (exit {process.returncode}) before {what}")
        assert time.monotonic() < deadline, f"still waiting, after {guard:.0f}s, for {what}"
        time.sleep(0.02)


async def eventually(condition: Callable[[], object], what: str, *, guard: float = HANG_GUARD) -> None:
    """`wait_until` for a test on an event loop: poll without blocking the loop."""
    deadline = time.monotonic() + guard
    while not condition():
        assert time.monotonic() < deadline, f"still waiting, after {guard:.0f}s, for {what}"
        await asyncio.sleep(0.01)


def stored_count(db: Path, sql: str, *params: Any) -> int:
    """`select count(*) …` on a store another process is writing; 0 before the file exists.
    Read-only, so polling never creates the file or takes a write lock."""
    if not db.exists():
        return 0
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
            return int(con.execute(sql, params).fetchone()[0])
    except sqlite3.OperationalError:  # the schema is not there yet
        return 0


def blocked_reading_stdin(pid: int) -> bool:
    """Whether the process's main thread is blocked in read(2) on its standard input (Linux:
    /proc/PID/syscall names the system call a sleeping thread is in, then its arguments)."""
    try:
        number, fd, *_ = Path(f"/proc/{pid}/syscall").read_text().split()
    except (OSError, ValueError):
        return False
    return number == str(READ_SYSCALL) and fd == "0x0"


class FinishedCalls:
    """Counts the calls finished so far; subscribed after the store, each one counted is stored."""

    def __init__(self) -> None:
        self.count = 0

    async def __call__(self, event: BaseEvent) -> None:
        self.count += event.type == "call_finished"


async def interrupted_run(
    panel_file: Path,
    db: Path,
    ready: Callable[[int], bool],
    *,
    question: str | None = None,
    gate: dict[str, str] | None = None,
) -> str:
    """Run the panel in-process until `ready(calls finished and stored)` holds, then cancel it,
    as Ctrl-C does; its run id. A run that ends before it gets there fails the test.
    `question`: the panel file's own by default; `gate`: the gate option given (`{"gate": "merge"}`)."""
    panel = load_panel(panel_file)
    store = await TranscriptStore.open(db)
    counter = FinishedCalls()
    bus = EventBus("interrupted01", [store, counter])
    gateway = Gateway(bus.emit, defaults=panel.defaults, concurrency=panel.concurrency)
    asked = question if question is not None else panel.question or ""
    armed = armed_gate(spec(panel.protocol), panel, gate) if gate else None
    task = asyncio.create_task(run_engine(engine_of(panel.protocol), panel, asked, gateway, bus, gate=armed))
    try:
        await eventually(lambda: ready(counter.count) or task.done(), "the run to get where the test stops it")
        if not ready(counter.count):
            raise AssertionError(f"the run ended ({task.result()!r}) after {counter.count} finished calls")
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    finally:
        await gateway.aclose()
        await store.close()
    return bus.run_id


# -- what a terminal shows --------------------------------------------------------------------

_CONTROL = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])|\r|\n")


def terminal_screen(written: str) -> list[str]:
    """The lines a terminal shows once everything `written` to it has been drawn: cursor
    moves and line erases applied, styles dropped. A live area redrawn any number of times
    (Rich's Live refreshes on a clock) leaves the same screen, so two screens can be compared
    where the bytes written cannot."""
    lines = [""]
    row = column = 0

    def put(text: str) -> None:
        nonlocal column
        line = lines[row].ljust(column)
        lines[row] = line[:column] + text + line[column + len(text) :]
        column += len(text)

    start = 0
    for match in _CONTROL.finditer(written):
        put(written[start : match.start()])
        start = match.end()
        token, (params, command) = match.group(0), match.groups()
        if token == "\n":
            row, column = row + 1, 0
            if row == len(lines):
                lines.append("")
        elif token == "\r":
            column = 0
        elif command == "A":
            row = max(0, row - int(params or 1))
        elif command == "B":
            row += int(params or 1)
            lines.extend("" for _ in range(row + 1 - len(lines)))
        elif command == "G":
            column = int(params or 1) - 1
        elif command == "K" and params == "2":  # the whole line
            lines[row] = ""
        elif command == "K" and params in ("", "0"):  # from the cursor to the end
            lines[row] = lines[row][:column]
        elif command == "K":  # from the start to the cursor
            lines[row] = " " * column + lines[row][column:]
    put(written[start:])
    shown = [line.rstrip() for line in lines]
    while shown and not shown[-1]:
        shown.pop()
    return shown
