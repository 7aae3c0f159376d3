"""How big the transcript store is, and how fast `panel history` reads a large one.

Run by hand (never part of the tests), from the repository root, in the project's venv:

    python bench/history.py --part size                        # (a), under a minute
    python bench/history.py --part speed --cache ~/.cache/panel-bench --reps 7
    python bench/history.py --part speed --large 0              # (b) on 1,000 runs only

Figures:
  (a) bytes per run, before and after. Runs are made by the real engines: thirty 3-member
      demo confer runs (the demo provider, a different question each) and one 64-member
      confer run (answer + 2 vote rounds) against the fake OpenAI server, whose replies are
      ~1,200-character answers, and votes carrying a revised answer of the same size. Each
      is written by today's store ("after"); "before" is the same runs written in the
      layout of schema version 3 (every text inline, as panel wrote until then), rebuilt
      from what the reader returns, which is exactly what that writer stored. Bytes per run:
      (file size - empty file size) / runs, each file checkpointed and VACUUMed. Divided by
      the bytes of distinct text in the run, two ways: distinct strings (every string of
      its events and calls, prompts included, each once: the issue's measure; a vote prompt
      that differs from another only in the line naming the voter's own answer counts
      whole) and distinct lines (every line of those strings once: the text a run really
      holds, however often it is quoted). Target: after / distinct text <= 1.5.
  (b) `panel history` against floors that are no panel code, on a file of --runs realistic
      runs and on one of --large (the same runs, more of them): CPU (user + sys of the child,
      os.wait4), median of --reps runs of each, interleaved, side by side.
        - `history list`, `history list --search WORD` and `history show PREFIX` (the newest
          run of each protocol), each divided by its floor: the same job done by a Typer + Rich
          + sqlite3 CLI with no panel code and no pydantic (`HISTORY_FLOOR`, written to the
          bench's folder), reading the same rows of the same file with the same queries and
          drawing them as Rich tables (the answer as Rich Markdown when panel draws it as
          Markdown). Targets: list <= 1.3, show <= 1.6.
        - `history list --help` divided by a minimal two-command Typer app's `hello --help`, no
          completion options
          (`TYPER_FLOOR`, bench/floors.py). Target <= 1.3.
        - growth: each command's CPU on the --large file divided by the same on the --runs
          one. Target <= 1.2 for list, search and show.
      The runs are made fast: one run of each protocol (confer, council, vote, decide, delphi,
      supervise, orchestrate, ensemble) is recorded from the real engine and demo provider,
      then each run replays one of them through the store's writer with its question replaced
      everywhere by a new one (so every run's texts are its own) and its own ids and times.
      --cache DIR keeps the built files (100,000 runs take a quarter of an hour to build).
      The commands run as an installed panel does, with bytecode (cached in the bench's
      temporary folder). The load average is printed before and after: CPU time is what is
      compared, but a loaded machine slows every process's caches alike, so compare figures
      printed by one run. Then `python -X importtime` of list and of a show: the modules each
      imports beyond `--help`'s, the costliest first.
"""

from __future__ import annotations

import os

# Before anything imports litellm: offline, local price table, instant demo provider.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["LITELLM_OFFLINE_MODE"] = "True"
os.environ["PANEL_DEMO_DELAY"] = "0"

import argparse
import asyncio
import hashlib
import json
import random
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from floors import TYPER_FLOOR  # noqa: E402  (beside this script)

DEMO_RUNS = 30
DEMO_MEMBERS = ("sage", "skeptic", "pragmatist")
BIG_PANEL = 64
PROSE = [
    "the",
    "a",
    "system",
    "data",
    "team",
    "cost",
    "latency",
    "risk",
    "plan",
    "storage",
    "index",
    "query",
    "user",
    "service",
    "schema",
    "migration",
    "rollback",
    "pilot",
    "measure",
    "owner",
    "replica",
    "shard",
    "cache",
    "audit",
    "trail",
    "budget",
    "quarter",
    "review",
    "design",
    "option",
    "choice",
    "region",
    "failover",
]
PROTOCOL_FILES = {
    "confer": "demo.yaml",
    "council": "council.yaml",
    "vote": "vote.yaml",
    "decide": "decide.yaml",
    "delphi": "delphi.yaml",
    "supervise": "supervise.yaml",
    "orchestrate": "orchestrate.yaml",
    "ensemble": "ensemble.yaml",
}


