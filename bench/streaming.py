"""How soon a streamed answer's first words appear in the live view.

Run by hand (never part of the tests):

    python bench/streaming.py               # 5 runs of 16 members after a warm-up, ~15 seconds
    python bench/streaming.py --runs 10 --members 32 --spacing 0.02

Each run is a confer (answers, then one vote round) of `--members` members on the fake
server, drawn by the real live view on a terminal console, with the transcript store writing
as usual. Every member's answer streams: its first token comes after `--ttft` seconds plus a
stagger of up to `--stagger` (fixed per member), then a piece every `--spacing` seconds. The
first piece of each answer is a marker of its own (`m07:first-words`).

The figure is, per answer, the time from the moment the server sent its first token (the fake
server stamps it) to the first frame written to the terminal that shows that marker (the
console's file stamps every write: the render hook). Both clocks are time.monotonic(), which
on Linux is one clock for every process. Target: median and p95 <= 100 ms. The floor, measured
in turn with panel's runs: the same answers streamed by litellm as panel sets it up
(bench/floors.py), read by a loop that draws nothing, from the server's first token to the
moment the marker is in the caller's hands; the difference of the medians is what the gateway,
the events and the view add. Also reported: the
frames written per second while the answers stream, first while first words still arrive
(each call's first words add a drawing at once, those arriving together sharing one), then
once every answer has begun (the live view's own tick, about 8 a second, whatever the pieces).

The fake server (tests/fakes/openai_server.py) runs in a child process so that its work does
not share the client's GIL.
"""

from __future__ import annotations

import os

# Before anything imports litellm: offline and the local price table.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["LITELLM_OFFLINE_MODE"] = "True"

import argparse
import asyncio
import json
import platform
import random
import re
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from child_server import ChildServer  # noqa: E402  (beside this script)
from floors import FLOOR_NAMES, PANEL_SETUP, litellm_floor  # noqa: E402

TARGET_MS = 100.0
PIECES = 40
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\r")


def marker(index: int) -> str:
    return f"m{index:02d}:first-words "


def answer(index: int) -> str:
    """The marker, then filler that never repeats it, one piece per `len(marker)` characters."""
    size = len(marker(index))
    filler = "".join(f"w{number:0{size - 2}d} " for number in range(PIECES - 1))
    return marker(index) + filler


# -- the fake server, in a child process ------------------------------------------------


def serve(members: int, ttft: float, stagger: float, spacing: float) -> None:
    """Child process: each member streams its answer; votes come at once. On a line `report`
    on stdin, prints the first-token times of the streams sent since the last report."""
    from tests.fakes.openai_server import FakeOpenAIServer, RecordedRequest, responder

    server = FakeOpenAIServer().start()
    rng = random.Random(7)
    for index in range(1, members + 1):
        text = answer(index)

        def reply(request: RecordedRequest, text: str = text) -> str:
            prompt = str(request.messages[-1]["content"])
            if "[panel-task: confer.vote]" in prompt:
                label = re.findall(r"^=== Answer ([A-Z]+) \[", prompt, re.MULTILINE)[0]
                return json.dumps({"chosen_label": label, "revised_answer": "", "confidence": 80, "rationale": "first"})
            return text

        server.script(
            f"m{index:02d}",
            responder(reply, latency=ttft + rng.uniform(0, stagger), spacing=spacing, chunk_chars=len(marker(index))),
        )
    print(server.url, flush=True)
    reported = 0
    for line in sys.stdin:
        if line.strip() == "report":
            streams = server.streams[reported:]
            reported = len(server.streams)
            print(json.dumps([{"model": s.model, "first_token_at": s.first_token_at} for s in streams]), flush=True)
    server.stop()


# -- the render hook: a terminal that stamps what is written to it ----------------------


class StampedTerminal:
    """The console's file: every write kept with the moment it was written."""

    def __init__(self) -> None:
        self.writes: list[tuple[float, str]] = []
        self._lock = threading.Lock()

    def write(self, data: str) -> int:
        with self._lock:
            self.writes.append((time.monotonic(), data))
        return len(data)

    def flush(self) -> None:
        return None

    def rate(self, begin: float, end: float) -> float:
        """Writes per second between two moments."""
        return sum(1 for stamp, _ in self.writes if begin <= stamp <= end) / (end - begin) if end > begin else 0.0

    def first_showing(self, text: str) -> float | None:
        return next((stamp for stamp, data in self.writes if text in _ESCAPES.sub("", data)), None)


# -- one run ----------------------------------------------------------------------------


async def run_once(url: str, members: int, db: Path) -> StampedTerminal:
    """One confer through the engine, the streaming gateway, litellm, the live view and the store."""
    from rich.console import Console

    from panel_cli.config import Panel
    from panel_cli.protocols.confer.engine import confer
    from panel_cli.runs.execute import run_panel
    from panel_cli.runs.prepare import PreparedRun
    from panel_cli.store.subscriber import TranscriptStore
    from panel_cli.view.live import LiveView

    panel = Panel.model_validate(
        {
            "name": "bench",
            "members": [
                {"name": f"m{index:02d}", "model": f"openai/m{index:02d}", "api_base": url}
                for index in range(1, members + 1)
            ],
            "max_rounds": 1,
            "defaults": {"retries": 0, "concurrency": max(16, members)},
        }
    )
    terminal = StampedTerminal()
    console = Console(file=terminal, force_terminal=True, width=200, height=members + 40)  # type: ignore[arg-type]
    store = await TranscriptStore.open(db)
    try:
        outcome = await run_panel(
            PreparedRun(engine=confer, panel=panel, question="Which?", warnings=(), secrets=()),
            store=store,
            view=LiveView(console),
            stream=True,
            run_id=uuid.uuid4().hex[:12],
        )
    finally:
        await store.close()
    assert outcome.result.reached_answer, outcome.result.failure_reason
    return terminal


