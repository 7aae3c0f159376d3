"""Shared test setup: fake-server fixtures, an isolated, offline environment, and the check
that every test starting a process is marked `subprocess`."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.warm_panel import STARTED_EVENT

pytest_plugins = ["tests.fakes.fixtures"]


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Keep every test offline, instant and away from the user's real config and data."""
    monkeypatch.setenv("PANEL_DEMO_DELAY", "0")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("LITELLM_OFFLINE_MODE", "True")
    config_dir = tmp_path / "panel-config"
    config_dir.mkdir()
    monkeypatch.setenv("PANEL_CONFIG_DIR", str(config_dir))
    monkeypatch.setenv("PANEL_DB", str(tmp_path / "panel.db"))


# -- every test that starts a process says so ---------------------------------------------------

# The audit events (docs.python.org/3/library/audit_events.html) every way of starting a
# process raises: subprocess and asyncio (through subprocess.Popen), os.fork, posix_spawn,
# exec, system; and the warm panel's own, for a process it forks on a test's behalf.
PROCESS_STARTS = frozenset(
    {"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.exec", "os.spawn", "os.system", STARTED_EVENT}
)
_started: list[str] = []


def _hear_process_starts(event: str, args: tuple[Any, ...]) -> None:
    """An audit hook, so it sees a process started anywhere: the test, a fixture, panel's
    own code run in-process (a tool server) or a library. It must stay this cheap: it is
    called for every audited event in the worker."""
    if event in PROCESS_STARTS:
        _started.append(event)


# The OpenAI SDK litellm calls asks `platform.processor()` once per process, which runs `uname -p`:
# asked here, before any test, it is cached, so whichever test first calls a model in-process does
# not start a process it never asked for.
platform.processor()
sys.addaudithook(_hear_process_starts)


def pytest_runtest_setup(item: pytest.Item) -> None:
    _started.clear()  # a process started while collecting is no test's


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Fail a test (its setup, call or teardown) that started a process without the
    `subprocess` mark, so `pytest -m subprocess` and `-m 'not subprocess'` split the suite
    where they say they do."""
    report = yield
    if _started and item.get_closest_marker("subprocess") is None and report.passed:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} started a process ({', '.join(sorted(set(_started)))}) but is not marked: "
            "add @pytest.mark.subprocess (or `pytestmark = pytest.mark.subprocess` for a whole module)."
        )
        _started.clear()
    return report


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker per core this process may run on. The suite is bound by CPU, not by
    waiting: on 2 cores, two workers took 4 m 06 s of wall and 6 m 36 s of CPU, four took 5 m 52 s
    and 10 m 34 s (each worker imports panel and litellm and keeps a warm panel of its own, and
    four contend for two cores)."""
    return len(os.sched_getaffinity(0))