# -- the floor: the same reads by a minimal Typer app --------------------------------------

HISTORY_FLOOR = '''\
"""What `panel history list` and `show` do, at the least: a Typer CLI that prints with Rich and
reads with sqlite3 the same rows of the same file, with the same queries; no panel code and no
pydantic."""
import json
import sqlite3
from typing import Any

import typer
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

app = typer.Typer(add_completion=False)
SEARCH = "SELECT rowid FROM text_search WHERE text_search MATCH ?"


def connect(db: str) -> sqlite3.Connection:
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    connection.row_factory = sqlite3.Row
    return connection


def texts(connection: sqlite3.Connection, ids: list[Any]) -> dict[int, str]:
    wanted = json.dumps(sorted({text_id for text_id in ids if text_id is not None}))
    rows = connection.execute("SELECT id, body FROM texts WHERE id IN (SELECT value FROM json_each(?))", (wanted,))
    return {row["id"]: row["body"] or "" for row in rows}


@app.command("list")
def list_runs(
    db: str = typer.Option(...),
    limit: int = typer.Option(20, "--limit", "-n", min=1),
    protocol: str | None = typer.Option(None, "--protocol", "-p"),
    status: str | None = typer.Option(None, "--status"),
    search: str | None = typer.Option(None, "--search", "-s"),
    since: str | None = typer.Option(None, "--since"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    connection = connect(db)
    where, params = "", []
    if search:
        query = " ".join(f'"{word}"' for word in search.split())
        where = f"WHERE (r.question_text IN ({SEARCH}) OR r.final_answer_text IN ({SEARCH}))"
        params += [query, query]
    rows = connection.execute(
        "SELECT r.*, q.body AS question FROM runs r LEFT JOIN texts q ON q.id = r.question_text"
        f" {where} ORDER BY r.started_at DESC, r.id LIMIT ?",
        (*params, limit),
    ).fetchall()
    table = Table("id", "started", "protocol", "panel", "question", "status", "outcome", "calls", "cost")
    for row in rows:
        table.add_row(
            row["id"][:8], row["started_at"][:16], row["protocol"], row["panel"], Text(row["question"][:60]),
            row["status"], Text((row["outcome"] or "")[:40]), str(row["calls"]), f"{row['cost'] or 0:.4f}",
        )
    Console().print(table)


@app.command()
def show(run_id: str, db: str = typer.Option(...), markdown: bool = typer.Option(False, "--markdown")) -> None:
    connection = connect(db)
    run = connection.execute("SELECT * FROM runs WHERE id >= ? AND id < ? LIMIT 1", (run_id, run_id + "~")).fetchone()
    events = connection.execute("SELECT * FROM events WHERE run_id = ? ORDER BY seq", (run["id"],)).fetchall()
    calls = connection.execute("SELECT * FROM calls WHERE run_id = ? ORDER BY ts, seq", (run["id"],)).fetchall()
    body = texts(connection, [run["question_text"], run["final_answer_text"], *(call["response_text"] for call in calls)])
    console = Console()
    header = Table.grid(padding=(0, 2))
    header.add_row("Run", run["id"])
    header.add_row("Question", Text(body[run["question_text"]]))
    header.add_row("Status", run["status"])
    console.print(header)
    stages: dict[tuple[Any, Any], Table] = {}
    for row in events:
        payload = json.loads(row["payload_json"] or "{}")
        if row["type"] == "stage_started":
            key = (payload.get("stage"), payload.get("round"))
            stages[key] = Table("member", "status", "latency", "tokens", "answer", title=str(key))
    for call in calls:
        key = (call["stage"], call["round"])
        table = stages.setdefault(key, Table("member", "status", "latency", "tokens", "answer", title=str(key)))
        answer = body.get(call["response_text"], "")
        table.add_row(
            call["member"], "answered" if answer else "failed", str(call["latency"]), str(call["tokens_out"]),
            Text(" ".join(answer.split())[:60]),
        )
    for table in stages.values():
        console.print(table)
    answer = body.get(run["final_answer_text"], "")
    if markdown:
        from rich.markdown import Markdown

        console.print(Panel(Markdown(answer), title="answer"))
    else:
        console.print(Panel(Text(answer), title="answer"))
    for call in calls:
        console.print(Text(f"{call['stage']} · {call['member']}", style="bold"))
        console.print(Text(body.get(call["response_text"], "")))
    table = Table("member", "stage", "round", "latency", "tokens", "cost", title="Calls")
    for call in calls:
        table.add_row(*(str(call[key]) for key in ("member", "stage", "round", "latency", "tokens_in", "cost")))
    console.print(table)


if __name__ == "__main__":
    app()
'''

