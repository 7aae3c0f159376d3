"""The HTML export in a real browser: headless Chromium renders each protocol's report (its
DOM dumped, and a screenshot taken), and the hostile report fetches nothing from the trap
server its model text points at, holds no key, and runs no script.

`.ci/run` installs Debian's `chromium`; where it is absent these tests skip and say why.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.export.conftest import HOSTILE_QUESTION, KEY, PROTOCOLS, DemoRuns, HostileRuns, export, show_json
from tests.export.dom import Node, parse

CHROMIUM = shutil.which("chromium")
pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/run installs Debian's chromium)"),
    pytest.mark.subprocess,
]

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
]
WIDTH, HEIGHT = 1200, 2000


@dataclass(frozen=True)
class Rendered:
    source: str
    dom: Node
    dom_text: str
    screenshot: Path


def chromium(folder: Path, *args: str) -> str:
    """One headless Chromium with a profile of its own, so renders can run side by side."""
    assert CHROMIUM is not None
    profile = folder / f"profile-{len(list(folder.glob('profile-*')))}"
    done = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def render(page: Path) -> Rendered:
    folder = page.parent
    dom = chromium(folder, "--dump-dom", page.as_uri())
    screenshot = folder / f"{page.stem}.png"
    chromium(folder, f"--window-size={WIDTH},{HEIGHT}", f"--screenshot={screenshot}", page.as_uri())
    return Rendered(page.read_text(encoding="utf-8"), parse(dom), dom, screenshot)


@pytest.fixture(scope="module")
def rendered(
    demo_runs: DemoRuns, hostile_runs: HostileRuns, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Rendered]:
    """Every protocol's report, the hostile ones and a control page, rendered four at a time."""
    pages: dict[str, Path] = {}
    for name, db, run_id in [
        *((protocol, demo_runs.db, demo_runs.ids[protocol]) for protocol in PROTOCOLS),
        *((f"hostile-{protocol}", hostile_runs.db, run_id) for protocol, run_id in hostile_runs.ids.items()),
    ]:
        folder = tmp_path_factory.mktemp(name)
        pages[name] = folder / "report.html"
        export(db, run_id, "--format", "html", "-o", str(pages[name]))
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(pages, pool.map(render, pages.values()), strict=True))


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def check_confer(page: Node, stored: dict) -> None:
    for chart, entry in zip(page.select("figure.tally"), stored["result"]["rounds"], strict=True):
        winner = chart.one("tr.winner")
        assert entry["winner"] in winner.text and winner.one("rect.fill").attrs["width"] == "100.00%"


def check_council(page: Node, stored: dict) -> None:
    assert len(page.select("figure.aggregate svg.bar")) == len(stored["result"]["aggregate_ranking"])
    assert len(page.select("figure.bias line.marker")) == 2


def check_ensemble(page: Node, stored: dict) -> None:
    assert stored["result"]["chosen"] in page.one("figure.tally tr.winner").text


def check_vote(page: Node, stored: dict) -> None:
    assert len(page.select("figure.runoff thead th")) == 1 + len(stored["result"]["rounds"])
    assert len(page.select("figure.runoff line.half")) == sum(
        len(entry["counts"]) for entry in stored["result"]["rounds"]
    )


def check_decide(page: Node, stored: dict) -> None:
    assert any(f"chose {stored['result']['winner']}" in node.text for node in page.select("p.outcome-line"))


def check_delphi(page: Node, stored: dict) -> None:
    assert len(page.select("figure.delphi svg.dot")) == len(stored["result"]["experts"]) * len(
        stored["result"]["rounds"]
    )


def check_supervise(page: Node, stored: dict) -> None:
    assert len(page.select("figure.verdicts svg.dot")) == len(stored["result"]["workers"]) * len(
        stored["result"]["rounds"]
    )


def check_orchestrate(page: Node, stored: dict) -> None:
    assert (
        len(page.select(".tree li")) == len(page.select("figure.timeline rect.span")) == len(stored["result"]["plan"])
    )


CHECKS = {
    "confer": check_confer,
    "council": check_council,
    "ensemble": check_ensemble,
    "vote": check_vote,
    "decide": check_decide,
    "delphi": check_delphi,
    "supervise": check_supervise,
    "orchestrate": check_orchestrate,
}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_each_protocol_renders(protocol: str, rendered: dict[str, Rendered], demo_runs: DemoRuns) -> None:
    stored = show_json(demo_runs.db, demo_runs.ids[protocol])
    page = rendered[protocol].dom
    assert page.one("h1.question").text == stored["question"]
    assert " ".join(stored["final_answer"].split())[:40] in " ".join(page.one("#final-answer .markdown").text.split())
    assert len(page.select("#calls tbody tr")) == stored["calls"]
    assert page.select("svg.bar") or page.select("svg.dot"), "the charts are drawn"
    assert not page.select("script")
    CHECKS[protocol](page, stored)
    assert png_size(rendered[protocol].screenshot) == (WIDTH, HEIGHT)
    assert rendered[protocol].screenshot.stat().st_size > 20_000, "a page, not a blank"


def test_the_hostile_report_fetches_nothing_runs_nothing_and_holds_no_key(
    rendered: dict[str, Rendered], hostile_runs: HostileRuns
) -> None:
    for name in ("hostile-council", "hostile-vote"):
        page = rendered[name].dom
        assert page.one("h1.question").text == HOSTILE_QUESTION
        assert not [
            node for node in page.elements() if node.tag in ("script", "img", "iframe", "link", "object", "embed")
        ]
        assert not [node for node in page.elements() if any(attribute.startswith("on") for attribute in node.attrs)]
        assert KEY not in rendered[name].dom_text and KEY not in rendered[name].source
    answer = rendered["hostile-council"].dom.one("#final-answer .markdown")
    assert answer.text.startswith('<script>alert("owned")</script>')
    assert hostile_runs.trap.requests == [], "the browser fetched what a model pointed at"


def test_the_trap_would_catch_a_fetch(hostile_runs: HostileRuns, tmp_path: Path) -> None:
    """The control: the same browser does fetch an image the page itself holds."""
    page = tmp_path / "control.html"
    page.write_text(f'<!doctype html><img src="{hostile_runs.trap.url}/control.png">', encoding="utf-8")
    chromium(tmp_path, "--dump-dom", page.as_uri())
    assert "/control.png" in hostile_runs.trap.requests
    hostile_runs.trap.requests.remove("/control.png")
