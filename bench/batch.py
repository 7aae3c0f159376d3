"""`panel batch` as a user runs it, divided by litellm alone making the same calls.

Run by hand (never part of the tests), from the repository root, in the project's venv:

    python bench/batch.py                     # 500 questions, 3 repetitions, a quiet machine
    python bench/batch.py --busy 2            # the same with two busy loops beside it
    python bench/batch.py --questions 100 --reps 1

Figure: wall time of `panel batch FILE --questions Q --concurrency 16` (a new process, its
store, its progress on a pipe: one line per finished question, secrets redaction on, since
`OPENAI_API_KEY` is set) over 500 questions to a 3-member confer panel (`max_rounds: 2`,
`until_convergence: false`: an answer stage and two vote rounds, 9 calls a question, 4,500
in all), the fake server (tests/fakes/openai_server.py, in a child process) answering every
call after a fixed 200 ms. Divided by the floor: a new process that makes the same calls with
`litellm.acompletion` and nothing else, 16 questions at a time, each question's three stages
one after the other and a stage's three calls at once, through the same per-endpoint limit
of 16 calls in flight (panel's default `concurrency`), with litellm as panel sets it up
(bench/floors.py: panel's `load_litellm`, each call in the gateway's quiet-call context).
Beside it, the same floor with litellm out of the box (`import litellm` alone).
Targets (issue 23): panel / floor <= 1.05 quiet, <= 1.3 with two busy loops beside it.

Both are timed from the process's start to its exit, so both pay their imports; panel's
run is checked (every question answered, 4,500 calls in the store) before it counts. The three
take turns, each repetition in a new database, and the median of each is reported, with the
load average before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from child_server import ChildServer  # noqa: E402  (beside this script)
from floors import FLOOR_NAMES, OUT_OF_THE_BOX, PANEL_SETUP, VOTE_MARKER, litellm_floor  # noqa: E402

MEMBERS = 3
STAGES = 3  # the answer stage and two vote rounds
LATENCY = 0.2
CONCURRENCY = 16  # runs at a time (`--concurrency`)
ENDPOINT_LIMIT = 16  # calls in flight per endpoint: panel's `defaults.concurrency`
# A key named like a secret: panel scrubs it from every event, as it would a real one.
KEY = "fake-key-for-the-bench"
SETUPS = (PANEL_SETUP, OUT_OF_THE_BOX)


def environment() -> dict[str, str]:
    return {
        **os.environ,
        "OPENAI_API_KEY": KEY,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_OFFLINE_MODE": "True",
        "PYTHONPATH": str(ROOT),
    }


def write_inputs(folder: Path, url: str, questions: int) -> tuple[Path, Path]:
    members = "".join(
        f"  - name: m{index}\n    model: openai/m{index}\n    api_base: {url}\n" for index in range(MEMBERS)
    )
    panel = folder / "panel.yaml"
    panel.write_text(
        f"name: bench\nprotocol: confer\nmax_rounds: {STAGES - 1}\nuntil_convergence: false\n"
        f"defaults:\n  concurrency: {ENDPOINT_LIMIT}\nmembers:\n{members}"
    )
    asked = folder / "questions.txt"
    asked.write_text("".join(f"Question number {index}: which option is best?\n" for index in range(questions)))
    return panel, asked


class Timed:
    """A child process's wall time and CPU time (user + system); for panel, each call's span
    from its `call_started` to its `call_finished` (the store's event times) and its latency
    (from just after `call_started` was handed on, the wait for an endpoint slot included)."""

    calls: list[tuple[float, float]] = []

    def __init__(self, command: list[str]) -> None:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        self.done = subprocess.run(command, env=environment(), cwd=ROOT, capture_output=True, text=True)
        self.wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def time_panel(folder: Path, panel: Path, asked: Path, questions: int, rep: int) -> Timed:
    db, output = folder / f"runs-{rep}.db", folder / f"results-{rep}.jsonl"
    command = [sys.executable, "-m", "panel_cli", "batch", str(panel), "--questions", str(asked)]
    command += ["--concurrency", str(CONCURRENCY), "--output", str(output), "--db", str(db)]
    timed = Timed(command)
    done = timed.done
    if done.returncode != 0:
        raise SystemExit(f"panel batch exited {done.returncode}: {done.stderr[-2000:]}")
    lines = [json.loads(line) for line in output.read_text().splitlines()]
    answered = sum(line["reached_answer"] for line in lines)
    with sqlite3.connect(db) as store:
        calls = store.execute("SELECT count(*) FROM calls WHERE error_kind IS NULL").fetchone()[0]
        timed.calls = [
            (epoch(finished) - epoch(started), latency)
            for started, finished, latency in store.execute(
                "SELECT s.ts, f.ts, c.latency FROM calls c"
                " JOIN events s ON s.run_id = c.run_id AND s.seq = c.started_seq"
                " JOIN events f ON f.run_id = c.run_id AND f.seq = c.seq"
            )
        ]
    store.close()
    if answered != questions or calls != questions * MEMBERS * STAGES:
        raise SystemExit(f"panel batch answered {answered} of {questions} questions with {calls} calls")
    return timed


def milliseconds(seconds: list[float]) -> str:
    ordered = sorted(seconds)
    return f"median {statistics.median(ordered) * 1000:.1f} ms, p95 {ordered[int(len(ordered) * 0.95)] * 1000:.1f} ms"


def epoch(stored: str) -> float:
    """A time as the store keeps it (ISO-8601 UTC, nine decimals) in seconds; to the microsecond."""
    return datetime.fromisoformat(stored[:26]).replace(tzinfo=UTC).timestamp()


def time_floor(url: str, questions: int, setup: str) -> Timed:
    timed = Timed([sys.executable, __file__, "--floor", url, "--questions", str(questions), "--setup", setup])
    if timed.done.returncode != 0:
        raise SystemExit(f"the floor exited {timed.done.returncode}: {timed.done.stderr[-2000:]}")
    return timed


def floor(url: str, questions: int, setup: str) -> None:
    """Child process: the batch's calls with litellm alone, set up as `setup` names."""
    litellm, around_call = litellm_floor(setup)

    async def main() -> None:
        limit = asyncio.Semaphore(ENDPOINT_LIMIT)
        pending = iter(range(questions))

        async def call(member: int, content: str) -> None:
            async with limit:
                with around_call():
                    response = await litellm.acompletion(
                        model=f"openai/m{member}",
                        messages=[{"role": "user", "content": content}],
                        api_base=url,
                        api_key=KEY,
                        max_retries=0,
                    )
            assert response.choices[0].message.content

        async def worker() -> None:
            for number in pending:
                for stage in range(STAGES):
                    content = f"Question number {number}: which option is best?"
                    if stage:
                        content += f"\n\nA: answer m0\nB: answer m1\nC: answer m2\n\n{VOTE_MARKER}"
                    await asyncio.gather(*(call(member, content) for member in range(MEMBERS)))

        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))

    asyncio.run(main())


