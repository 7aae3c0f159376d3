"""How close orchestrate's scheduling comes to the ideal: wall time / the plan's critical path.

Run by hand (never part of the tests):

    python bench/orchestrate.py             # 3 runs after a warm-up, about 20 seconds
    python bench/orchestrate.py --reps 5

The plan has 12 subtasks of uneven, fixed latencies (0.3 s to 1.6 s) in a graph where a slow
root (t02) sits beside a longer chain (t01 -> t04 -> t06 -> t09 -> t10 -> t12). Each subtask
goes to a worker of its own, a model the fake server answers after that subtask's latency, so
the denominator comes from outside our code: the critical path is the longest chain of the
server's fixed latencies (3.2 s), not latencies our client measured. The planner and the
chairman answer at once. Everything we add (the plan call, scheduling, prompts, the gateway,
litellm, events, the transcript store, the synthesis call) shows in the ratio. Target <= 1.05.

For comparison the table gives what a wave scheduler (seed 003's: start every ready subtask,
wait for the whole wave, repeat) would need on the same latencies, from the same arithmetic:
5.0 s, a ratio of 1.56 before any overhead.

Also reported: the subtasks' own span (first start to last end, from the run's events) over
the critical path, and the worst lag between a subtask's last dependency ending and the
subtask starting, which is where a scheduler that waits in waves or polls would show.

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
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from child_server import ChildServer  # noqa: E402  (beside this script)

# task_id -> (the fake server's latency for it, its dependencies)
PLAN: dict[str, tuple[float, list[str]]] = {
    "t01": (0.4, []),
    "t02": (1.6, []),
    "t03": (0.3, []),
    "t04": (0.5, ["t01"]),
    "t05": (0.9, ["t03"]),
    "t06": (0.4, ["t04"]),
    "t07": (0.6, ["t04", "t05"]),
    "t08": (0.3, ["t02"]),
    "t09": (0.8, ["t06"]),
    "t10": (0.5, ["t07", "t09"]),
    "t11": (0.4, ["t08"]),
    "t12": (0.6, ["t10", "t11"]),
}
TARGET = 1.05


def worker_of(task_id: str) -> str:
    return f"w{task_id[1:]}"


def plan_json() -> str:
    return json.dumps(
        {
            "subtasks": [
                {
                    "task_id": task_id,
                    "worker": worker_of(task_id),
                    "title": f"part {task_id}",
                    "description": f"do part {task_id}",
                    "depends_on": deps,
                    "priority": 1,
                }
                for task_id, (_, deps) in PLAN.items()
            ]
        }
    )


# -- the fake server, in a child process ------------------------------------------------


def serve() -> None:
    """Child process: the planner/chairman answers at once; each worker after its subtask's latency."""
    from tests.fakes.openai_server import FakeOpenAIServer, reply, responder

    plan = plan_json()
    server = FakeOpenAIServer().start()
    server.script(
        "coordinator",
        responder(
            lambda request: plan if "[panel-task: plan]" in str(request.messages[-1]["content"]) else "the answer"
        ),
    )
    for task_id, (latency, _) in PLAN.items():
        server.script(worker_of(task_id), reply(f"output of {task_id}", latency=latency))
    print(server.url, flush=True)
    sys.stdin.read()
    server.stop()


# -- one run ----------------------------------------------------------------------------


async def orchestrate_once(url: str, db: Path) -> dict[str, float]:
    """One run through the engine, the gateway, litellm and the transcript store."""
    from panel_cli.config import Panel
    from panel_cli.events import EventBus
    from panel_cli.llm.gateway import Gateway
    from panel_cli.protocols.orchestrate.engine import orchestrate
    from panel_cli.runs.execute import run_engine
    from panel_cli.store.subscriber import TranscriptStore

    coordinator = {"name": "coordinator", "model": "openai/coordinator", "api_base": url}
    panel = Panel.model_validate(
        {
            "name": "bench",
            "protocol": "orchestrate",
            "members": [
                {"name": worker_of(task_id), "model": f"openai/{worker_of(task_id)}", "api_base": url}
                for task_id in PLAN
            ],
            "planner": coordinator,
            "chairman": coordinator,
            "defaults": {"retries": 0},
        }
    )
    events: list[Any] = []

    async def record(event: Any) -> None:
        events.append(event)

    store = await TranscriptStore.open(db)
    bus = EventBus(uuid.uuid4().hex[:12], [store, record])
    gateway = Gateway(bus.emit, defaults=panel.defaults, concurrency=panel.concurrency)
    try:
        outcome = await run_engine(orchestrate, panel, "What should we build?", gateway, bus)
    finally:
        await gateway.aclose()
        await store.close()
    result = outcome.result
    assert result.success and result.succeeded == len(PLAN), result.failure_reason
    started = {e.task_id: e.ts for e in events if e.type == "task_started"}
    ended = {e.task_id: e.ts for e in events if e.type == "task_finished"}
    lag = max(
        started[task_id] - max((ended[dep] for dep in deps), default=started[task_id])
        for task_id, (_, deps) in PLAN.items()
    )
    return {"wall": outcome.envelope.duration_s, "span": max(ended.values()) - min(started.values()), "lag": lag}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--reps", type=int, default=3, help="measured runs after the warm-up (default 3)")
    args = parser.parse_args()
    if args.serve:
        serve()
        return

    from importlib.metadata import version

    from panel_cli.protocols.orchestrate.graph import critical_path, wave_time

    depends = {task_id: deps for task_id, (_, deps) in PLAN.items()}
    seconds = {task_id: latency for task_id, (latency, _) in PLAN.items()}
    path, waves = critical_path(depends, seconds), wave_time(depends, seconds)
    server = ChildServer(__file__)
    try:
        with tempfile.TemporaryDirectory() as folder:
            db = Path(folder) / "bench.db"
            asyncio.run(orchestrate_once(server.url, db))  # warm-up: imports, first-call costs, connections
            runs = [asyncio.run(orchestrate_once(server.url, db)) for _ in range(args.reps)]
    finally:
        server.stop()

    print(f"python {platform.python_version()}, litellm {version('litellm')}")
    print(
        f"plan: {len(PLAN)} subtasks, latencies {min(seconds.values()):g}-{max(seconds.values()):g} s at the fake server"
    )
    print(
        f"critical path {path:.2f} s; a wave scheduler needs {waves:.2f} s (ratio {waves / path:.2f} before any overhead)"
    )
    print()
    print(f"  {'run':>3}  {'wall s':>7}  {'wall/path':>9}  {'subtasks span/path':>18}  {'worst start lag ms':>18}")
    for index, run in enumerate(runs, start=1):
        print(
            f"  {index:>3}  {run['wall']:>7.3f}  {run['wall'] / path:>9.3f}  {run['span'] / path:>18.3f}  {run['lag'] * 1000:>18.1f}"
        )
    best = min(run["wall"] for run in runs) / path
    worst = max(run["wall"] for run in runs) / path
    verdict = "meets" if worst <= TARGET else "misses"
    print()
    print(f"wall / critical path: best {best:.3f}, worst {worst:.3f}; target <= {TARGET} ({verdict} it on every run)")


if __name__ == "__main__":
    main()
