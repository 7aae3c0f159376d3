"""Runs to export, made once per session in-process: one of each protocol with the demo provider
(`configs/*.yaml`), and hostile ones against the fake server with a key set; and the helpers
that export them through the real command."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAIServer, RecordedRequest, error, responder
from tests.helpers import cli

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = {
    "confer": "demo.yaml",
    "council": "council.yaml",
    "ensemble": "ensemble.yaml",
    "vote": "vote.yaml",
    "decide": "decide.yaml",
    "delphi": "delphi.yaml",
    "supervise": "supervise.yaml",
    "orchestrate": "orchestrate.yaml",
}
PROTOCOLS = list(CONFIGS)
OFFLINE = {"PANEL_DEMO_DELAY": "0", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "True"}


@dataclass(frozen=True)
class DemoRuns:
    db: Path
    ids: dict[str, str]


@pytest.fixture(scope="session")
def demo_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoRuns]:
    """Every protocol's demo panel run once into one database, as a user would run it."""
    folder = tmp_path_factory.mktemp("export-demo")
    db = folder / "runs.db"
    (folder / "config").mkdir()
    ids: dict[str, str] = {}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {**OFFLINE, "PANEL_CONFIG_DIR": str(folder / "config"), "PANEL_DB": str(db)}.items():
            patch.setenv(name, value)
        for protocol, config in CONFIGS.items():
            outcome = cli("run", str(ROOT / "configs" / config), "--json", "--db", str(db))
            assert outcome.exit_code == 0, outcome.output
            ids[protocol] = json.loads(outcome.stdout)["run_id"]
    yield DemoRuns(db, ids)


def export(db: Path, run_id: str, *args: str) -> str:
    """`panel history export` in-process; its stdout."""
    outcome = cli("history", "export", run_id, "--db", str(db), *args, catch_exceptions=False)
    assert outcome.exit_code == 0, outcome.output
    return outcome.stdout


def show_json(db: Path, run_id: str) -> dict[str, Any]:
    outcome = cli("history", "show", run_id, "--db", str(db), "--json", catch_exceptions=False)
    assert outcome.exit_code == 0, outcome.output
    return json.loads(outcome.stdout)


# Hostile runs -----------------------------------------------------------------------------------

KEY = "fake-export-Zx81Qm4Lp0Rt7Wv2Ty5U"
HOSTILE_NAMES = ["<script>alert(1)</script>", "[/bold] </svg>", "a|b *c*"]
HOSTILE_QUESTION = '</svg><script>alert("q")</script> [/bold] <b>which</b> *one*?'
HOSTILE_OPTIONS = ["<script>alert(1)</script>", "[/bold]", "</svg> & <b>bold</b>"]


