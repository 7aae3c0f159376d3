"""`panel history show` and `replay` for every protocol: each run is made in-process through
`run_engine` (the demo personas, and one run against the fake server with a failing member),
stored by the real TranscriptStore while a live view and a plain view watch it; then `show`
must draw exactly what the live view drew, and `replay` exactly what the plain view wrote,
from the stored events alone."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import typer
from rich.console import Console

from panel_cli.cli.history import history_app
from panel_cli.config import Panel, load_panel
from panel_cli.events import EventBus
from panel_cli.llm.gateway import Gateway
from panel_cli.protocols.base import Engine
from panel_cli.protocols.confer.engine import confer
from panel_cli.protocols.council.engine import council
from panel_cli.protocols.delphi.engine import delphi
from panel_cli.protocols.ensemble.engine import ensemble
from panel_cli.protocols.orchestrate.engine import orchestrate
from panel_cli.protocols.supervise.engine import supervise
from panel_cli.protocols.vote.engine import decide, vote
from panel_cli.runs.execute import run_engine
from panel_cli.store.subscriber import TranscriptStore
from panel_cli.view.live import LiveView
from panel_cli.view.plain import PlainView
from tests.fakes.openai_server import FakeOpenAIServer, error, responder
from tests.helpers import cli_ok
from tests.protocols.conftest import task_of, vote_json

ROOT = Path(__file__).resolve().parents[2]
WIDTH = 120
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

app = typer.Typer()
app.add_typer(history_app, name="history")

DEMO_RUNS: dict[str, tuple[str, Engine]] = {
    "confer": ("demo.yaml", confer),
    "council": ("council.yaml", council),
    "ensemble": ("ensemble.yaml", ensemble),
    "vote": ("vote.yaml", vote),
    "decide": ("decide.yaml", decide),
    "delphi": ("delphi.yaml", delphi),
    "supervise": ("supervise.yaml", supervise),
    "orchestrate": ("orchestrate.yaml", orchestrate),
}

# What only that protocol's own tables draw: its rounds, tallies, rankings, ballots, verdicts, tree.
OWN_TABLES: dict[str, list[str]] = {
    "confer": ["round 0 · answer", "round 1 · vote", "★ the round's winner", "winner: "],
    "council": ["review", "aggregate ranking", "avg rank", "synthesis", "top ranked"],
    "ensemble": ["★ the chosen response", "mode consensus"],
    "vote": ["ranked choice · quorum", "quorum reached", "instant runoff", "round 1: ", "winner: "],
    "decide": ["unanimous · quorum 3", "no winner: ", "leader sage chose", "leader override"],
    "delphi": ["round 1 · contribution", "round 3 · contribution", "experts contributed", "no further round"],
    "supervise": [
        "round 1 · work",
        "round 1 · critique",
        "verdicts",
        "✗ rejected",
        "round 2 · correction",
        "✓ approved",
    ],
    "orchestrate": ["round 1 · plan", "subtasks · plan by planner", "└─ t", "succeeded"],
}


@dataclass
class StoredRun:
    """A run as the store kept it, with what its views drew while it ran."""

    run_id: str
    protocol: str
    result: dict[str, Any]
    drawn: str  # the live view on a console that is no terminal, without its header
    plain: str  # the plain view's lines


def quiet_console(file: StringIO) -> Console:
    """Like `panel history`'s own console: no markup, no emoji codes, no highlighting."""
    return Console(file=file, width=WIDTH, markup=False, emoji=False, highlight=False)


async def record_run(path: Path, run_id: str, engine: Engine, panel: Panel, question: str) -> StoredRun:
    drawn, plain = StringIO(), StringIO()
    live = LiveView(quiet_console(drawn), header=False)
    lines = PlainView(plain)
    store = await TranscriptStore.open(path)
    bus = EventBus(run_id, [store, live, lines])
    gateway = Gateway(bus.emit, defaults=panel.defaults, concurrency=panel.concurrency)
    try:
        outcome = await run_engine(engine, panel, question, gateway, bus)
    finally:
        live.close()
        await gateway.aclose()
        await store.close()
    return StoredRun(run_id, panel.protocol, outcome.payload(), drawn.getvalue(), plain.getvalue())