# A word in every run's question (the most rows a search can match) and words of one old run's.
SEARCHES = {"search, every run": "team", "search, one old run": "team 7"}


# -- runs made by the real engines --------------------------------------------------------


def prose(seed: object, length: int) -> str:
    rng = random.Random(str(seed))
    words: list[str] = []
    while sum(len(word) + 1 for word in words) < length:
        words.append(rng.choice(PROSE))
    text = " ".join(words)
    return "\n\n".join(text[i : i + 400] for i in range(0, len(text), 400))


def fake_reply(request: Any) -> str:
    """An answer, or a vote that keeps a revised answer of the same size."""
    content = str(request.messages[-1]["content"])
    if "[panel-task: confer.vote]" in content:
        labels = re.findall(r"^=== Answer (\w+) \[", content, re.MULTILINE)
        seed = int(hashlib.sha256(content.encode()).hexdigest(), 16)
        return json.dumps(
            {
                "chosen_label": labels[seed % len(labels)],
                "revised_answer": prose(seed, 1200),
                "confidence": 40 + seed % 60,
                "rationale": prose(seed + 1, 120),
            }
        )
    return prose(request.model + content[:80], 1200)


def engine_for(protocol: str) -> Any:
    from panel_cli.protocols.base import engine_of

    return engine_of(protocol)


async def run_panel(panel: Any, question: str, subscribers: list[Any]) -> None:
    from panel_cli.events import EventBus
    from panel_cli.llm.gateway import Gateway
    from panel_cli.runs.execute import run_engine

    bus = EventBus(os.urandom(6).hex(), subscribers)
    gateway = Gateway(bus.emit, defaults=panel.defaults, concurrency=panel.concurrency)
    try:
        await run_engine(engine_for(panel.protocol), panel, question, gateway, bus)
    finally:
        await gateway.aclose()


async def store_runs(path: Path, runs: list[tuple[Any, str]]) -> None:
    from panel_cli.store.subscriber import TranscriptStore

    for panel, question in runs:
        async with await TranscriptStore.open(path) as store:
            await run_panel(panel, question, [store])


def demo_confer_runs() -> list[tuple[Any, str]]:
    from panel_cli.config import Panel

    panel = Panel.model_validate(
        {
            "name": "demo",
            "protocol": "confer",
            "members": [{"name": name, "model": f"demo/{name}"} for name in DEMO_MEMBERS],
            "max_rounds": 3,
            "until_convergence": True,
        }
    )
    return [
        (panel, f"Should a five-person startup build its first product on PostgreSQL or MongoDB? (plan {i})")
        for i in range(DEMO_RUNS)
    ]


def big_confer_run(url: str) -> list[tuple[Any, str]]:
    from panel_cli.config import Panel

    panel = Panel.model_validate(
        {
            "name": "big",
            "protocol": "confer",
            "members": [{"name": f"m{i}", "model": f"openai/m{i}", "api_base": url} for i in range(BIG_PANEL)],
            "max_rounds": 2,
            "until_convergence": False,
            "defaults": {"retries": 0, "concurrency": BIG_PANEL},
        }
    )
    return [(panel, "How should we shard the audit log across regions, and what would make us change course?")]


# -- measuring ----------------------------------------------------------------------------


