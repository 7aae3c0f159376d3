"""Answers streamed into the live view: rows grow as replies are written, the store keeps only
the finished text, and only a live terminal view asks for streams."""

from __future__ import annotations

import asyncio
import re
from io import StringIO
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from panel_cli.cli.app import app
from panel_cli.config import Panel
from panel_cli.events import CallFinished, CallStarted, CallTextGrew, EventBus, RunStarted, StageStarted
from panel_cli.protocols.confer.engine import confer
from panel_cli.runs.execute import run_panel
from panel_cli.runs.prepare import PreparedRun
from panel_cli.store.reader import TranscriptReader
from panel_cli.store.subscriber import TranscriptStore
from panel_cli.view.live import LiveView
from panel_cli.view.orchestrate import TaskStage
from panel_cli.view.tables import CallRow, StageState
from tests.fakes.openai_server import FakeOpenAIServer, RecordedRequest, responder
from tests.helpers import make_panel, terminal_screen, write_panel
from tests.view.sample import MEMBERS, screen

# Names of one length and numbered words of one width: a piece of 18 characters is two
# whole words, so the number at the end of a row says how far its reply has got.
NAMES = ["alpha", "bravo", "delta"]


def counted(name: str, words: int = 24) -> str:
    """`alpha-01 alpha-02 …`: where a reply has got to reads off the number at its end."""
    return " ".join(f"{name}-{number:02d}" for number in range(1, words + 1))


def answer_or_vote(request: RecordedRequest) -> str:
    prompt = str(request.messages[-1]["content"])
    if "[panel-task: confer.vote]" in prompt:
        label = re.findall(r"^=== Answer ([A-Z]+) \[", prompt, re.MULTILINE)[0]
        return f'{{"chosen_label": "{label}", "revised_answer": "", "confidence": 80, "rationale": "first"}}'
    return counted(request.model.removesuffix("-model"))


def fake_panel(server: FakeOpenAIServer) -> Panel:
    return make_panel(server, NAMES, max_rounds=1)


async def test_a_row_shows_the_end_of_the_reply_as_it_is_written(console: Console) -> None:
    view = LiveView(console)
    bus = EventBus("run-1", [view])
    start = [
        RunStarted(protocol="confer", panel="p", question="Q?", members=MEMBERS),
        StageStarted(stage="answer", round=0, members=["alice", "bob"]),
        CallStarted(call_id="c1", member="alice", model="openai/gpt-4o", stage="answer", round=0),
    ]
    for event in start:
        await bus.emit(event)
    text = counted("alice", 40)
    await bus.emit(
        CallTextGrew(call_id="c1", member="alice", model="openai/gpt-4o", stage="answer", round=0, text=text[:18])
    )
    await asyncio.sleep(0)  # the first words are drawn at once, not at Live's next tick
    first = screen(console)
    assert "writing" in first and "alice-01 alice-02" in first
    await bus.emit(
        CallTextGrew(call_id="c1", member="alice", model="openai/gpt-4o", stage="answer", round=0, text=text)
    )
    row = view._stage.rows[0] if view._stage else None
    assert row is not None and row.status == "writing" and row.preview.endswith("alice-40")
    assert view._stage is not None and view._stage.progress == "round 0 · answer · 0/2 done"
    await bus.emit(
        CallFinished(
            call_id="c1", member="alice", model="openai/gpt-4o", stage="answer", round=0, text=text, latency=1.0
        )
    )
    view.close()
    assert row.status == "answered" and row.preview.startswith("alice-01 alice-02")
    final_table = screen(console)[len(first) :]
    assert "answered" in final_table and "alice-01 alice-02" in final_table


async def test_growth_for_a_stage_already_printed_is_left_out(console: Console) -> None:
    view = LiveView(console)
    bus = EventBus("run-1", [view])
    for event in [
        RunStarted(protocol="confer", panel="p", question="Q?", members=MEMBERS),
        StageStarted(stage="answer", round=0, members=["alice"]),
        StageStarted(stage="vote", round=1, members=["alice"]),
        CallTextGrew(call_id="late", member="alice", model="openai/gpt-4o", stage="answer", round=0, text="too late"),
    ]:
        await bus.emit(event)
    view.close()
    assert "too late" not in screen(console)


def test_a_row_that_has_ended_keeps_its_ending() -> None:
    row = CallRow("alice")
    row.status = "answered"
    row.preview = "final"
    row.grow("more words")
    assert (row.status, row.preview) == ("answered", "final")


def test_the_tail_is_cut_at_the_start_to_fit_its_cell() -> None:
    stage = StageState("answer", 0)
    stage.call_row("c1", "alice", None, None).grow(counted("alice", 60))
    console = Console(file=StringIO(), force_terminal=True, width=60)
    console.print(stage.render())
    line = next(line for line in screen(console).splitlines() if "writing" in line)
    assert "…" in line and line.rstrip().endswith("alice-60")