def failing_member_panel(server: FakeOpenAIServer) -> Panel:
    """confer against the fake server: bob's key is refused (so bob is skipped from then on),
    and a name and an answer carry Rich markup."""

    def answer(request: Any) -> str:
        if task_of(request) == "confer.vote":
            return vote_json("A", 80, "Use [bold]PostgreSQL[/bold].", "[/INST] it is sound")
        return "PostgreSQL [red]now[/red]."

    server.script("ann-model", responder(answer))
    server.script("cy-model", responder(answer))
    server.script("bob-model", error(401, "invalid api key"))
    members = [
        {"name": name, "model": f"openai/{model}-model", "api_base": server.url}
        for name, model in (("[b]ann", "ann"), ("bob", "bob"), ("cy", "cy"))
    ]
    return Panel.model_validate({"name": "fake", "members": members, "defaults": {"retries": 0}, "max_rounds": 2})


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, StoredRun]]]:
    """One database with a run of every protocol (demo personas) and one fake-server run."""
    path = tmp_path_factory.mktemp("history") / "runs.db"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PANEL_DEMO_DELAY", "0")
        env.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        env.setenv("LITELLM_OFFLINE_MODE", "True")

        async def make_all(server: FakeOpenAIServer) -> dict[str, StoredRun]:
            made = {}
            for protocol, (file, engine) in DEMO_RUNS.items():
                panel = load_panel(ROOT / "configs" / file)
                assert panel.question is not None
                made[protocol] = await record_run(path, f"{protocol}-run", engine, panel, panel.question)
            made["fake"] = await record_run(
                path, "fake-run", confer, failing_member_panel(server), "Which [i]database[/i]?"
            )
            return made

        with FakeOpenAIServer() as server:
            made = asyncio.run(make_all(server))
        yield path, made


def history(*args: str, env: dict[str, str] | None = None) -> str:
    return cli_ok("history", *args, env=env, columns=WIDTH)


@pytest.mark.parametrize("protocol", [*DEMO_RUNS, "fake"])
def test_show_draws_what_the_live_view_drew(runs: tuple[Path, dict[str, StoredRun]], protocol: str) -> None:
    path, made = runs
    run = made[protocol]
    shown = history("show", run.run_id, "--db", str(path))
    assert run.drawn in shown, "the stages, the answer and the summary, as the live view drew them"
    header, _, rest = shown.partition(run.drawn)
    assert header.startswith(f"Run       {run.run_id}")
    assert f"Protocol  {run.protocol}" in header
    rows = re.findall(r"\n│ [^ │]", rest)  # a row's first line names its member; a long note folds below
    assert "Calls" in rest and len(rows) == run.result["calls"], "then one row per call"
    for table in OWN_TABLES.get(protocol, []):
        assert table in run.drawn, table


@pytest.mark.parametrize("protocol", DEMO_RUNS)
def test_show_ends_with_the_answer_and_its_summary(runs: tuple[Path, dict[str, StoredRun]], protocol: str) -> None:
    path, made = runs
    run = made[protocol]
    shown = history("show", run.run_id, "--db", str(path))
    assert "╭─ answer" in shown
    assert f"run {run.run_id}" in shown and "cost simulated, free" in shown
    first_line = run.result["final_answer"].splitlines()[0]
    assert " ".join(first_line.split()[:4]) in " ".join(shown.split())
    if run.result.get("winner"):
        assert f"winner {run.result['winner']}" in shown


@pytest.mark.parametrize("protocol", [*DEMO_RUNS, "fake"])
def test_replay_plain_writes_what_the_plain_view_wrote(runs: tuple[Path, dict[str, StoredRun]], protocol: str) -> None:
    path, made = runs
    run = made[protocol]
    replayed = history("replay", run.run_id, "--speed", "max", "--db", str(path))
    note, _, rest = replayed.partition("\n")
    assert note.startswith(f"Replay of run {run.run_id} from ") and note.endswith(", no waiting; no model is called.")
    assert rest.startswith(run.plain)
    assert rest[len(run.plain) :] == f"\n{run.result['final_answer'].rstrip()}\n", "then the answer, as a run prints it"
    assert history("replay", run.run_id, "--plain", "--speed", "0", "--db", str(path)) == replayed


