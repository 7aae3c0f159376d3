"""How much time the gateway and litellm add on top of the models' own latency.

Run by hand (never part of the tests):

    python bench/overhead.py            # the full table, well under two minutes
    python bench/overhead.py --profile  # also cProfile the gateway's 200-call burst

Figures:
  1. P1 (issue 23): confer (answer + 2 vote rounds, `until_convergence: false`) as a person
     runs it on a terminal: `panel confer FILE` in a new process, the live view (`FORCE_COLOR`,
     drawn into a pipe), the answers streamed, the store writing, secrets redaction on
     (`OPENAI_API_KEY` is set); 3, 16 and 64 members, the fake provider answering every call
     after a fixed 1 s, a concurrency limit of at least the member count. The figure is the
     server's span (the first request's arrival to the last reply, its arrival plus the 1 s)
     divided by the nominal path, 3 stages x 1 s: a denominator from outside our code. Beside
     it, the same for litellm alone in a new process making the same calls (the answers
     streamed, then two rounds of vote prompts quoting every answer, each stage's calls at
     once), in both set-ups of bench/floors.py: as panel sets it up, and out of the box; and
     panel / each. Median of CONFER_REPS of each, the three in turn. Goals: <= 1.03 / 1.10 /
     1.40 at 3 / 16 / 64 members.
  2. throughput of 200 concurrent calls to an instant fake: Gateway.call, litellm.acompletion
     as panel sets it up and out of the box (bench/floors.py), raw httpx (one AsyncClient,
     pool >= 200, same JSON body) and raw aiohttp (the transport litellm sends through), each
     in a new process of its own (one process holds one set-up of litellm), so what is ours
     and what is litellm's can be told apart. The figures: Gateway.call / litellm as panel
     sets it up, by rate and by CPU (this process's CPU per call, which other load on the
     machine disturbs less than calls/s), and the gateway's own CPU per call above that floor
     (target <= 1 ms, bench/percall.py's per call); Gateway.call / litellm out of the box
     beside them. Median of 2 x 5 bursts after two warm-up bursts, the clients in turn.
     Target for Gateway.call / httpx >= 0.8. Two warm-ups because httpx needs them: its pool
     scans every queued request against every connection each time one is added, so the first
     burst (200 connects) takes ~2.5 s, the 200 keep-alive connections it leaves start
     expiring (5 s) during the second, and that burst collapses to ~36 calls/s while the pool
     closes 188 of them; from the third on it runs steadily on the dozen that remain. Counting that second burst made
     httpx look up to a third slower than it is, and the gateway's ratio that much better.
  3. the cold start: importing litellm, load_litellm() on top, and the first calls of the
     process (demo provider).

The fake server (tests/fakes/openai_server.py) runs in a child process so that its work
does not share the client's GIL; every client talks to the same server with the same body.
Sizes are fixed above (BURST, SIZES, ...); the whole run takes about a minute.
"""

from __future__ import annotations

import os

# Before anything imports litellm: offline, local price table, instant demo provider.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["LITELLM_OFFLINE_MODE"] = "True"
os.environ["PANEL_DEMO_DELAY"] = "0"

import argparse
import asyncio
import concurrent.futures
import json
import platform
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

from child_server import ChildServer  # noqa: E402  (beside this script)
from floors import FLOOR_NAMES, OUT_OF_THE_BOX, PANEL_SETUP, VOTE_MARKER, bare_confer, litellm_floor  # noqa: E402

BURST = 200
STAGE_LATENCY = 1.0
STAGES = 3  # confer's answer round and two vote rounds
SIZES = (3, 16, 64)
GOALS = {3: 1.03, 16: 1.10, 64: 1.40}  # issue 23: the server's span / the nominal path
SETUPS = (PANEL_SETUP, OUT_OF_THE_BOX)
CONFER_REPS = 3
BURST_REPS = 5
WARM_UP_BURSTS = 2


# -- the fake server, in a child process ------------------------------------------------


def _vote_or_answer(request: Any) -> str:
    content = str(request.messages[-1]["content"]) if request.messages else ""
    if VOTE_MARKER in content:
        revised = f"answer A, as {request.model} revised it"
        return json.dumps({"chosen_label": "A", "revised_answer": revised, "confidence": 80, "rationale": "best"})
    return "answer " + request.model