def settled_size(path: Path) -> int:
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.execute("VACUUM")
    db.close()
    return path.stat().st_size


def strings_in(value: Any, found: set[str]) -> None:
    if isinstance(value, str):
        found.add(value)
    elif isinstance(value, dict):
        for item in value.values():
            strings_in(item, found)
    elif isinstance(value, list):
        for item in value:
            strings_in(item, found)


def distinct_text(path: Path) -> tuple[float, float]:
    """Mean bytes per run of its distinct strings, and of its distinct lines."""
    from panel_cli.store.reader import TranscriptReader

    whole, lines = [], []
    with TranscriptReader.open(path) as reader:
        for run in reader.list_runs(limit=-1):
            found: set[str] = set()
            strings_in(reader.run_events(run.id), found)
            for call in reader.run_calls(run.id):
                strings_in(call.messages, found)
                strings_in(call.response, found)
            whole.append(sum(len(text.encode()) for text in found))
            distinct_lines = {line for text in found for line in text.split("\n")}
            lines.append(sum(len(line.encode()) + 1 for line in distinct_lines))
    return statistics.mean(whole), statistics.mean(lines)


def version_3_copy(path: Path, copy: Path) -> None:
    """The runs of `path` in the layout panel wrote until schema version 3: payloads whole
    (less `messages`, kept in the call row), every text inline, REAL times."""
    from panel_cli.store.migrations import MIGRATIONS
    from panel_cli.store.reader import TranscriptReader

    def dumped(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    db = sqlite3.connect(copy, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    for number, migration in enumerate(MIGRATIONS[:3], start=1):
        migration(db)
        db.execute(f"PRAGMA user_version = {number}")
    with TranscriptReader.open(path) as reader:
        for summary in reader.list_runs(limit=-1):
            run = reader.get_run(summary.id)
            db.execute("BEGIN")
            db.execute(
                "INSERT INTO runs (id, protocol, panel, question, config_json, status, started_at, finished_at, final_answer,"
                " result_json, error, calls, tokens, cost) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run.id,
                    run.protocol,
                    run.panel,
                    run.question,
                    dumped(run.config),
                    run.status,
                    run.started_at,
                    run.finished_at,
                    run.final_answer,
                    None if run.result is None else dumped(run.result),
                    run.error,
                    run.calls,
                    run.tokens,
                    run.cost,
                ),
            )
            for event in reader.run_events(run.id):
                db.execute(
                    "INSERT INTO events (run_id, seq, ts, type, payload_json) VALUES (?, ?, ?, ?, ?)",
                    (run.id, event["seq"], event["ts"], event["type"], dumped(event)),
                )
            for call in reader.run_calls(run.id):
                db.execute(
                    "INSERT INTO calls (id, run_id, member, model, stage, round, request_json, response, tokens_in, tokens_out,"
                    " cost, latency, error_kind, error, attempts, ts, detail, truncated)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        call.id,
                        call.run_id,
                        call.member,
                        call.model,
                        call.stage,
                        call.round,
                        dumped(call.messages),
                        call.response,
                        call.tokens_in,
                        call.tokens_out,
                        call.cost,
                        call.latency,
                        call.error_kind,
                        call.error,
                        call.attempts,
                        call.ts,
                        call.detail,
                        None if call.error_kind else int(call.truncated),
                    ),
                )
            db.execute("COMMIT")
    db.close()


def empty_size(folder: Path) -> tuple[int, int]:
    """The size of a file with no run: today's schema, and version 3's."""
    from panel_cli.store.connection import connect
    from panel_cli.store.migrations import MIGRATIONS

    empty, old_empty = folder / "empty.db", folder / "empty-v3.db"
    if not empty.exists():
        connect(empty).close()
        old = sqlite3.connect(old_empty, isolation_level=None)
        for migration in MIGRATIONS[:3]:
            migration(old)
        old.close()
    return settled_size(empty), settled_size(old_empty)