async def floor_once(url: str, members: int) -> dict[str, float]:
    """The same answers streamed by litellm as panel sets it up, nothing drawn: the moment
    each answer's marker reached the caller, by model."""
    litellm, around_call = litellm_floor(PANEL_SETUP)
    received: dict[str, float] = {}

    async def read(index: int) -> None:
        model, words = f"m{index:02d}", marker(index).strip()
        with around_call():
            chunks = await litellm.acompletion(
                model=f"openai/{model}",
                messages=[{"role": "user", "content": "Which?"}],
                api_base=url,
                api_key="fake-key-for-the-bench",
                max_retries=0,
                stream=True,
                stream_options={"include_usage": True},
            )
            text = ""
            async for chunk in chunks:
                if chunk.choices:
                    text += chunk.choices[0].delta.content or ""
                    if model not in received and words in text:
                        received[model] = time.monotonic()

    await asyncio.gather(*(read(index) for index in range(1, members + 1)))
    return received


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, default=5, help="measured runs after the warm-up (default 5)")
    parser.add_argument("--members", type=int, default=16, help="members, each streaming its answer (default 16)")
    parser.add_argument(
        "--ttft", type=float, default=0.4, help="the server's time to first token, seconds (default 0.4)"
    )
    parser.add_argument(
        "--stagger", type=float, default=0.3, help="spread of the members' first tokens, seconds (default 0.3)"
    )
    parser.add_argument("--spacing", type=float, default=0.03, help="seconds between pieces (default 0.03)")
    args = parser.parse_args()
    if args.serve:
        serve(args.members, args.ttft, args.stagger, args.spacing)
        return

    from importlib.metadata import version

    serve_args = (
        "--members",
        str(args.members),
        "--ttft",
        str(args.ttft),
        "--stagger",
        str(args.stagger),
        "--spacing",
        str(args.spacing),
    )
    server = ChildServer(__file__, *serve_args)
    latencies: list[float] = []
    floor: list[float] = []
    opening: list[float] = []
    steady: list[float] = []
    load_before = os.getloadavg()[0]
    try:
        with tempfile.TemporaryDirectory() as folder:
            db = Path(folder) / "bench.db"
            asyncio.run(run_once(server.url, args.members, db))  # warm-up: imports, first-call costs, connections
            asyncio.run(floor_once(server.url, args.members))
            server.ask("report")
            for _ in range(args.runs):
                terminal = asyncio.run(run_once(server.url, args.members, db))
                streams = json.loads(server.ask("report"))
                firsts = {stream["model"]: stream["first_token_at"] for stream in streams}
                for index in range(1, args.members + 1):
                    sent = firsts[f"m{index:02d}"]
                    shown = terminal.first_showing(marker(index).strip())
                    if sent is None or shown is None:
                        raise RuntimeError(f"m{index:02d}'s first words never showed")
                    latencies.append((shown - sent) * 1000)
                begin, begun = min(firsts.values()), max(firsts.values())
                end = begin + PIECES * args.spacing
                opening.append(terminal.rate(begin, begun))
                steady.append(terminal.rate(begun, end))
                received = asyncio.run(floor_once(server.url, args.members))
                sent_to_floor = {
                    stream["model"]: stream["first_token_at"] for stream in json.loads(server.ask("report"))
                }
                floor += [(received[model] - sent) * 1000 for model, sent in sent_to_floor.items()]
    finally:
        server.stop()
    load = (load_before, os.getloadavg()[0])

    median, p95, worst = statistics.median(latencies), percentile(latencies, 0.95), max(latencies)
    print(f"python {platform.python_version()}, litellm {version('litellm')}, {os.cpu_count()} cores")
    print(
        f"{args.runs} runs x {args.members} members; first token after {args.ttft:g} s + up to {args.stagger:g} s; a piece every {args.spacing:g} s"
    )
    print()
    print("server's first token -> its first frame on the terminal, ms")
    print(
        f"  median {median:6.1f}   p95 {p95:6.1f}   max {worst:6.1f}   min {min(latencies):6.1f}   (n = {len(latencies)})"
    )
    print(f"server's first token -> in the hands of a loop reading it with {FLOOR_NAMES[PANEL_SETUP]}, ms")
    print(f"  median {statistics.median(floor):6.1f}   p95 {percentile(floor, 0.95):6.1f}   (n = {len(floor)})")
    print(
        f"  frames written per second: {statistics.median(opening):.1f} while first words arrive, "
        f"{statistics.median(steady):.1f} once every answer has begun (medians of the runs)"
    )
    verdict = "meets" if median <= TARGET_MS and p95 <= TARGET_MS else "misses"
    print()
    print(
        f"first token to first frame, {args.members} members: median {median:.1f} ms, p95 {p95:.1f} ms"
        f" (target <= {TARGET_MS:g} ms: {verdict} it); {FLOOR_NAMES[PANEL_SETUP]} reading the same streams"
        f" median {statistics.median(floor):.1f} ms, p95 {percentile(floor, 0.95):.1f} ms; ours (the medians' difference)"
        f" {median - statistics.median(floor):.1f} ms; load {load[0]:.1f}-{load[1]:.1f}"
    )


if __name__ == "__main__":
    main()