def test_a_subtask_being_written_shows_its_output_so_far() -> None:
    from panel_cli.events import PlanAccepted, PlannedTask, TaskStarted

    plan = PlanAccepted(
        attempt=1, planner="boss", tasks=[PlannedTask(task_id="t1", worker="alice", title="Find the facts")]
    )
    stage = TaskStage("subtasks", None, plan=plan)
    stage.update(TaskStarted(task_id="t1", worker="alice"))
    stage.call_row("c1", "alice", None, "t1").grow("the facts so far")
    console = Console(file=StringIO(), force_terminal=True, width=120)
    console.print(stage.render())
    assert "the facts so far" in screen(console) and "Find the facts" not in screen(console)


async def test_a_streamed_run_reaches_the_view_in_order_and_the_store_keeps_each_text_once(
    fake_server, tmp_path: Path
) -> None:
    fake_server.default(responder(answer_or_vote, spacing=0.03, chunk_chars=18))
    console = Console(file=StringIO(), force_terminal=True, width=200, height=60)
    view = LiveView(console)
    store = await TranscriptStore.open(tmp_path / "runs.db")
    try:
        outcome = await run_panel(
            PreparedRun(engine=confer, panel=fake_panel(fake_server), question="Which?", warnings=(), secrets=()),
            store=store,
            view=view,
            stream=True,
            run_id="streamed-run",
        )
    finally:
        await store.close()
    assert outcome.result.reached_answer
    # Every answer was streamed; no vote was.
    assert sorted((request.model, request.streamed) for request in fake_server.requests) == sorted(
        [(f"{name}-model", True) for name in NAMES] + [(f"{name}-model", False) for name in NAMES]
    )
    # In order: for each member, where its row has got to only moves forward, frame after frame.
    frames = screen(console)
    for name in NAMES:
        shown = [int(number) for number in re.findall(rf"writing .*?{name}-(\d+)\s*$", frames, re.MULTILINE)]
        assert shown, f"{name}'s reply was never drawn as it was written"
        assert shown == sorted(shown) and shown[-1] <= 24
    with TranscriptReader.open(tmp_path / "runs.db") as reader:
        events = reader.run_events("streamed-run")
        calls = reader.run_calls("streamed-run")
    assert "call_text_grew" not in {event["type"] for event in events}
    assert [event["seq"] for event in events] == list(range(1, len(events) + 1))
    answers = sorted(call.response for call in calls if call.stage == "answer")
    assert answers == sorted(counted(name) for name in NAMES)


def streaming_panel(path: Path, server: FakeOpenAIServer) -> Path:
    return write_panel(path, server, NAMES, "max_rounds: 1", "defaults: {retries: 0}", model="openai/{name}-model")


def test_only_the_live_terminal_view_streams(fake_server, tmp_path: Path, monkeypatch) -> None:
    fake_server.default(responder(answer_or_vote))
    file = streaming_panel(tmp_path / "p.yaml", fake_server)
    # Rich takes stdout for a terminal, as a person's would be.
    runner = CliRunner(env={"TTY_COMPATIBLE": "1", "COLUMNS": "160"})
    streamed: dict[str, list[bool]] = {}
    for mode in ("live", "--json", "--quiet", "--no-stream"):
        before = len(fake_server.requests)
        extra = [] if mode == "live" else [mode]
        outcome = runner.invoke(app, ["confer", str(file), "-q", "Which?", "--db", str(tmp_path / "r.db"), *extra])
        assert outcome.exit_code == 0, outcome.output
        streamed[mode] = [request.streamed for request in fake_server.requests[before:]]
    assert streamed["live"].count(True) == len(NAMES), "the answers stream; the votes do not"
    assert streamed["--json"] == [False] * 2 * len(NAMES)
    assert streamed["--quiet"] == [False] * 2 * len(NAMES)
    assert streamed["--no-stream"] == [False] * 2 * len(NAMES)


def test_a_member_with_stream_false_is_not_streamed_on_a_terminal(fake_server, tmp_path: Path) -> None:
    fake_server.default(responder(answer_or_vote))
    file = streaming_panel(tmp_path / "p.yaml", fake_server)
    text = file.read_text().replace("  - name: bravo\n", "  - name: bravo\n    stream: false\n")
    file.write_text(text)
    outcome = CliRunner(env={"TTY_COMPATIBLE": "1", "COLUMNS": "160"}).invoke(
        app, ["confer", str(file), "-q", "Which?", "--db", str(tmp_path / "r.db")]
    )
    assert outcome.exit_code == 0, outcome.output
    answers = [request for request in fake_server.requests if "[panel-task: confer.vote]" not in str(request.messages)]
    assert sorted((request.model, request.streamed) for request in answers) == [
        ("alpha-model", True),
        ("bravo-model", False),
        ("delta-model", True),
    ]