def measure_size(folder: Path, name: str, runs: list[tuple[Any, str]]) -> dict[str, Any]:
    path, before = folder / f"{name}.db", folder / f"{name}-v3.db"
    asyncio.run(store_runs(path, runs))
    version_3_copy(path, before)
    empty, empty_v3 = empty_size(folder)
    whole, lines = distinct_text(path)
    return {
        "name": name,
        "runs": len(runs),
        "before": (settled_size(before) - empty_v3) / len(runs),
        "after": (settled_size(path) - empty) / len(runs),
        "whole": whole,
        "lines": lines,
    }


def part_size(folder: Path) -> list[dict[str, Any]]:
    from tests.fakes.openai_server import FakeOpenAIServer, responder

    rows = [measure_size(folder, f"demo confer, {len(DEMO_MEMBERS)} members", demo_confer_runs())]
    with FakeOpenAIServer() as server:
        server.default(responder(fake_reply))
        rows.append(measure_size(folder, f"confer, {BIG_PANEL} members, fake server", big_confer_run(server.url)))
    return rows


def print_size(rows: list[dict[str, Any]]) -> None:
    print("(a) bytes per run, before (schema 3) and after; target after / distinct text <= 1.5")
    print(
        f"  {'run':<34} {'before':>11} {'after':>10} {'distinct strings':>17} {'distinct lines':>15}"
        f" {'before/str':>10} {'after/str':>9} {'after/lines':>11} {'after/before':>12}"
    )
    for row in rows:
        print(
            f"  {row['name']:<34} {row['before']:>11,.0f} {row['after']:>10,.0f} {row['whole']:>17,.0f} {row['lines']:>15,.0f}"
            f" {row['before'] / row['whole']:>10.2f} {row['after'] / row['whole']:>9.2f} {row['after'] / row['lines']:>11.2f}"
            f" {row['after'] / row['before']:>12.3f}"
        )


# -- a large file, fast -------------------------------------------------------------------


class Recorder:
    """Keeps every event a run emits, as the store receives it (messages included)."""

    def __init__(self) -> None:
        self.payloads: list[dict[str, Any]] = []

    async def __call__(self, event: Any) -> None:
        self.payloads.append(event.model_dump(mode="json"))


def record_templates() -> list[list[dict[str, Any]]]:
    """One real run of each protocol (demo provider)."""
    from panel_cli.config import load_panel

    templates = []
    for protocol, file in PROTOCOL_FILES.items():
        panel = load_panel(ROOT / "configs" / file).model_copy(update={"protocol": protocol})
        if protocol == "ensemble":
            panel = panel.model_copy(update={"mode": "majority"})
        recorder = Recorder()
        asyncio.run(run_panel(panel, panel.question or "What should we do?", [recorder]))
        templates.append(recorder.payloads)
    return templates


def replace_strings(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, dict):
        return {key: replace_strings(item, old, new) for key, item in value.items()}
    if isinstance(value, list):
        return [replace_strings(item, old, new) for item in value]
    return value


def build_large(path: Path, count: int, templates: list[list[dict[str, Any]]]) -> None:
    """`count` runs through the store's writer (one transaction per event, as a live run),
    each a template with its own question, ids and times, a day apart back from now."""
    from panel_cli.store.connection import connect
    from panel_cli.store.writer import RunWriter

    db = connect(path)
    db.execute("PRAGMA synchronous = OFF")  # only the bench's speed of building: the layout is the same
    writer = RunWriter(db, pid=None, host=None)
    rng = random.Random(7)
    start = time.time() - count * 600.0
    for number in range(count):
        template = templates[number % len(templates)]
        question = template[0]["question"]
        fresh = f"{question.rstrip('?')} for team {number} ({rng.choice(PROSE)} {rng.choice(PROSE)})?"
        run_id = hashlib.sha256(f"run {number}".encode()).hexdigest()[:12]
        shift = start + number * 600.0 - template[0]["ts"]
        for payload in template:
            payload = replace_strings(payload, question, fresh)
            payload["run_id"], payload["ts"] = run_id, payload["ts"] + shift
            if "call_id" in payload:
                payload["call_id"] = f"{run_id}-{payload['call_id']}"
            messages = payload.pop("messages", None)
            if payload["type"] == "run_finished":
                payload["result"]["run_id"] = run_id
            writer.write(payload, messages)
    db.close()