def busy_loops(count: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=500)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--busy", type=int, default=0, help="busy loops to run beside the batch")
    parser.add_argument("--floor", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--setup", choices=SETUPS, default=PANEL_SETUP, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.floor:
        floor(args.floor, args.questions, args.setup)
        return

    server = ChildServer(str(BENCH / "overhead.py"), str(LATENCY))
    loops = busy_loops(args.busy)
    whos = ("panel", *SETUPS)
    runs: dict[str, list[Timed]] = {who: [] for who in whos}
    load_before = os.getloadavg()
    try:
        with tempfile.TemporaryDirectory(prefix="panel-bench-batch-") as temporary:
            folder = Path(temporary)
            panel, asked = write_inputs(folder, server.url, args.questions)
            for rep in range(args.reps):
                # Rotate which goes first, so drift in the machine's load hits all alike.
                for who in whos[rep % len(whos) :] + whos[: rep % len(whos)]:
                    if who == "panel":
                        runs[who].append(time_panel(folder, panel, asked, args.questions, rep))
                    else:
                        runs[who].append(time_floor(server.url, args.questions, who))
                print(
                    f"  rep {rep + 1}: "
                    + ", ".join(f"{who} {runs[who][-1].wall:.2f} s ({runs[who][-1].cpu:.2f} s CPU)" for who in whos),
                    flush=True,
                )
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
        server.stop()
    load_after = os.getloadavg()
    calls = args.questions * MEMBERS * STAGES
    # What a client costing nothing would take: every call through the endpoint's limit.
    nominal = calls / ENDPOINT_LIMIT * LATENCY
    wall = {who: statistics.median(run.wall for run in found) for who, found in runs.items()}
    print(
        f"batch of {args.questions} questions x {MEMBERS}-member confer ({calls} calls, {LATENCY * 1000:.0f} ms each),"
        f" --concurrency {CONCURRENCY}, {args.busy} busy loops beside it, {os.cpu_count()} cores"
    )
    names = {"panel": "panel batch (store, progress, redaction)", **{setup: FLOOR_NAMES[setup] for setup in SETUPS}}
    for who, found in runs.items():
        cpu = statistics.median(run.cpu for run in found)
        print(
            f"  {names[who]:<42} wall {wall[who]:6.2f} s (median of {len(found)}), CPU {cpu:6.2f} s,"
            f" {cpu * 1000 / calls:.2f} ms a call"
        )
    spans = [span for run in runs["panel"] for span, _ in run.calls]
    held = [span - latency for run in runs["panel"] for span, latency in run.calls]
    print(
        f"  panel's calls, call_started to call_finished (the store's times): {milliseconds(spans)};"
        f" of it, held before the request could leave (the span less the call's latency): {milliseconds(held)}"
    )
    target = 1.05 if args.busy == 0 else 1.3
    print(
        f"  panel batch wall / {FLOOR_NAMES[PANEL_SETUP]} {wall['panel'] / wall[PANEL_SETUP]:.3f} (target <= {target});"
        f" / {FLOOR_NAMES[OUT_OF_THE_BOX]} {wall['panel'] / wall[OUT_OF_THE_BOX]:.3f};"
        f" load {load_before[0]:.1f}-{load_after[0]:.1f}"
    )
    print(
        f"  panel / nominal path ({nominal:.2f} s: {calls} calls, {ENDPOINT_LIMIT} at a time) {wall['panel'] / nominal:.3f}"
    )


if __name__ == "__main__":
    main()
