"""One ledger per run: every call a run starts has one row with its final status, and every
surface that reports a run's calls, tokens and cost (`--json`, the summary line, `history
show`, `history list`, `history stats`, batch's JSONL, eval's table) says the same of it."""

from __future__ import annotations

import asyncio
import io
import json
import os
import sqlite3
import threading
from importlib.resources import files
from pathlib import Path

import pytest
import yaml

from panel_cli.config import load_panel
from panel_cli.events import BaseEvent, EventBus
from panel_cli.llm.gateway import Gateway
from panel_cli.protocols.base import engine_of
from panel_cli.protocols.registry import names
from panel_cli.runs.execute import run_engine
from panel_cli.store.subscriber import TranscriptStore
from panel_cli.totals import RunTotals
from panel_cli.view import fmt
from panel_cli.view.fmt import calls_count
from panel_cli.view.plain import PlainView
from panel_cli.wording import plural
from tests.fakes.openai_server import FakeOpenAIServer, after, error, hang, reply
from tests.helpers import cli, cli_json, cli_ok, eventually, interrupted_run, write_panel


def call_rows(db: Path) -> list[tuple[str, str | None, int | None, int | None]]:
    """Each stored call: its member, how it ended and its tokens."""
    with sqlite3.connect(db) as connection:
        rows = connection.execute("SELECT member, error_kind, tokens_in, tokens_out FROM calls ORDER BY member")
        return list(rows)