def panel_command() -> list[str]:
    script = Path(sys.executable).with_name("panel")
    return [str(script)] if script.exists() else [sys.executable, "-m", "panel_cli"]


def environment(folder: Path) -> dict[str, str]:
    """As an installed panel runs: with bytecode (cached in the bench's folder, not the tree),
    which a shell that sets PYTHONDONTWRITEBYTECODE would otherwise recompile every time."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPYCACHEPREFIX": str(folder / "pycache")}


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(CPU, wall) seconds of one child process."""
    started = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT, env=env)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {child.stderr.read().decode() if child.stderr else ''}")
    return usage.ru_utime + usage.ru_stime, wall


def large_file(folder: Path, count: int, templates: list[list[dict[str, Any]]]) -> Path:
    """A file of `count` runs, built unless the folder already has it (--cache)."""
    path = folder / f"runs-{count}.db"
    if not path.exists():
        building = path.with_suffix(".building")
        building.unlink(missing_ok=True)
        build_large(building, count, [[dict(payload) for payload in template] for template in templates])
        settled_size(building)
        building.rename(path)
    return path


def templates_in(folder: Path) -> list[list[dict[str, Any]]]:
    cached = folder / "templates.json"
    if cached.exists():
        return json.loads(cached.read_text())
    templates = record_templates()
    cached.write_text(json.dumps(templates))
    return templates


def newest_runs(path: Path) -> dict[str, tuple[str, bool]]:
    """protocol -> (the newest run's shortest id, whether its answer is drawn as Markdown)."""
    from panel_cli.store.reader import TranscriptReader
    from panel_cli.view.final import MARKDOWN_SYNTAX

    newest: dict[str, tuple[str, bool]] = {}
    with TranscriptReader.open(path) as reader:
        for run in reader.list_runs(limit=len(PROTOCOL_FILES)):
            answer = reader.get_run(run.id).final_answer or ""
            newest[run.protocol] = (reader.short_id(run.id), bool(MARKDOWN_SYNTAX.search(answer)))
    return newest


def commands_for(
    path: Path, label: str, panel: list[str], floor: Path, newest: dict[str, tuple[str, bool]]
) -> dict[str, tuple[list[str], list[str]]]:
    """name -> (panel's argv, the floor's argv) for one file."""
    db = ["--db", str(path)]
    python = [sys.executable, str(floor)]
    commands = {f"{label}: history list": ([*panel, "history", "list", *db], [*python, "list", *db])}
    for name, words in SEARCHES.items():
        commands[f"{label}: history list, {name}"] = (
            [*panel, "history", "list", "--search", words, *db],
            [*python, "list", "--search", words, *db],
        )
    for protocol, (prefix, markdown) in newest.items():
        commands[f"{label}: history show ({protocol}{', Markdown' if markdown else ''})"] = (
            [*panel, "history", "show", prefix, *db],
            [*python, "show", prefix, *db, *(["--markdown"] if markdown else [])],
        )
    return commands


def part_speed(folder: Path, counts: list[int], reps: int) -> dict[str, Any]:
    templates = templates_in(folder)
    started = time.perf_counter()
    files = {count: large_file(folder, count, templates) for count in counts}
    built = time.perf_counter() - started
    floor, typer_floor = folder / "history_floor.py", folder / "typer_floor.py"
    floor.write_text(HISTORY_FLOOR)
    typer_floor.write_text(TYPER_FLOOR)
    panel = panel_command()
    commands: dict[str, tuple[list[str], list[str]]] = {
        "history list --help": (
            [*panel, "history", "list", "--help"],
            [sys.executable, str(typer_floor), "hello", "--help"],
        )
    }
    newest = newest_runs(files[counts[0]])
    for count, path in files.items():
        commands.update(commands_for(path, f"{count:,} runs", panel, floor, newest))
    env = environment(folder)
    runs = [argv for pair in commands.values() for argv in pair]
    for argv in runs:
        timed(argv, env)  # warm the page cache and write the bytecode
    load_before = os.getloadavg()
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(reps):
        for name, (ours, theirs) in commands.items():
            samples[name].append((timed(ours, env)[0], timed(theirs, env)[0]))
    load_after = os.getloadavg()
    medians = {
        name: (statistics.median(ours for ours, _ in pairs), statistics.median(theirs for _, theirs in pairs))
        for name, pairs in samples.items()
    }
    show = next(name for name in commands if "history show" in name)
    imports = {
        name: import_costs(argv, env)
        for name, argv in (
            ("--help", [*panel, "--help"]),
            ("history list", commands[f"{counts[0]:,} runs: history list"][0]),
            (show.split(": ", 1)[1], commands[show][0]),
        )
    }
    return dict(
        counts=counts,
        sizes={count: path.stat().st_size for count, path in files.items()},
        built=built,
        medians=medians,
        imports=imports,
        reps=reps,
        load=(load_before, load_after),
    )