def serve(latency: float) -> None:
    """Child process: serve until stdin closes, printing the URL first."""
    from tests.fakes.openai_server import FakeOpenAIServer, responder

    server = FakeOpenAIServer().start()
    server.default(responder(_vote_or_answer, latency=latency))
    print(server.url, flush=True)
    for line in sys.stdin:
        if line.strip() == "span":  # the requests since the last `span`: first and last arrival, count
            arrived = [request.received_at for request in server.requests]
            server.requests.clear()
            print(json.dumps([min(arrived, default=0.0), max(arrived, default=0.0), len(arrived)]), flush=True)
    server.stop()


# -- 3. cold start ----------------------------------------------------------------------


def cold_start() -> dict[str, float]:
    from panel_cli.config import Member
    from panel_cli.llm.gateway import Gateway
    from panel_cli.llm.litellm_setup import load_litellm

    started = time.perf_counter()
    import litellm  # noqa: F401 - timed apart from what load_litellm adds

    imported = time.perf_counter() - started
    started = time.perf_counter()
    load_litellm()
    loaded = time.perf_counter() - started

    async def run() -> list[float]:
        async def emit(_event: Any) -> None:
            return None

        gateway = Gateway(emit)
        who = Member(name="sage", model="demo/sage")
        out = []
        for _ in range(3):
            t0 = time.perf_counter()
            result = await gateway.call(who, [{"role": "user", "content": "hello"}], stage="answer")
            assert result.ok, result.error
            out.append(time.perf_counter() - t0)
        await gateway.aclose()
        return out

    first, second, third = asyncio.run(run())
    return {"import": imported, "load_litellm": loaded, "first_call": first, "second_call": second, "third_call": third}


# -- 1. confer overhead: the server's span ----------------------------------------------------

KEY = "fake-key-for-the-bench"  # named like a secret: panel scrubs it from every event


def panel_file(folder: Path, url: str, size: int) -> Path:
    members = "".join(f"  - {{name: m{i}, model: openai/m{i}, api_base: '{url}'}}\n" for i in range(size))
    path = folder / f"confer-{size}.yaml"
    path.write_text(
        f"name: bench\nprotocol: confer\nquestion: What is best?\nmax_rounds: {STAGES - 1}\n"
        f"until_convergence: false\ndefaults: {{retries: 0, concurrency: {max(size, 16)}}}\nmembers:\n{members}"
    )
    return path


def server_span(server: ChildServer) -> tuple[float, int]:
    """The span the server saw since it was last asked: from the first request's arrival to
    the last one's reply (its arrival plus the fixed latency), and how many requests came."""
    first, last, count = json.loads(server.ask("span"))
    return last + STAGE_LATENCY - first, count


def panel_span(server: ChildServer, folder: Path, size: int, rep: int) -> float:
    """`panel confer` as a person runs it on a terminal: the CLI in a new process, the live
    view (`FORCE_COLOR`, drawn into a pipe), answers streamed, the store, redaction."""
    server_span(server)  # forget what came before
    env = {**os.environ, "OPENAI_API_KEY": KEY, "FORCE_COLOR": "1", "COLUMNS": "160", "LINES": "50"}
    command = [sys.executable, "-m", "panel_cli", "confer", str(panel_file(folder, server.url, size))]
    done = subprocess.run(
        [*command, "--db", str(folder / f"runs-{size}-{rep}.db")], env=env, cwd=ROOT, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"panel confer exited {done.returncode}: {done.stderr[-2000:]}")
    span, count = server_span(server)
    if count != STAGES * size:
        raise SystemExit(f"panel confer made {count} requests, not {STAGES * size}")
    return span


def floor_span(server: ChildServer, size: int, setup: str) -> float:
    """The same stages made by litellm alone, set up as `setup` names, in a new process (`--floor`)."""
    server_span(server)
    done = subprocess.run(
        [sys.executable, __file__, "--floor", server.url, "--members", str(size), "--setup", setup],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "OPENAI_API_KEY": KEY},
    )
    if done.returncode != 0:
        raise SystemExit(f"the floor exited {done.returncode}: {done.stderr[-2000:]}")
    span, count = server_span(server)
    if count != STAGES * size:
        raise SystemExit(f"the floor made {count} requests, not {STAGES * size}")
    return span


