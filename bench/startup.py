"""What starting `panel` costs, against floors that come from outside our code.

Run by hand (never part of the tests), from the repository root, in the project's venv:

    python bench/startup.py                    # all three figures, about two minutes
    python bench/startup.py --help-runs 20 --request-runs 10
    git archive main | tar -x -C /tmp/before   # an earlier checkout, to measure figure 3 against
    python bench/startup.py --only demo --before /tmp/before

Figures:
  1. `panel --help`: the CPU time (user + sys of the child, from os.wait4) of `panel --help`
     divided by that of a minimal two-command Typer app with Rich help and no completion
     options (`add_completion=False`: the least a Typer CLI costs; `typer_floor.py`,
     written to a temp folder), the floor for any Typer CLI. Median of --help-runs runs of
     each, interleaved. Target <= 1.3.
  2. `panel confer` to its first request: the wall time from spawning `panel confer` (a
     3-member panel at the fake server, --json, a dummy OPENAI_API_KEY) to the first request
     reaching the server, divided by the wall time from spawning a Python that loads litellm
     as panel does (panel's own `load_litellm`, bench/floors.py: its settings, the import
     with the garbage collector off, then frozen) to the end of that: every command that
     calls a model pays it. The floor program imports the libraries panel's gateway module
     needs and litellm needs too, then panel's gateway module, then calls `load_litellm`; the
     time importing the gateway module (panel's own modules) is left out of the floor. Beside
     it, the same against `python -c "import litellm"` to the end of its import (litellm out
     of the box: the collector runs through the import), as before. The children's exits are
     left out (litellm's exit handlers add about a second, which would flatter the ratio);
     the ratio against `import litellm` to its exit is printed too. Median of --request-runs
     runs of each, in turn. Target <= 1.10.
  3. The demo: the CPU time of `panel confer configs/demo.yaml --json` (every member a demo
     persona, PANEL_DEMO_DELAY=0) divided by that of `panel --help`, and by that of the
     minimal Typer app of figure 1. The first thing a new user runs should cost little more
     than asking for help, so a run of demo personas alone must not import litellm. Median
     of --demo-runs runs of each, in turn. Target (÷ `panel --help`) <= 2.5.
     With --before DIR, the same two commands are also run as `python -m panel_cli` from DIR,
     an earlier checkout (its own panel_cli package comes first on the path there), in turn
     with ours, so a change is measured before and after under the same load.

Both run the programs as a person does: `panel` is the console script beside this Python
(`python -m panel_cli` when there is none), in a fresh process each time, with the same
offline litellm settings as the tests.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.fakes.openai_server import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BENCH = Path(__file__).resolve().parent
from floors import FLOOR_NAMES, OUT_OF_THE_BOX, PANEL_SETUP, TYPER_FLOOR  # noqa: E402  (beside this script)

PANEL_FILE = """\
name: startup
protocol: confer
question: Which is better?
members:
  - {{name: a, model: openai/a, api_base: "{url}"}}
  - {{name: b, model: openai/b, api_base: "{url}"}}
  - {{name: c, model: openai/c, api_base: "{url}"}}
max_rounds: 1
defaults: {{retries: 0}}
"""


DEMO_PANEL = ROOT / "configs" / "demo.yaml"


def panel_command() -> list[str]:
    script = Path(sys.executable).parent / "panel"
    return [str(script)] if script.exists() else [sys.executable, "-m", "panel_cli"]


def environment(folder: Path) -> dict[str, str]:
    """As an installed panel runs: with bytecode. A shell that sets PYTHONDONTWRITEBYTECODE
    would have panel's modules compiled again on every run, and not the floor app's one file."""
    return {
        **{key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"},
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_OFFLINE_MODE": "True",
        "OPENAI_API_KEY": "fake-dummy-bench-key",
        "PANEL_DB": str(folder / "bench.db"),
        "PANEL_CONFIG_DIR": str(folder),
        "COLUMNS": "100",
    }


def cpu_seconds(command: list[str], env: dict[str, str], cwd: Path = ROOT) -> float:
    """user + sys CPU of one child process, as the kernel accounted it."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(command)} failed")
    return usage.ru_utime + usage.ru_stime


def bench_help(runs: int, folder: Path) -> dict[str, float]:
    floor = folder / "typer_floor.py"
    floor.write_text(TYPER_FLOOR)
    env = environment(folder)
    panel: list[float] = []
    typer_app: list[float] = []
    for _ in range(runs):
        panel.append(cpu_seconds([*panel_command(), "--help"], env))
        typer_app.append(cpu_seconds([sys.executable, str(floor), "--help"], env))
    return {"panel": statistics.median(panel), "typer": statistics.median(typer_app)}


