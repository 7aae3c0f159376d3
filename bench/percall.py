"""Our own CPU per call: a 64-member confer with 1,200-character answers, less litellm making the same calls.

Run by hand (never part of the tests), from the repository root, in the project's venv:

    python bench/percall.py                 # 64 members, 3 measured runs of each, ~1-2 minutes
    python bench/percall.py --members 16 --reps 5
    python bench/percall.py --profile       # also where panel's own CPU goes (cProfile, one run of each)
    python bench/percall.py --samples       # also each run's CPU, in the order run
    python bench/percall.py --spacing 0.02  # streamed pieces 20 ms apart: 64 answers written side by side

Figure (issue 23): panel's CPU per call above the floor's. A child process runs
`panel confer FILE` through panel's own `main`, as a command line would: the store writing to
a new database, secrets redaction on (`OPENAI_API_KEY` is set), and either the live view on a
terminal (`FORCE_COLOR`, 160 x 50, drawn to /dev/null; answers streamed, as on a terminal) or
piped (the plain view's progress lines, nothing streamed); 64 members, `max_rounds: 2`, `until_convergence:
false` (an answer stage and two vote rounds: 192 calls), against the fake server
(tests/fakes/openai_server.py, in a child process of its own) answering after 50 ms with
~1,200-character answers, and votes carrying a revised answer of the same size. One run warms
the process up (imports, the first calls, connections); each of --reps runs after it is timed
in CPU (time.process_time: every thread of the process, the store's and litellm's included).
The floors: another child makes the same 192 calls with `litellm.acompletion` and nothing
else (the answers streamed, as panel streams them on a terminal, then two rounds whose
prompts quote every answer, as confer's vote prompts do), warmed up and timed the same way,
with litellm in either set-up of bench/floors.py:
  - as panel sets it up (panel's `load_litellm`, each call in the gateway's quiet-call
    context: litellm skips its per-call cost calculation and success logging, as for panel's
    calls). Our CPU per call is (panel's CPU - this floor's) / calls, from the medians: the
    figure. Target <= 1 ms.
  - out of the box (`import litellm` alone: its bookkeeping on every call), the second line.
The three children alternate.

--profile adds one panel run of each kind (on a terminal, piped) under cProfile, every thread
profiled in its own CPU time (the live view's refresh thread, litellm's executor threads), and
lists the functions outside litellm (and the libraries under it: httpx, aiohttp, openai) by their
own time, with their share of panel's own CPU; then the split: drawing the live view (panel's
view/ and Rich, on whichever thread), the streamed text (reading the stream, scrubbing each text
so far, handing it to the view), and the rest.
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["LITELLM_OFFLINE_MODE"] = "True"

import argparse
import asyncio
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
for path in (BENCH, ROOT):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from child_server import ChildServer  # noqa: E402  (beside this script)
from floors import FLOOR_NAMES, OUT_OF_THE_BOX, PANEL_SETUP, VOTE_MARKER, bare_confer, litellm_floor  # noqa: E402

LATENCY = 0.05
STAGES = 3  # the answer stage and two vote rounds
ANSWER_CHARS = 1200
KEY = "fake-key-for-the-bench"
QUESTION = "Which storage engine should the audit trail use, and why?"
WORDS = ("the", "a", "system", "data", "team", "cost", "latency", "risk", "plan", "storage", "index", "query", "user")
# The libraries under litellm: their time is the floor's too, never ours.
THEIRS = ("litellm", "httpx", "httpcore", "aiohttp", "openai", "tiktoken", "tokenizers", "yarl", "multidict")


def prose(seed: object, length: int) -> str:
    rng = random.Random(str(seed))
    words: list[str] = []
    while sum(len(word) + 1 for word in words) < length:
        words.append(rng.choice(WORDS))
    return " ".join(words)


def reply(request: Any) -> str:
    content = str(request.messages[-1]["content"]) if request.messages else ""
    if VOTE_MARKER in content:
        vote = {"chosen_label": "A", "revised_answer": prose(content[-80:], ANSWER_CHARS), "confidence": 70}
        return json.dumps({**vote, "rationale": prose(request.model, 120)})
    return prose(request.model, ANSWER_CHARS)


def serve(latency: float, spacing: float) -> None:
    """Child process: serve until stdin closes, printing the URL first. A streamed answer's
    pieces (8 characters each) come `spacing` seconds apart."""
    from tests.fakes.openai_server import FakeOpenAIServer, responder

    server = FakeOpenAIServer().start()
    server.default(responder(reply, latency=latency, spacing=spacing))
    print(server.url, flush=True)
    sys.stdin.read()
    server.stop()


# -- the two children -------------------------------------------------------------------------


def panel_child(url: str, members: int, reps: int, profile: bool, piped: bool) -> None:
    """Child process: warm up, then `reps` timed runs of `panel confer`; prints their CPU.
    On a terminal (the live view, answers streamed), or piped (the plain lines, no stream)."""
    os.environ.update({"OPENAI_API_KEY": KEY, "COLUMNS": "160", "LINES": "50"})
    if not piped:
        os.environ["FORCE_COLOR"] = "1"
    out = sys.stdout
    folder = Path(tempfile.mkdtemp(prefix="panel-bench-percall-"))
    panel_file = folder / "panel.yaml"
    lines = "".join(f"  - {{name: m{i}, model: openai/m{i}, api_base: '{url}'}}\n" for i in range(members))
    panel_file.write_text(
        f"name: bench\nprotocol: confer\nquestion: {QUESTION}\nmax_rounds: {STAGES - 1}\n"
        f"until_convergence: false\ndefaults: {{retries: 0, concurrency: {max(members, 16)}}}\nmembers:\n{lines}"
    )
    from panel_cli.cli.app import main

    def once(db: Path) -> None:
        sys.argv = ["panel", "confer", str(panel_file), "--db", str(db)]
        with open(os.devnull, "w") as sink:
            sys.stdout = sink
            try:
                main()
            except SystemExit as exit_:
                if exit_.code not in (0, None):
                    raise RuntimeError(f"panel confer exited {exit_.code}") from None
            finally:
                sys.stdout = out
        check(db, members)

    once(folder / "warm.db")
    cpu = []
    for rep in range(reps):
        started = time.process_time()
        once(folder / f"run-{rep}.db")
        cpu.append(time.process_time() - started)
    if profile:
        profiled(lambda: once(folder / "profiled.db"), "piped" if piped else "on a terminal")
    out.write(json.dumps(cpu) + "\n")


def check(db: Path, members: int) -> None:
    import sqlite3

    with sqlite3.connect(db) as store:
        answered = store.execute("SELECT count(*) FROM calls WHERE error_kind IS NULL").fetchone()[0]
    store.close()
    if answered != members * STAGES:
        raise RuntimeError(f"panel confer answered {answered} calls of {members * STAGES}")


def floor_child(url: str, members: int, reps: int, stream: bool, setup: str) -> None:
    """Child process: the same calls with litellm alone, set up as `setup` names (bench/floors.py),
    the answers streamed or not; prints the CPU of each timed run."""
    floor = litellm_floor(setup)

    async def run() -> None:
        await bare_confer(floor, url, KEY, members=members, stages=STAGES, question=QUESTION, stream=stream)

    async def timed() -> list[float]:
        await run()
        cpu = []
        for _ in range(reps):
            started = time.process_time()
            await run()
            cpu.append(time.process_time() - started)
        return cpu

    print(json.dumps(asyncio.run(timed())))


def profiled(run: Any, kind: str) -> None:
    """One run under cProfile, every thread in its own CPU time, and where the CPU outside
    litellm and its libraries went."""
    import cProfile
    import pstats
    import threading

    profilers = [cProfile.Profile(time.thread_time)]

    def on_new_thread(*_: Any) -> None:
        """A thread's first profile call: profile it from here on, in its own CPU time."""
        profiler = cProfile.Profile(time.thread_time)
        profilers.append(profiler)
        profiler.enable()

    threading.setprofile(on_new_thread)
    profilers[0].enable()
    run()
    profilers[0].disable()
    threading.setprofile(None)  # type: ignore[arg-type]
    stats = pstats.Stats(profilers[0])
    for profiler in profilers[1:]:
        stats.add(profiler)
    path = Path(tempfile.gettempdir()) / f"panel-percall-{'piped' if kind == 'piped' else 'terminal'}.prof"
    stats.dump_stats(path)
    rows = stats.stats  # type: ignore[attr-defined]
    total = sum(row[2] for row in rows.values())
    ours = {key: row for key, row in rows.items() if not any(f"/{name}/" in key[0] for name in THEIRS)}
    own = sum(row[2] for row in ours.values())
    sys.stderr.write(
        f"profile, {kind}: {total:.2f} s CPU in all; {own:.2f} s outside litellm and the libraries under it"
        f" (the interpreter, the standard library, rich, pydantic, sqlite included); saved to {path}\n"
    )
    for (file, line, name), row in sorted(ours.items(), key=lambda item: -item[1][2])[:40]:
        where = file.split("/site-packages/")[-1].split("/panel_cli/")[-1]
        sys.stderr.write(f"  {row[2] * 1000:8.1f} ms  {row[2] / own:6.1%}  {row[1]:7d} calls  {where}:{line} {name}\n")
    drawing = 1000 * sum(row[2] for (file, _, _), row in ours.items() if any(mark in file for mark in DRAWING))
    sys.stderr.write(
        f"  own time drawing the live view (panel's view/ and Rich): {drawing:.0f} ms; the rest {own * 1000 - drawing:.0f} ms\n"
    )
    for (file, line, name), row in rows.items():
        if name in ENTRIES and "/panel_cli/" in file or (name, file.split("/")[-1]) in (("refresh", "live.py"),):
            where = file.split("/site-packages/")[-1].split("/panel_cli/")[-1]
            sys.stderr.write(f"  {row[3] * 1000:8.1f} ms cumulative  {row[1]:7d} calls  {where}:{line} {name}\n")