def floor(url: str, size: int, setup: str) -> None:
    """Child process: confer's three stages with `litellm.acompletion` alone (bench/floors.py)."""
    stages = bare_confer(
        litellm_floor(setup), url, KEY, members=size, stages=STAGES, question="What is best?", stream=True
    )
    asyncio.run(stages)


def bench_confer() -> list[dict[str, Any]]:
    server = ChildServer(__file__, str(STAGE_LATENCY))
    rows = []
    whos = ("panel", *SETUPS)
    try:
        with tempfile.TemporaryDirectory(prefix="panel-bench-overhead-") as name:
            folder = Path(name)
            panel_span(server, folder, 3, -1)  # warm-up: bytecode, the disk cache
            for size in SIZES:
                spans: dict[str, list[float]] = {who: [] for who in whos}
                for rep in range(CONFER_REPS):
                    # Rotate which goes first, so drift in the machine's load hits all alike.
                    for who in whos[rep % len(whos) :] + whos[: rep % len(whos)]:
                        found = (
                            panel_span(server, folder, size, rep) if who == "panel" else floor_span(server, size, who)
                        )
                        spans[who].append(found)
                nominal = STAGES * STAGE_LATENCY
                rows.append({"members": size, **{who: statistics.median(spans[who]) / nominal for who in whos}})
    finally:
        server.stop()
    return rows


# -- 2. throughput ----------------------------------------------------------------------

MESSAGES = [{"role": "user", "content": "hello"}]


Samples = list[tuple[float, float]]  # (calls/s, CPU ms per call) of one burst


async def burst(fn: Any, reps: int) -> Samples:
    """calls/s and this process's CPU per call of `BURST` concurrent calls, for each
    repetition after the warm-up bursts (see the module's docstring for why two). The CPU
    figure is steadier than the rate when other work shares the machine, and it is what
    each client itself costs."""
    for _ in range(WARM_UP_BURSTS):
        await asyncio.gather(*(fn(i) for i in range(BURST)))
    samples = []
    for _ in range(reps):
        started, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(fn(i) for i in range(BURST)))
        elapsed = time.perf_counter() - started
        samples.append((BURST / elapsed, (time.process_time() - cpu) * 1000 / BURST))
    return samples


async def raw_httpx(url: str, reps: int) -> Samples:
    import httpx

    limits = httpx.Limits(max_connections=BURST + 56, max_keepalive_connections=BURST + 56)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:
        headers = {"Authorization": "Bearer no-key-needed"}

        async def one(_i: int) -> None:
            response = await client.post(
                f"{url}/chat/completions", json={"model": "m0", "messages": MESSAGES}, headers=headers
            )
            response.raise_for_status()
            assert response.json()["choices"][0]["message"]["content"]

        return await burst(one, reps)


async def raw_aiohttp(url: str, reps: int) -> Samples:
    """The transport litellm itself sends through, for a floor under all of them."""
    import aiohttp  # a dependency of litellm, which sends through it by default

    connector = aiohttp.TCPConnector(limit=BURST + 56)
    async with aiohttp.ClientSession(connector=connector) as session:
        headers = {"Authorization": "Bearer no-key-needed"}

        async def one(_i: int) -> None:
            async with session.post(
                f"{url}/chat/completions", json={"model": "m0", "messages": MESSAGES}, headers=headers
            ) as response:
                response.raise_for_status()
                assert (await response.json())["choices"][0]["message"]["content"]

        return await burst(one, reps)


async def litellm_alone(url: str, reps: int, setup: str) -> Samples:
    """litellm.acompletion alone, the same request the gateway makes, set up as `setup` names
    (bench/floors.py): as panel sets it up, Gateway.call / litellm.acompletion is what the
    gateway's own per-call work costs or saves."""
    floor = litellm_floor(setup)

    async def one(_i: int) -> None:
        with floor.around_call():
            response = await floor.litellm.acompletion(
                model="openai/m0", messages=MESSAGES, api_base=url, api_key="unused", max_retries=0
            )
        assert response.choices[0].message.content

    try:
        return await burst(one, reps)
    finally:
        await floor.litellm.close_litellm_async_clients()