def import_seconds(env: dict[str, str]) -> tuple[float, float]:
    """From spawning `python -c "import litellm"` to the end of the import, and to the
    process's exit. The child reads the same system-wide monotonic clock as this process
    at the end of its import. The exit is not part of the floor: litellm's exit handlers
    and the teardown of its objects take about a second after the import."""
    code = "import litellm, time; print(time.monotonic())"
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env, cwd=ROOT)
    exited = time.monotonic()
    return float(result.stdout.split()[-1]) - started, exited - started


# What the floor of figure 2 imports first: every module that both panel's gateway module and
# litellm import (the libraries they share, pydantic's among them), so that the time it then
# spends importing the gateway module is panel's own modules alone.
LISTED_MODULES = (
    "import sys; before = set(sys.modules); {imports}; print(' '.join(m for m in sys.modules if m not in before))"
)
GATEWAY_IMPORT = f"sys.path.insert(0, {str(BENCH)!r}); from floors import panel_setup; panel_setup()"
AS_PANEL_LOADS = """\
import importlib, sys, time
for name in {shared!r}:
    try:
        importlib.import_module(name)
    except Exception:  # a module only importable as its package's part: loaded with that
        pass
sys.path.insert(0, {bench!r})
started = time.monotonic()
from floors import panel_setup
load_litellm, _ = panel_setup()
imported = time.monotonic()
load_litellm()
print(imported - started, time.monotonic())
"""


def shared_modules(env: dict[str, str]) -> list[str]:
    """The modules panel's gateway module and `import litellm` both load, in the gateway's order."""

    def loaded(imports: str) -> list[str]:
        code = LISTED_MODULES.format(imports=imports)
        return subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env, cwd=ROOT
        ).stdout.split()

    litellm = set(loaded("import litellm"))
    return [name for name in loaded(GATEWAY_IMPORT) if name in litellm and not name.startswith("_")]


def as_panel_loads_seconds(env: dict[str, str], shared: list[str]) -> float:
    """From spawning a Python that loads litellm with panel's `load_litellm` to the end of that,
    less the time it spent importing panel's gateway module (the libraries it shares with
    litellm imported before, so that time is panel's own modules')."""
    code = AS_PANEL_LOADS.format(shared=shared, bench=str(BENCH))
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env, cwd=ROOT)
    own, loaded = (float(figure) for figure in result.stdout.split()[-2:])
    return loaded - started - own


def first_request_seconds(server: FakeOpenAIServer, panel_file: Path, env: dict[str, str]) -> float:
    """From spawning `panel confer` to the first request's arrival at the fake server
    (both on this process's monotonic clock). The run is left to finish."""
    server.requests.clear()
    command = [*panel_command(), "confer", str(panel_file), "--json"]
    started = time.monotonic()
    result = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    if result.returncode not in (0, 1) or not server.requests:
        raise RuntimeError(f"panel confer failed ({result.returncode}): {result.stderr.strip()}")
    return min(request.received_at for request in server.requests) - started


def bench_first_request(runs: int, folder: Path) -> dict[str, float]:
    from tests.fakes.openai_server import FakeOpenAIServer

    env = environment(folder)
    shared = shared_modules(env)
    with FakeOpenAIServer() as server:
        panel_file = folder / "startup.yaml"
        panel_file.write_text(PANEL_FILE.format(url=server.url))
        first: list[float] = []
        as_panel: list[float] = []
        imported: list[float] = []
        exited: list[float] = []
        for _ in range(runs):
            first.append(first_request_seconds(server, panel_file, env))
            as_panel.append(as_panel_loads_seconds(env, shared))
            done, gone = import_seconds(env)
            imported.append(done)
            exited.append(gone)
    return {
        "first_request": statistics.median(first),
        PANEL_SETUP: statistics.median(as_panel),
        OUT_OF_THE_BOX: statistics.median(imported),
        "import_litellm_exit": statistics.median(exited),
    }


def bench_demo(runs: int, folder: Path, before: Path | None) -> dict[str, dict[str, float]]:
    """CPU of the demo confer and of `panel --help`, for this checkout and, with `before`, for
    that one, and of the minimal Typer app: one run of each command at a time, in turn, so
    all see the same load."""
    env = {**environment(folder), "PANEL_DEMO_DELAY": "0"}
    floor = folder / "typer_floor.py"
    floor.write_text(TYPER_FLOOR)
    module = [sys.executable, "-m", "panel_cli"]
    checkouts = {"this checkout": (panel_command(), ROOT), **({"--before": (module, before)} if before else {})}
    cpu: dict[str, dict[str, list[float]]] = {name: {"demo": [], "help": [], "typer": []} for name in checkouts}
    for _ in range(runs):
        for name, (panel, cwd) in checkouts.items():
            cpu[name]["demo"].append(cpu_seconds([*panel, "confer", str(DEMO_PANEL), "--json"], env, cwd))
            cpu[name]["help"].append(cpu_seconds([*panel, "--help"], env, cwd))
            cpu[name]["typer"].append(cpu_seconds([sys.executable, str(floor), "--help"], env))
    return {name: {key: statistics.median(found) for key, found in runs_of.items()} for name, runs_of in cpu.items()}