class Trap:
    """A web server on 127.0.0.1 that counts what is asked of it: model text points every
    link, image, frame and stylesheet here, so a browser that fetched any would be caught."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        trap = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                trap.requests.append(self.path)
                self.send_response(404)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Trap:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def hostile_text(trap: str) -> str:
    """Everything a model could write to break out of its place in a page or a terminal."""
    return (
        '<script>alert("owned")</script> </svg><svg onload="alert(2)"></svg> [/bold] [bold red]loud[/] '
        f'<img src="{trap}/raw.png"> <iframe src="{trap}/frame"></iframe> <style>body{{display:none}}</style> '
        f'<link rel="stylesheet" href="{trap}/sheet.css"> <div style="background:url({trap}/bg.png)">div</div> a | pipe *star*'
    )


def hostile_answer(trap: str) -> str:
    return (
        f"{hostile_text(trap)}\n\n![pixel]({trap}/pixel.png) [run me](javascript:alert(3)) [the docs]({trap}/docs)\n\n"
        "## Plan\n\n- first `<b>in code</b>`\n- second\n\n```html\n<script>in a fence</script>\n```\n"
    )


def hostile_member(trap: str) -> Callable[[RecordedRequest], str]:
    """Answers, reviews (ranking every label shown) and a synthesis, each hostile, each
    echoing the key the request carried."""

    def reply(request: RecordedRequest) -> str:
        prompt = str(request.messages[-1]["content"])
        tasks = re.findall(r"\[panel-task: ([a-z.]+)\]", prompt)
        echo = f" (sent with {request.headers.get('authorization')})"
        if tasks and tasks[-1] == "council.synthesis":
            return hostile_answer(trap) + echo
        if tasks and tasks[-1] == "council.review":
            labels = re.findall(r"^=== Model ([A-Z]+) \[[0-9a-f]{8}\] ===$", prompt, re.MULTILINE)
            return hostile_text(trap) + echo + "\n\nFINAL RANKING: " + ", ".join(f"Model {label}" for label in labels)
        return hostile_text(trap) + echo

    return reply


@dataclass(frozen=True)
class HostileRuns:
    db: Path
    ids: dict[str, str]
    trap: Trap


@pytest.fixture(scope="session")
def hostile_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostileRuns]:
    """With OPENAI_API_KEY set: a council against the fake server whose members have hostile
    names and echo their key in hostile text, a vote with hostile options, and a confer whose
    votes all fall back and whose one member is refused; the key is unset again before
    anything is exported."""
    folder = tmp_path_factory.mktemp("export-hostile")
    db = folder / "runs.db"
    (folder / "config").mkdir()
    ids: dict[str, str] = {}
    with Trap() as trap, FakeOpenAIServer() as server, pytest.MonkeyPatch.context() as patch:
        for name, value in {
            **OFFLINE,
            "PANEL_CONFIG_DIR": str(folder / "config"),
            "PANEL_DB": str(db),
            "OPENAI_API_KEY": KEY,
        }.items():
            patch.setenv(name, value)
        server.default(responder(hostile_member(trap.url)))
        members = "".join(
            f'  - name: "{name}"\n    model: openai/m{index}\n    api_base: {server.url}\n'
            for index, name in enumerate(HOSTILE_NAMES)
        )
        panel = folder / "council.yaml"
        panel.write_text(
            f'name: "<i>panel</i> [/bold]"\nprotocol: council\nmembers:\n{members}chairman: "{HOSTILE_NAMES[2]}"\n'
        )
        outcome = cli("council", str(panel), "-q", HOSTILE_QUESTION, "--json", "--db", str(db))
        assert outcome.exit_code == 0, outcome.output
        assert any(KEY in str(request.headers) for request in server.requests), "the key was really sent"
        ids["council"] = json.loads(outcome.stdout)["run_id"]
        outcome = cli(
            "vote",
            "--options",
            *HOSTILE_OPTIONS,
            "--demo",
            "--method",
            "ranked_choice",
            "-q",
            HOSTILE_QUESTION,
            "--json",
            "--db",
            str(db),
        )
        assert outcome.exit_code == 0, outcome.output
        ids["vote"] = json.loads(outcome.stdout)["run_id"]
        # confer: no reply is a structured vote (each member keeps its own answer), and m1's key
        # is refused, so it fails once and is skipped after.
        server.script("m1", error(401, f"Incorrect API key provided: {KEY}."))
        members = "".join(
            f"  - name: {name}\n    model: openai/{name}\n    api_base: {server.url}\n" for name in ("m0", "m1", "m2")
        )
        panel = folder / "confer.yaml"
        panel.write_text(f"name: fallbacks\nprotocol: confer\nmax_rounds: 1\nmembers:\n{members}")
        outcome = cli("confer", str(panel), "-q", HOSTILE_QUESTION, "--json", "--db", str(db))
        assert outcome.exit_code == 0, outcome.output
        ids["confer"] = json.loads(outcome.stdout)["run_id"]
        assert not server.errors, server.errors
        yield HostileRuns(db, ids, trap)