def test_a_race_keeps_a_row_for_every_call_it_started(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    """The winner answers once the server holds all four requests; the others never answer and
    are cancelled. Every request the server received is a call row with its final status, and
    `--json`, the store and `history show` agree."""
    fake_server.script("a", after(lambda: len(fake_server.requests) >= 4, reply("first", prompt_tokens=10)))
    for name in ("b", "c", "d"):
        fake_server.script(name, hang())
    panel = write_panel(tmp_path / "race.yaml", fake_server, ["a", "b", "c", "d"], "protocol: ensemble")
    db = Path(os.environ["PANEL_DB"])

    result = cli_json("ensemble", str(panel), "--mode", "race", "-q", "Which database?")

    assert len(fake_server.requests) == 4
    assert result["calls"] == len(fake_server.requests)
    assert result["calls_by_status"] == {
        "answered": 1,
        "reused": 0,
        "late": 0,
        "failed": 0,
        "cancelled": 3,
        "refused": 0,
    }
    assert result["tokens"] == 30, "the winner's 10 + 20; a cancelled call reported nothing"
    assert (result["cost"], result["cost_basis"], result["unpriced_models"]) == (None, "unknown", ["openai/a"])
    assert call_rows(db) == [
        ("a", None, 10, 20),
        ("b", "cancelled", None, None),
        ("c", "cancelled", None, None),
        ("d", "cancelled", None, None),
    ]
    (listed,) = cli_json("history", "list")
    assert listed["calls_by_status"] == result["calls_by_status"]
    shown = cli_ok("history", "show", result["run_id"])
    assert "waiting" not in shown
    assert "4 calls (3 cancelled) · 30 tokens" in shown
    assert "first to answer" in result["reason"] and "3 others were cancelled" in result["reason"]


def test_a_race_whose_members_all_answer_at_once_has_one_winner(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    """Every member answers in the same instant: one call wins the race and is answered; each
    other reply that came in is late (counted, its tokens too) and the rest are cancelled."""
    fake_server.default(after(lambda: len(fake_server.requests) >= 3, reply("same")))
    panel = write_panel(tmp_path / "race.yaml", fake_server, ["a", "b", "c"], "protocol: ensemble")

    result = cli_json("ensemble", str(panel), "--mode", "race", "-q", "Which database?")

    by_status = result["calls_by_status"]
    assert result["calls"] == len(fake_server.requests) == 3
    assert by_status["answered"] == 1 and by_status["late"] + by_status["cancelled"] == 2
    assert result["tokens"] == 30 * (1 + by_status["late"])
    assert ("late" in result["reason"]) == (by_status["late"] > 0)
    assert ("cancelled" in result["reason"]) == (by_status["cancelled"] > 0)


def test_a_wrong_key_at_a_proxy_names_the_member_endpoint_and_key_variable(
    fake_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    fake_server.script("a", error(400, "No connected db"))
    panel = write_panel(
        tmp_path / "proxy.yaml",
        fake_server,
        ["a"],
        "protocol: ensemble",
        member_lines="    api_key_env: PROXY_KEY\n",
    )
    outcome = cli(
        "ensemble", str(panel), "-q", "Which database?", env={"PROXY_KEY": "fake-proxy-secret-123456", "NO_COLOR": "1"}
    )
    said = outcome.output
    assert outcome.exit_code != 0
    assert "No connected db" in said
    port = fake_server.url.split(":")[2].split("/")[0]
    assert f"No connected db (a called 127.0.0.1:{port} with the key in PROXY_KEY)" in said
    assert "fake-proxy-secret-123456" not in said
    stored = json.dumps(call_rows(Path(os.environ["PANEL_DB"])))
    assert "fake-proxy-secret" not in stored


def test_a_reused_call_keeps_its_tokens_and_its_unknown_cost(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    """A run of models with no price is interrupted with one answer in; its resume reuses that
    call: it keeps its tokens, its cost stays unknown (never $0), it is marked `reused` in
    JSON, the progress line, `history show` and the exports, and the resumed run says what it
    spent anew beside its total."""
    fake_server.script("a", reply("a says PostgreSQL", prompt_tokens=11, completion_tokens=22))
    fake_server.script("b", hang(), reply("b says SQLite", prompt_tokens=5, completion_tokens=6))
    panel = write_panel(tmp_path / "fanout.yaml", fake_server, ["a", "b"], "protocol: ensemble", "mode: fanout")
    db = Path(os.environ["PANEL_DB"])
    old_id = asyncio.run(
        interrupted_run(
            panel, db, lambda done: done >= 1 and len(fake_server.requests) >= 2, question="Which database?"
        )
    )

    outcome = cli("resume", old_id)
    assert outcome.exit_code == 0, outcome.output
    assert "call finished  a  0.00s  33 tok  reused" in outcome.stderr
    new_id = outcome.stderr.split("run started", 1)[1].split("\n", 1)[0].rsplit(" ", 1)[1]
    result = cli_json("history", "show", new_id)

    assert len(fake_server.requests) == 3, "a's call is not asked again"
    assert result["calls_by_status"] == {
        "answered": 1,
        "reused": 1,
        "late": 0,
        "failed": 0,
        "cancelled": 0,
        "refused": 0,
    }
    assert (result["calls"], result["tokens"]) == (2, 33 + 11)
    assert result["spent_anew"] == {"calls": 1, "tokens": 11, "cost": None}
    assert (result["cost"], result["cost_basis"]) == (None, "unknown")
    assert result["unpriced_models"] == ["openai/a", "openai/b"]
    stored = result["result"]
    ledger = ("calls", "tokens", "cost", "cost_basis", "unpriced_models", "calls_by_status", "spent_anew")
    assert {key: stored[key] for key in ledger} == {key: result[key] for key in ledger}, "as the run said it"

    listed = cli_ok("history", "list")
    shown = cli_ok("history", "show", new_id)
    markdown = cli_ok("history", "export", new_id, "--format", "md")
    transcript = json.loads(cli_ok("history", "export", new_id, "--format", "json"))
    for text in (listed, shown, markdown):
        assert "$0.0000" not in text, "an unknown price is never $0"
    assert "2 calls (1 reused) · 44 tokens · —" in shown
    assert "reused (paid by the run resumed)" in shown and "reused (paid by the run resumed)" in markdown
    assert "spent anew 1 call · 11 tokens · —" in shown
    reused = [call for call in transcript["call_records"] if call["reused"]]
    assert [(call["member"], call["tokens_in"], call["tokens_out"], call["cost"]) for call in reused] == [
        ("a", 11, 22, None)
    ]


# -- one ledger on every surface, for every protocol -----------------------------------------

LEDGER = ("calls", "tokens", "cost", "cost_basis")
QUESTION = "Which database should a five-person startup build on?"
EVAL_PROTOCOLS = ("confer", "council", "vote")


def priced_panel(protocol: str, server: FakeOpenAIServer, folder: Path, stop: str | None = None) -> Path:
    """The protocol's starter demo panel with its first member moved onto the fake server as a
    model litellm has a price for, so the run spends real tokens at a known price beside the
    simulated personas (the server's plain `ok` is a poor ballot, which is fine: the ledger
    counts calls however they end); with `stop`, under that stopping rule."""
    data = yaml.safe_load(files("panel_cli").joinpath(f"starters/{protocol}.demo.yaml").read_text(encoding="utf-8"))
    data["members"][0] = {**data["members"][0], "model": "openai/gpt-4o-mini", "api_base": server.url}
    data.pop("question", None)
    if stop is not None:
        data |= {"stop": stop, "method": "plurality"} if protocol == "vote" else {"stop": stop}
    path = folder / f"{protocol}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def ledger_of(found: dict) -> tuple:
    return tuple(
        pytest.approx(found[key]) if key == "cost" and found[key] is not None else found[key] for key in LEDGER
    )


def cost_text(envelope: dict) -> str:
    return fmt.basis_cost(envelope["cost"], envelope["cost_basis"], envelope["unpriced_models"])


@pytest.mark.parametrize(
    ("protocol", "stop"), [*((protocol, None) for protocol in names()), ("vote", "decided"), ("confer", "decided")]
)
def test_every_surface_tells_one_ledger(
    protocol: str, stop: str | None, fake_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """One run, told by the summary line, its envelope (what `--json` prints, as stored), the
    store's row (`history show --json`), `history show`, `history list` and `history stats`;
    then a batch's JSONL line and an eval's items, each against the run it names. A run that
    stopped asking early (`stop:`) counts only the calls it made, everywhere."""
    panel = priced_panel(protocol, fake_server, tmp_path, stop)
    db = tmp_path / "runs.db"
    outcome = cli(protocol, str(panel), "-q", QUESTION, "--db", str(db))
    assert outcome.exit_code in (0, 1), outcome.output
    summary = next(line for line in outcome.stderr.splitlines() if line.startswith("run finished"))
    run_id = summary.rsplit("run ", 1)[1]

    stored = cli_json("history", "show", run_id, "--db", str(db))
    envelope = stored["result"]  # the object `--json` printed: the run's payload as it ended
    assert envelope["calls"] > 0 and len(fake_server.requests) > 0
    assert envelope["cost_basis"] == "known" and envelope["cost"] > 0, "gpt-4o-mini has a price, demo calls cost 0"
    by_status = envelope["calls_by_status"]
    assert envelope["calls"] == sum(count for status, count in by_status.items() if status != "refused")
    assert ledger_of(stored) == ledger_of(envelope)
    assert stored["calls_by_status"] == by_status
    assert len(stored["call_records"]) == envelope["calls"] + by_status["refused"]
    if stop is not None:
        members = len(yaml.safe_load(panel.read_text())["members"])
        asked = {record["member"] for record in stored["call_records"]}
        saved = {name for stage in envelope["stopping"]["stages"] for name in stage["not_asked"]}
        assert protocol == "confer" or (asked.isdisjoint(saved) and len(asked) + len(saved) == members)

    assert f"  calls {envelope['calls']}" in summary
    assert f"  tokens {fmt.tokens(envelope['tokens'])}  cost {cost_text(envelope)}  " in summary
    shown = cli_ok("history", "show", run_id, "--db", str(db))
    totals = f"{plural(envelope['calls'], 'call')} · {fmt.tokens(envelope['tokens'])} tokens · {cost_text(envelope)}"
    assert f"Totals    {totals}" in shown
    (listed,) = cli_json("history", "list", "--db", str(db))
    assert ledger_of(listed) == ledger_of(envelope)
    assert listed["calls_by_status"] == by_status
    stats = cli_json("history", "stats", "--db", str(db))
    assert ledger_of(stats["total"]) == ledger_of(envelope)
    assert cli_ok("history", "stats", "--db", str(db)).splitlines()[0].endswith(f"· cost {cost_text(envelope)}")

    (tmp_path / "questions.txt").write_text(QUESTION + "\n")
    results = tmp_path / "results.jsonl"
    batch = cli("batch", str(panel), "--questions", str(tmp_path / "questions.txt"), "-o", str(results))
    assert batch.exit_code in (0, 1), batch.output
    (line,) = [json.loads(text) for text in results.read_text().splitlines()]
    batch_run = cli_json("history", "show", line["run_id"])
    assert ledger_of(line) == ledger_of(batch_run) == ledger_of(batch_run["result"])

    if protocol in EVAL_PROTOCOLS:
        dataset = tmp_path / "one.jsonl"
        dataset.write_text(json.dumps({"question": QUESTION, "options": ["PostgreSQL", "SQLite"], "answer": "SQLite"}))
        graded = cli_json(
            "eval", "run", str(panel), "--dataset", str(dataset), "--protocols", protocol, "--db", str(db)
        )
        assert graded["items"], "every system's run"
        for item in graded["items"]:
            run = cli_json("history", "show", item["run_id"], "--db", str(db))
            assert ledger_of({**item, "cost_basis": run["cost_basis"]}) == ledger_of(run)


def test_a_run_mixing_priced_and_unpriced_models_costs_at_least_and_names_them(
    fake_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    panel = tmp_path / "mixed.yaml"
    panel.write_text(
        "name: mixed\nprotocol: ensemble\nmode: fanout\nmembers:\n"
        f"  - name: priced\n    model: openai/gpt-4o-mini\n    api_base: {fake_server.url}\n"
        f"  - name: house\n    model: openai/house-model\n    api_base: {fake_server.url}\n"
        "  - name: sage\n    model: demo/sage\n"
    )
    outcome = cli("ensemble", str(panel), "-q", QUESTION)
    assert outcome.exit_code == 0, outcome.output
    run_id = outcome.stderr.rsplit("run ", 1)[1].split()[0]
    envelope = cli_json("history", "show", run_id)["result"]

    assert (envelope["cost_basis"], envelope["unpriced_models"]) == ("partial", ["openai/house-model"])
    price = 10 * 0.15e-6 + 20 * 0.6e-6  # gpt-4o-mini's 10 tokens in and 20 out; the demo persona's cost 0
    assert envelope["cost"] == pytest.approx(price)
    said = f"cost at least {fmt.cost(price)} (no price: openai/house-model)"
    assert f"  {said}  " in outcome.stderr
    assert said.removeprefix("cost ") in cli_ok("history", "list")


def test_a_demo_run_reads_simulated_and_free_everywhere(tmp_path: Path) -> None:
    """In JSON a demo run costs 0.0, `simulated` (an unknown price is null, `unknown`); every
    text surface says `simulated, free` (a cell of `history list`, `free`), never `$0.0000`."""
    panel = str(files("panel_cli").joinpath("starters/ensemble.demo.yaml"))
    outcome = cli("ensemble", panel, "-q", QUESTION)
    assert outcome.exit_code == 0, outcome.output
    assert "  cost simulated, free  " in outcome.stderr
    run_id = outcome.stderr.rsplit("run ", 1)[1].split()[0]
    envelope = cli_json("history", "show", run_id)["result"]
    assert (envelope["cost"], envelope["cost_basis"]) == (0.0, "simulated")

    (tmp_path / "questions.txt").write_text(QUESTION + "\n")
    results = tmp_path / "results.jsonl"
    batch = cli("batch", panel, "--questions", str(tmp_path / "questions.txt"), "-o", str(results))
    assert batch.exit_code == 0, batch.output
    assert "simulated, free" in batch.stderr
    (line,) = [json.loads(text) for text in results.read_text().splitlines()]
    assert (line["cost"], line["cost_basis"]) == (0.0, "simulated")

    stats = cli_ok("history", "stats")
    listed = cli_ok("history", "list")  # a table of runs: its cost cell reads `free`, not 16 columns
    assert listed.splitlines()[1].split()[-1] == "free" and "$0.0000" not in listed
    texts = {
        "show": cli_ok("history", "show", run_id),
        "stats": stats,
        "markdown": cli_ok("history", "export", run_id, "--format", "md"),
        "html": cli_ok("history", "export", run_id, "--format", "html", "-o", "-"),
    }
    for surface, text in texts.items():
        assert "simulated, free" in text and "$0.0000" not in text, surface
    by_protocol = stats.split("By protocol", 1)[1].split("By month", 1)[0]
    assert "ensemble" in by_protocol and "simulated, free" in by_protocol


def test_an_eval_whose_runs_called_an_unpriced_model_costs_at_least_and_names_it(
    fake_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """A system whose runs mix a priced model with one of no price reads `at least $X (no price:
    …)` in the eval's table, its Markdown and its JSON (`cost_basis`, `unpriced_models`), and
    again when the eval is read back from the store."""
    panel = tmp_path / "mixed.yaml"
    panel.write_text(
        "name: mixed\nprotocol: vote\nmembers:\n"
        f"  - name: priced\n    model: openai/gpt-4o-mini\n    api_base: {fake_server.url}\n"
        f"  - name: house\n    model: openai/house-model\n    api_base: {fake_server.url}\n"
        "  - name: sage\n    model: demo/sage\n"
    )
    dataset = tmp_path / "one.jsonl"
    dataset.write_text(json.dumps({"question": QUESTION, "options": ["PostgreSQL", "SQLite"], "answer": "SQLite"}))
    db = tmp_path / "runs.db"
    run = ("eval", "run", str(panel), "--dataset", str(dataset), "--protocols", "vote", "--db", str(db))

    graded = cli_json(*run)

    (vote,) = [score for score in graded["systems"] if score["system"] == "vote"]
    (item,) = [item for item in graded["items"] if item["system"] == "vote"]
    stored = cli_json("history", "show", item["run_id"], "--db", str(db))
    assert (vote["cost_basis"], vote["unpriced_models"]) == ("partial", ["openai/house-model"])
    assert item["unpriced_models"] == stored["unpriced_models"] == ["openai/house-model"]
    assert vote["cost"] == pytest.approx(stored["cost"]) and vote["cost"] > 0
    said = f"at least {fmt.cost(vote['cost'])} (no price: openai/house-model)"
    assert said in cli_ok(*run[:-2], "--db", str(tmp_path / "again.db"))
    shown = cli_ok("eval", "show", graded["eval_id"], "--db", str(db))
    assert said in shown
    again = cli_json("eval", "show", graded["eval_id"], "--db", str(db))
    (kept,) = [score for score in again["systems"] if score["system"] == "vote"]
    assert (kept["cost_basis"], kept["unpriced_models"]) == ("partial", ["openai/house-model"])


class HoldTheWinner:
    """Holds the race's winning event (a's `call_finished`) until b's reply is in: a's call has
    not returned, so the race cannot cancel b yet, and b's reply, released by the fake server
    once a's event was seen, comes in after the race was won. Every wait is on an event."""

    def __init__(self) -> None:
        self.won = threading.Event()
        self.late: BaseEvent | None = None

    async def __call__(self, event: BaseEvent) -> None:
        if event.type != "call_finished":
            return
        if getattr(event, "member", None) == "b":
            self.late = event
            return
        self.won.set()
        await eventually(lambda: self.late is not None, "the late reply")


async def race_with_a_late_reply(panel_file: Path, db: Path, holder: HoldTheWinner, plain: io.StringIO) -> RunTotals:
    """Run the race in-process, its events to the store, the holder and the plain progress view."""
    panel = load_panel(panel_file)
    store = await TranscriptStore.open(db)
    totals = RunTotals()
    bus = EventBus("ledger0race0late", [store, totals, PlainView(plain), holder])
    gateway = Gateway(bus.emit, defaults=panel.defaults)
    try:
        await run_engine(engine_of(panel.protocol), panel, "Which database?", gateway, bus)
    finally:
        await gateway.aclose()
        await store.close()
    return totals


def test_a_racer_answering_after_the_race_was_won_is_late(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    """a wins; b's reply is released only once a's answer was seen, so it comes in after the
    race was decided. b's call is `late`: its tokens count, its text is kept in the store, the
    race does not use it; every surface says so."""
    holder = HoldTheWinner()
    fake_server.script("a", after(lambda: len(fake_server.requests) >= 2, reply("first", prompt_tokens=10)))
    fake_server.script("b", after(holder.won.is_set, reply("second", prompt_tokens=5)))
    panel = write_panel(tmp_path / "race.yaml", fake_server, ["a", "b"], "protocol: ensemble\nmode: race")
    db = tmp_path / "runs.db"
    plain = io.StringIO()

    totals = asyncio.run(race_with_a_late_reply(panel, db, holder, plain))

    assert holder.late is not None and holder.late.late is True
    assert (totals.calls, totals.answered, totals.late, totals.cancelled) == (2, 1, 1, 0)
    assert totals.tokens == 30 + 25, "the late reply was paid for: its tokens count"
    assert calls_count(totals.calls, totals.by_status()) == "2 (1 late)"
    assert "call finished  b" in plain.getvalue() and "late (not used)" in plain.getvalue()
    (run_id,) = [run["run_id"] for run in cli_json("history", "list", "--db", str(db))]
    stored = cli_json("history", "show", run_id, "--db", str(db))
    envelope = stored["result"]
    wanted = {"answered": 1, "reused": 0, "late": 1, "failed": 0, "cancelled": 0, "refused": 0}
    assert envelope["calls_by_status"] == stored["calls_by_status"] == wanted
    (listed,) = cli_json("history", "list", "--db", str(db))
    assert listed["calls_by_status"] == wanted
    assert (envelope["calls"], envelope["tokens"]) == (stored["calls"], stored["tokens"]) == (2, 55)
    assert envelope["final_answer"] == "first" and envelope["chosen"] == "a"
    assert "1 other was late" in envelope["reason"]
    late = [call for call in stored["call_records"] if call["late"]]
    assert [(call["member"], call["response"], call["tokens_in"]) for call in late] == [("b", "second", 5)]
    b = next(response for response in envelope["responses"] if response["name"] == "b")
    assert (b["success"], b["text"], b["error_kind"]) == (False, None, "late")

    shown = cli_ok("history", "show", run_id, "--db", str(db))
    assert fmt.LATE_NOTE in shown and "2 calls (1 late) · 55 tokens" in shown
    assert fmt.LATE_NOTE in cli_ok("history", "export", run_id, "--format", "md", "--db", str(db))
    assert cli_ok("history", "stats", "--db", str(db)).splitlines()[0].split("· ")[1].strip() == "2 calls (1 late)"
    assert cli_json("history", "stats", "--db", str(db))["total"]["late"] == 1