async def gateway_calls(url: str, reps: int, profile: bool) -> Samples:
    from panel_cli.config import Defaults, Member
    from panel_cli.llm.gateway import Gateway

    events: list[Any] = []

    async def record(event: Any) -> None:
        events.append(event)

    gateway = Gateway(record, defaults=Defaults(concurrency=BURST + 56, retries=0))
    who = Member(name="m0", model="openai/m0", api_base=url)

    async def one(_i: int) -> None:
        result = await gateway.call(who, MESSAGES, stage="answer")
        assert result.ok, result.error

    try:
        samples = await burst(one, reps)
        if profile:
            await profile_burst(one)
        return samples
    finally:
        await gateway.aclose()


class _InlineExecutor(concurrent.futures.ThreadPoolExecutor):
    """Runs what is submitted at once, on the caller's thread. litellm hands the synchronous
    half of every call to the loop's default executor, which cProfile (one thread) misses."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting caller
            future.set_exception(exc)
        return future


async def profile_burst(one: Any) -> None:
    """cProfile one burst, in CPU time and with every thread's work on this one."""
    import cProfile
    import pstats

    asyncio.get_running_loop().set_default_executor(_InlineExecutor())
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    await asyncio.gather(*(one(i) for i in range(BURST)))
    await asyncio.sleep(0.2)  # let litellm's background tasks of the burst finish inside the profile
    profiler.disable()
    path = Path(tempfile.gettempdir()) / "panel-gateway-burst.prof"
    profiler.dump_stats(path)
    stats = pstats.Stats(profiler)
    stats.sort_stats("cumulative").print_stats(50)
    stats.sort_stats("tottime").print_stats(25)
    print(f"profile saved to {path} (python -m pstats {path})")


# Each in a new process of its own, in this order, with the name the table gives it.
CLIENTS = {
    "httpx": "raw httpx",
    "aiohttp": "raw aiohttp",
    OUT_OF_THE_BOX: f"acompletion, {FLOOR_NAMES[OUT_OF_THE_BOX]}",
    PANEL_SETUP: f"acompletion, {FLOOR_NAMES[PANEL_SETUP]}",
    "gateway": "Gateway.call",
}


async def client_bursts(client: str, url: str, reps: int, profile: bool) -> Samples:
    if client == "httpx":
        return await raw_httpx(url, reps)
    if client == "aiohttp":
        return await raw_aiohttp(url, reps)
    if client == "gateway":
        return await gateway_calls(url, reps, profile)
    return await litellm_alone(url, reps, client)


def client_child(client: str, url: str, profile: bool) -> None:
    """Child process: one client's bursts; prints their samples on its last line."""
    print(json.dumps(asyncio.run(client_bursts(client, url, BURST_REPS, profile))))


def client_samples(client: str, url: str, profile: bool) -> Samples:
    command = [sys.executable, __file__, "--client", client, "--url", url, *(["--profile"] if profile else [])]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=os.environ)
    if done.returncode != 0:
        raise SystemExit(f"{CLIENTS[client]} exited {done.returncode}: {done.stderr[-2000:]}")
    *printed, last = done.stdout.splitlines()
    if printed:  # the profile
        print("\n".join(printed))
    return [tuple(sample) for sample in json.loads(last)]  # type: ignore[misc]


def bench_throughput(profile: bool) -> dict[str, dict[str, float]]:
    server = ChildServer(__file__, "0.0")
    samples: dict[str, Samples] = {name: [] for name in CLIENTS}
    try:
        # Two rounds, in turn, so drift (other load on the machine) hits every client alike.
        for round_ in range(2):
            for client in CLIENTS:
                samples[client] += client_samples(client, server.url, profile and round_ == 1 and client == "gateway")
    finally:
        server.stop()
    return {
        name: {"rate": statistics.median(r for r, _ in runs), "cpu": statistics.median(c for _, c in runs)}
        for name, runs in samples.items()
    }


# -- report -----------------------------------------------------------------------------