# Whose own time is the live view's drawing, on whichever thread it runs.
DRAWING = ("/panel_cli/view/", "/rich/")
# Where the cumulative time is worth seeing: the live view's handling of an event (`draw`, on the
# loop's thread) and Rich's refresh (its own thread, and `now`), the streamed text passed on by
# the bus (scrubbed, then drawn) and read from the stream.
ENTRIES = ("draw", "_pass_on", "shown_so_far", "read_pieces", "emit")


# -- the bench ---------------------------------------------------------------------------------


# The two ways a person runs it, each with its floors: on a terminal (the live view, answers
# streamed) against litellm streaming the answers; into a pipe (the plain view's lines, nothing
# streamed) against litellm not streaming; each floor in both set-ups of bench/floors.py.
SETUPS = (PANEL_SETUP, OUT_OF_THE_BOX)
KINDS = {
    "terminal": (["--panel"], ["--floor", "--stream"]),
    "piped": (["--panel", "--piped"], ["--floor"]),
}


def child(flags: list[str], url: str, members: int, reps: int, profile: bool = False) -> list[float]:
    command = [sys.executable, __file__, *flags, "--url", url, "--members", str(members), "--reps", str(reps)]
    done = subprocess.run(
        [*command, *(["--profile"] if profile else [])], cwd=ROOT, capture_output=True, text=True, env=os.environ
    )
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(flags)} exited {done.returncode}: {done.stderr[-3000:]}")
    if profile:  # what the profile found, not what the run itself wrote there (the plain view's lines)
        sys.stdout.write(done.stderr[done.stderr.rfind("profile, ") :])
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=64)
    parser.add_argument("--reps", type=int, default=3, help="timed runs in each child, after one warm-up run")
    parser.add_argument("--rounds", type=int, default=2, help="times each child is started, alternating")
    parser.add_argument("--profile", action="store_true", help="also profile one panel run on a terminal and one piped")
    parser.add_argument("--samples", action="store_true", help="also print each run's CPU, in the order run")
    parser.add_argument(
        "--spacing",
        type=float,
        default=0.0,
        help="seconds between the pieces of a streamed answer (default 0: as fast as they are read); spaced,"
        " the answers are written side by side for the whole stage, as a provider writes them",
    )
    parser.add_argument("--serve", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--panel", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--floor", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--piped", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--stream", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--setup", choices=SETUPS, default=PANEL_SETUP, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve, args.spacing)
        return
    if args.panel:
        panel_child(args.url, args.members, args.reps, args.profile, args.piped)
        return
    if args.floor:
        floor_child(args.url, args.members, args.reps, args.stream, args.setup)
        return

    server = ChildServer(__file__, str(LATENCY), "--spacing", str(args.spacing))
    # kind -> "panel" or a set-up -> the CPU of each run
    cpu: dict[str, dict[str, list[float]]] = {kind: {"panel": [], **{setup: [] for setup in SETUPS}} for kind in KINDS}
    load_before = os.getloadavg()
    try:
        for _ in range(args.rounds):
            for kind, (panel, floor) in KINDS.items():
                cpu[kind]["panel"].extend(child(panel, server.url, args.members, args.reps))
                for setup in SETUPS:
                    cpu[kind][setup].extend(child([*floor, "--setup", setup], server.url, args.members, args.reps))
        if args.profile:
            child(["--panel"], server.url, args.members, 1, profile=True)
            child(["--panel", "--piped"], server.url, args.members, 1, profile=True)
    finally:
        server.stop()
    load_after = os.getloadavg()
    print(
        report(cpu, args.members, args.rounds * args.reps, args.spacing, (load_before[0], load_after[0]), args.samples)
    )


def report(
    cpu: dict[str, dict[str, list[float]]],
    members: int,
    runs: int,
    spacing: float,
    load: tuple[float, float],
    samples: bool,
) -> str:
    """The figures, one line each that README quotes as it stands: our CPU per call above each
    floor, panel / floor from the same medians, the load average beside them."""
    calls = members * STAGES
    lines = [
        f"{members}-member confer, {STAGES} stages ({calls} calls), ~{ANSWER_CHARS}-character answers,"
        f" the fake server at {LATENCY * 1000:.0f} ms"
        + (f", streamed pieces {spacing * 1000:g} ms apart" if spacing else "")
        + f"; {os.cpu_count()} cores; CPU a run, median of {runs}; panel and the floors alternating"
    ]
    where = {"terminal": "on a terminal (live view, streamed)", "piped": "piped (plain view)"}
    for kind, runs_of in cpu.items():
        panel = statistics.median(runs_of["panel"])
        if samples:
            lines.append(
                f"  {kind}: "
                + "; ".join(f"{who} " + " ".join(f"{run:.2f}" for run in found) for who, found in runs_of.items())
            )
        for setup in SETUPS:
            floor = statistics.median(runs_of[setup])
            ours = (panel - floor) * 1000 / calls
            lines.append(
                f"  {where[kind]}: our CPU per call {ours:+.2f} ms"
                f" {'above' if setup == PANEL_SETUP else 'vs'} {FLOOR_NAMES[setup]}"
                f" (panel {panel:.2f} s, floor {floor:.2f} s a run; panel / floor {panel / floor:.2f})"
                + (" target <= 1 ms" if setup == PANEL_SETUP else "")
                + f"; load {load[0]:.1f}-{load[1]:.1f}"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