def print_help(runs: int, cpu: dict[str, float], load: tuple[float, float]) -> None:
    print()
    print(f"1. --help CPU (user+sys), median of {runs} runs of each in turn")
    print(f"   panel --help      {cpu['panel'] * 1000:7.1f} ms")
    print(f"   Typer floor       {cpu['typer'] * 1000:7.1f} ms")
    print(
        f"   panel --help CPU / a minimal two-command Typer app {cpu['panel'] / cpu['typer']:.2f} (target <= 1.30);"
        f" load {load[0]:.1f}-{load[1]:.1f}"
    )


def print_request(runs: int, request: dict[str, float], load: tuple[float, float]) -> None:
    first = request["first_request"]
    print()
    print(f"2. start to first request, wall, median of {runs} runs of each in turn")
    print(f"   panel confer (3 members) to its first request                   {first:6.2f} s")
    print(
        f"   a new Python to litellm loaded by load_litellm (panel's modules' import left out) {request[PANEL_SETUP]:6.2f} s"
    )
    print(f"   python -c 'import litellm' to import done                       {request[OUT_OF_THE_BOX]:6.2f} s")
    print(
        f"   panel confer to its first request / {FLOOR_NAMES[PANEL_SETUP]} {first / request[PANEL_SETUP]:.2f}"
        f" (target <= 1.10); / {FLOOR_NAMES[OUT_OF_THE_BOX]} {first / request[OUT_OF_THE_BOX]:.2f};"
        f" load {load[0]:.1f}-{load[1]:.1f}"
    )
    print(
        f"   (python -c 'import litellm' to its exit: {request['import_litellm_exit']:.2f} s; "
        f"ratio {first / request['import_litellm_exit']:.2f} against that)"
    )


def print_demo(runs: int, figures: dict[str, dict[str, float]], load: tuple[float, float]) -> None:
    print()
    print(f"3. demo confer CPU (user+sys), median of {runs} runs of each in turn")
    for name, cpu in figures.items():
        print(
            f"   {name:16} demo confer {cpu['demo'] * 1000:7.1f} ms, panel --help {cpu['help'] * 1000:6.1f} ms,"
            f" Typer floor {cpu['typer'] * 1000:6.1f} ms"
        )
        print(
            f"   {name:16} demo confer CPU / panel --help {cpu['demo'] / cpu['help']:.2f} (target <= 2.50);"
            f" / a minimal two-command Typer app {cpu['demo'] / cpu['typer']:.2f}; load {load[0]:.1f}-{load[1]:.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--help-runs", type=int, default=15, help="runs of each program for figure 1 (>= 10)")
    parser.add_argument("--request-runs", type=int, default=7, help="runs of each program for figure 2 (>= 5)")
    parser.add_argument("--demo-runs", type=int, default=7, help="runs of each program for figure 3 (>= 5)")
    parser.add_argument("--before", type=Path, help="figure 3 also for the earlier checkout in this folder")
    parser.add_argument("--only", choices=["help", "request", "demo"], help="one figure alone")
    args = parser.parse_args()
    if args.help_runs < 10 or args.request_runs < 5 or args.demo_runs < 5:
        parser.error("at least 10 runs for figure 1 and 5 for figures 2 and 3: a median of fewer is noise")

    from importlib.metadata import version

    print(
        f"python {platform.python_version()}, typer {version('typer')}, rich {version('rich')}, "
        f"litellm {version('litellm')}, {os.cpu_count()} cores, {platform.platform()}"
    )
    print(f"panel is run as: {' '.join(panel_command())}")
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        if args.only in (None, "help"):
            before = os.getloadavg()[0]
            cpu = bench_help(args.help_runs, folder)
            print_help(args.help_runs, cpu, (before, os.getloadavg()[0]))
        if args.only in (None, "request"):
            before = os.getloadavg()[0]
            request = bench_first_request(args.request_runs, folder)
            print_request(args.request_runs, request, (before, os.getloadavg()[0]))
        if args.only in (None, "demo"):
            before = os.getloadavg()[0]
            demo = bench_demo(args.demo_runs, folder, args.before)
            print_demo(args.demo_runs, demo, (before, os.getloadavg()[0]))


if __name__ == "__main__":
    main()