@pytest.mark.parametrize("protocol", DEMO_RUNS)
def test_replay_on_a_terminal_draws_the_live_view(runs: tuple[Path, dict[str, StoredRun]], protocol: str) -> None:
    path, made = runs
    run = made[protocol]
    raw = history(
        "replay", run.run_id, "--speed", "max", "--db", str(path), env={"TTY_COMPATIBLE": "1", "NO_COLOR": "1"}
    )
    assert "\x1b[?25l" in raw and raw.endswith("\n") and "\x1b[?25h" in raw, "a live area, and the cursor given back"
    text = ANSI.sub("", raw)
    assert f"{run.protocol} · " in text, "the live view's own header"
    for table in OWN_TABLES[protocol]:
        assert table in text, table
    assert "╭─ answer" in text and f"run {run.run_id}" in text


def test_show_plain_gives_the_plain_lines(runs: tuple[Path, dict[str, StoredRun]]) -> None:
    path, made = runs
    run = made["vote"]
    shown = history("show", run.run_id, "--plain", "--db", str(path))
    assert run.plain in shown and "Calls" in shown
    assert "╭─ answer" not in shown


def test_a_failed_member_and_markup_in_a_fake_server_run(runs: tuple[Path, dict[str, StoredRun]]) -> None:
    """The refused member shows as failed and then skipped; markup in a name, the question, an
    answer and a rationale prints as written, in show, replay and the JSON."""
    path, made = runs
    run = made["fake"]
    shown = history("show", run.run_id, "--db", str(path))
    assert "Question  Which [i]database[/i]?" in shown
    assert "[b]ann (openai/ann-model)" in shown
    assert "auth: " in shown and "skipped" in shown
    assert "[/INST] it is sound" in shown
    assert "Use [bold]PostgreSQL[/bold]." in shown
    replayed = history("replay", run.run_id, "--speed", "max", "--db", str(path))
    assert "call failed  bob  auth: " in replayed and "vote  [b]ann -> A (80)" in replayed
    detail = json.loads(history("show", run.run_id, "--json", "--db", str(path)))
    assert detail["final_answer"] == "Use [bold]PostgreSQL[/bold]."
    assert detail["calls"] == run.result["calls"] == len(detail["call_records"])
    assert [event["type"] for event in detail["events"]][0] == "run_started"


@pytest.mark.parametrize("protocol", DEMO_RUNS)
def test_show_json_is_the_stored_run(runs: tuple[Path, dict[str, StoredRun]], protocol: str) -> None:
    path, made = runs
    run = made[protocol]
    detail = json.loads(history("show", run.run_id[:6], "--json", "--db", str(path)))
    assert (detail["run_id"], detail["protocol"], detail["status"]) == (run.run_id, protocol, "finished")
    assert detail["final_answer"] == run.result["final_answer"]
    assert detail["calls"] == run.result["calls"] == len(detail["call_records"])
    assert detail["events"][-1]["type"] == "run_finished"


@pytest.mark.parametrize("protocol", DEMO_RUNS)
def test_list_filters_by_protocol(runs: tuple[Path, dict[str, StoredRun]], protocol: str) -> None:
    path, made = runs
    listed = json.loads(history("list", "--protocol", protocol, "--json", "--db", str(path)))
    assert {row["run_id"]: row["calls"] for row in listed} == {
        run.run_id: run.result["calls"] for run in made.values() if run.protocol == protocol
    }
    assert {row["protocol"] for row in listed} == {protocol}


@pytest.mark.parametrize("protocol", [*DEMO_RUNS, "fake"])
def test_show_draws_every_protocol_from_the_stored_payloads_without_their_event_models(
    runs: tuple[Path, dict[str, StoredRun]], protocol: str
) -> None:
    """No fallback hides here: the live view fed the payloads as they are must give what it drew
    from the events while the run went."""
    from panel_cli.store.reader import TranscriptReader
    from panel_cli.view.live import LiveView
    from panel_cli.view.stored import Stored

    path, made = runs
    run = made[protocol]
    with TranscriptReader.open(path) as reader:
        payloads = [Stored(payload) for payload in reader.run_events(run.run_id)]
    drawn = StringIO()
    view = LiveView(quiet_console(drawn), animate=False, header=False)
    for payload in payloads:
        view.draw(payload)  # type: ignore[arg-type]
    view.close()
    assert drawn.getvalue() == run.drawn