def test_the_live_view_runs_on_an_endpoint_that_cannot_stream(fake_server, tmp_path: Path) -> None:
    """On a terminal the answers are asked for as streams; a server that answers each with one
    whole JSON reply still gets its answers into the rows and the run to its end."""
    fake_server.streaming = False
    fake_server.default(responder(answer_or_vote))
    file = streaming_panel(tmp_path / "p.yaml", fake_server)
    outcome = CliRunner(env={"TTY_COMPATIBLE": "1", "COLUMNS": "200"}).invoke(
        app, ["confer", str(file), "-q", "Which?", "--db", str(tmp_path / "r.db")]
    )
    assert outcome.exit_code == 0, outcome.output
    assert [request.streamed for request in fake_server.requests].count(True) == len(NAMES)
    shown = "\n".join(terminal_screen(outcome.output))
    assert "malformed" not in shown
    for name in NAMES:
        assert re.search(rf"{name}\s+answered .*{name}-01 {name}-02", shown), shown


def test_a_pipe_does_not_stream(fake_server, tmp_path: Path) -> None:
    fake_server.default(responder(answer_or_vote))
    file = streaming_panel(tmp_path / "p.yaml", fake_server)
    outcome = CliRunner(env={"TTY_COMPATIBLE": "0"}).invoke(
        app, ["confer", str(file), "-q", "Which?", "--db", str(tmp_path / "r.db")]
    )
    assert outcome.exit_code == 0, outcome.output
    assert not any(request.streamed for request in fake_server.requests)


class Clock:
    """A clock a test sets: what a live view measures a running call's time by."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def row_line(stage: StageState, name: str) -> str:
    console = Console(file=StringIO(), force_terminal=True, width=120)
    console.print(stage.render())
    return next(line for line in screen(console).splitlines() if line.strip().startswith(name))


async def test_a_running_call_shows_how_long_it_has_run_and_says_writing_once_its_text_streams(
    console: Console,
) -> None:
    clock = Clock()
    view = LiveView(console, clock=clock)
    bus = EventBus("run-1", [view])
    route = {"member": "alice", "model": "openai/gpt-4o", "stage": "answer", "round": 0}
    for event in [
        RunStarted(protocol="confer", panel="p", question="Q?", members=MEMBERS),
        StageStarted(stage="answer", round=0, members=["alice", "bob"]),
        CallStarted(call_id="c1", **route),
    ]:
        await bus.emit(event)
    stage = view._stage
    assert stage is not None
    clock.now += 3.4
    waiting = row_line(stage, "A alice").split()
    assert waiting[2:4] == ["waiting", "3s"], waiting
    assert row_line(stage, "B bob").split()[2:] == ["waiting"], "a member whose call has not started has no time"
    await bus.emit(CallTextGrew(call_id="c1", **route, text="first words"))
    clock.now += 2.0
    writing = row_line(stage, "A alice").split()
    assert writing[2:4] == ["writing", "5s"] and writing[-2:] == ["first", "words"], writing
    await bus.emit(CallFinished(call_id="c1", **route, text="first words and more", latency=5.25))
    clock.now += 60
    assert row_line(stage, "A alice").split()[2:4] == ["answered", "5.25s"], "an ended call shows its latency"
    view.close()


def test_the_live_area_draws_a_running_time_anew_each_second_with_no_event() -> None:
    from panel_cli.view.frame import Frame

    clock = Clock(100.2)
    stage = StageState("answer", 0, clock=clock)
    stage.announce("alice", None)
    stage.call_row("c1", "alice", None, None).started = 100.0
    frame, console = Frame(), Console(file=StringIO(), force_terminal=True, width=80)

    def drawn() -> str:
        return "".join(segment.text for segment in frame.render(stage, console, console.options))

    assert re.search(r"alice\s+waiting\s+0s", drawn())
    clock.now = 101.6
    assert re.search(r"alice\s+waiting\s+1s", drawn())


def test_a_stored_run_drawn_again_shows_no_running_time() -> None:
    """`panel history show` draws with animate=False: a call still running when the run ended
    has no running time, which would be measured from when it is drawn."""
    from tests.view.sample import play

    console = Console(file=StringIO(), force_terminal=True, width=120)
    view = LiveView(console, animate=False, clock=Clock())
    events = [
        RunStarted(protocol="confer", panel="p", question="Q?", members=MEMBERS),
        StageStarted(stage="answer", round=0, members=["alice"]),
        CallStarted(call_id="c1", member="alice", model="openai/gpt-4o", stage="answer", round=0),
    ]
    asyncio.run(play(view, events))
    line = next(line for line in screen(console).splitlines() if "alice" in line and "waiting" in line)
    assert line.split()[2:] == ["waiting"]