def import_costs(argv: list[str], env: dict[str, str]) -> dict[str, int]:
    """Cumulative microseconds of each top-level import of a command, from -X importtime."""
    program = argv[1:] if argv[0] == sys.executable else ["-m", "panel_cli", *argv[1:]]
    result = subprocess.run(
        [sys.executable, "-X", "importtime", *program], capture_output=True, text=True, cwd=ROOT, env=env
    )
    costs: dict[str, int] = {}
    for line in result.stderr.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if match and len(match.group(3)) <= 1:
            costs[match.group(4)] = int(match.group(2))
    return costs


def print_speed(result: dict[str, Any]) -> None:
    medians, imports, counts = result["medians"], result["imports"], result["counts"]
    before, after = result["load"]
    sizes = ", ".join(f"{count:,} runs {size / 1e6:.1f} MB" for count, size in result["sizes"].items())
    print(
        f"(b) {sizes}; built in {result['built']:.0f} s; median CPU of {result['reps']} runs each, interleaved;"
        f" load average {before[0]:.2f} before, {after[0]:.2f} after"
    )
    print("    targets: list / floor <= 1.3, show / floor <= 1.6, list --help / Typer floor <= 1.3, growth <= 1.2")
    growth_from = f"{counts[-1]:,} / {counts[0]:,}" if len(counts) > 1 else ""
    print(f"  {'command':<58} {'CPU s':>6} {'floor s':>7} {'/ floor':>7} {growth_from:>17}")
    for name, (ours, theirs) in medians.items():
        grown = ""
        if len(counts) > 1 and name.startswith(f"{counts[-1]:,} runs: "):
            small = medians.get(f"{counts[0]:,} runs: " + name.split(": ", 1)[1])
            grown = f"{ours / small[0]:.2f}" if small else ""
        print(f"  {name:<58} {ours:>6.3f} {theirs:>7.3f} {ours / theirs:>7.2f} {grown:>17}")
    for name, costs in imports.items():
        if name == "--help":
            continue
        extra = sorted(
            ((cost, module) for module, cost in costs.items() if module not in imports["--help"]), reverse=True
        )
        print(f"  `{name}` imports beyond `--help` (python -X importtime, top level, cumulative ms):")
        print("    " + ", ".join(f"{module} {cost / 1000:.1f}" for cost, module in extra[:10] if cost >= 500))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("size", "speed", "both"), default="both")
    parser.add_argument("--runs", type=int, default=1_000, help="runs in the smaller file (b)")
    parser.add_argument("--large", type=int, default=100_000, help="runs in the larger file (b); 0: none")
    parser.add_argument("--reps", type=int, default=7, help="timed runs of each command (b)")
    parser.add_argument("--cache", type=Path, help="keep the built files here, and use those already there (b)")
    args = parser.parse_args()
    import platform

    print(
        f"python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, {os.cpu_count()} cores, {platform.platform()}\n"
    )
    folder = Path(tempfile.mkdtemp(prefix="panel-bench-history-"))
    try:
        if args.part in ("size", "both"):
            print_size(part_size(folder))
        if args.part in ("speed", "both"):
            cache = args.cache or folder
            cache.mkdir(parents=True, exist_ok=True)
            counts = [args.runs, *([args.large] if args.large else [])]
            print_speed(part_speed(cache, counts, args.reps))
    finally:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