def print_confer(rows: list[dict[str, Any]], load: tuple[float, float]) -> None:
    print(
        f"P1: confer, {STAGES} stages, the fake server answering each call after {STAGE_LATENCY:g} s; the server's span"
        f" (first request in to last reply out) / the nominal path ({STAGES} x {STAGE_LATENCY:g} s), median of"
        f" {CONFER_REPS}, panel (CLI, live view, streamed answers, store, redaction) and litellm alone in turn"
    )
    as_panel, plain = FLOOR_NAMES[PANEL_SETUP], FLOOR_NAMES[OUT_OF_THE_BOX]
    sizes = " / ".join(str(row["members"]) for row in rows)
    goals = " / ".join(f"{GOALS[row['members']]:.2f}" for row in rows)

    def figures(who: str, of: str = "") -> str:
        return " / ".join(f"{row[who] / (row[of] if of else 1):.3f}" for row in rows)

    print(
        f"  P1 at {sizes} members: panel {figures('panel')} (goals {goals});"
        f" {as_panel} {figures(PANEL_SETUP)}; {plain} {figures(OUT_OF_THE_BOX)}; load {load[0]:.1f}-{load[1]:.1f}"
    )
    print(f"  panel / {as_panel}: {figures('panel', PANEL_SETUP)}; panel / {plain}: {figures('panel', OUT_OF_THE_BOX)}")


def print_throughput(rates: dict[str, dict[str, float]], load: tuple[float, float]) -> None:
    print(
        f"{BURST} concurrent calls to an instant fake, median of {2 * BURST_REPS} bursts, each client in a process of its own"
    )
    print(f"  {'client':<42} {'calls/s':>8}  {'/ httpx':>7}  {'/ aiohttp':>9}  {'CPU ms/call':>11}")
    for client, name in CLIENTS.items():
        row = rates[client]
        print(
            f"  {name:<42} {row['rate']:>8.0f}  {row['rate'] / rates['httpx']['rate']:>7.2f}  "
            f"{row['rate'] / rates['aiohttp']['rate']:>9.2f}  {row['cpu']:>11.2f}"
        )
    gateway = rates["gateway"]
    for setup in (PANEL_SETUP, OUT_OF_THE_BOX):
        floor = rates[setup]
        print(
            f"  Gateway.call / acompletion, {FLOOR_NAMES[setup]}: {gateway['rate'] / floor['rate']:.2f} by rate,"
            f" {floor['cpu'] / gateway['cpu']:.2f} by CPU" + f"; load {load[0]:.1f}-{load[1]:.1f}"
        )
    own = gateway["cpu"] - rates[PANEL_SETUP]["cpu"]
    print(
        f"  the gateway's own CPU per call: {own:+.2f} ms above acompletion, {FLOOR_NAMES[PANEL_SETUP]}"
        f" (target <= 1 ms, as bench/percall.py's); Gateway.call / raw httpx {gateway['rate'] / rates['httpx']['rate']:.2f}"
        " by rate (target >= 0.80)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=("cold", "p1", "rate"), help="one figure alone")
    parser.add_argument(
        "--profile", action="store_true", help="also cProfile one burst of Gateway.call (CPU time, all threads)"
    )
    parser.add_argument("--serve", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--floor", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--members", type=int, default=3, help=argparse.SUPPRESS)
    parser.add_argument("--setup", choices=SETUPS, default=PANEL_SETUP, help=argparse.SUPPRESS)
    parser.add_argument("--client", choices=CLIENTS, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve)
        return
    if args.floor:
        floor(args.floor, args.members, args.setup)
        return
    if args.client:
        client_child(args.client, args.url, args.profile)
        return

    from importlib.metadata import version

    import httpx

    total = time.perf_counter()
    print(
        f"python {platform.python_version()} ({platform.python_implementation()}), litellm {version('litellm')}, "
        f"httpx {httpx.__version__}, {os.cpu_count()} cores, {platform.platform()}"
    )
    if args.only in (None, "cold"):
        cold = cold_start()
        print()
        print(
            f"cold start: import litellm {cold['import']:.2f} s, then load_litellm {cold['load_litellm']:.2f} s; first call"
            f" {cold['first_call']:.3f} s, then {cold['second_call']:.3f} s, {cold['third_call']:.3f} s (demo provider)"
        )
    if args.only in (None, "p1"):
        before = os.getloadavg()[0]
        rows = bench_confer()
        print()
        print_confer(rows, (before, os.getloadavg()[0]))
    if args.only in (None, "rate"):
        before = os.getloadavg()[0]
        rates = bench_throughput(args.profile)
        print()
        print_throughput(rates, (before, os.getloadavg()[0]))
    print()
    print(f"total bench time {time.perf_counter() - total:.0f} s")


if __name__ == "__main__":
    main()
