"""`panel history stats`: runs, calls, tokens and cost in all, by model, by protocol and by month;
an unknown price stays unknown, a demo persona's calls say they were free."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import typer

from panel_cli.cli.history import history_app
from panel_cli.events import CallFinished, MemberInfo, RunFinished
from tests.cli.test_history import days_ago, keep, keep_at
from tests.helpers import cli_ok
from tests.store.sample_runs import confer_run, run_started

app = typer.Typer()
app.add_typer(history_app, name="history")


def history(*args: str) -> str:
    return cli_ok("history", *args, columns=120)


def month_of(seconds: float) -> str:
    return time.strftime("%Y-%m", time.gmtime(seconds))


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Two confer runs (four calls each: gpt priced, claude not), one 40 days old, and a vote
    run whose single call has no token count."""
    path = tmp_path / "runs.db"
    keep_at(path, "old", confer_run("old"), days_ago(40, len(confer_run("x"))))
    keep(path, "new", confer_run("new"))
    voted = run_started("Which queue?").model_copy(
        update={"protocol": "vote", "panel": "queues", "members": [MemberInfo(name="gpt", model="openai/gpt-4o")]}
    )
    call = CallFinished(
        call_id="v1", member="gpt", model="openai/gpt-4o", stage="vote", text="RabbitMQ", cost=0.01, latency=1.0
    )
    keep(path, "queue", [voted, call, RunFinished(final_answer="RabbitMQ", result={"winner": "RabbitMQ"})])
    return path


def test_stats_json(db: Path) -> None:
    report = json.loads(history("stats", "--json", "--db", str(db)))
    claude = ["anthropic/claude"]
    assert report["total"] == {
        "runs": 3,
        "calls": 9,
        "tokens": 960,
        "cost": pytest.approx(0.02),
        "cost_basis": "partial",
        "unpriced": claude,
        "late": 0,
    }
    assert report["by_model"] == [
        {"runs": 2, "calls": 4, "tokens": 240, "cost": None, "model": "anthropic/claude"}
        | {"cost_basis": "unknown", "unpriced": claude, "late": 0},
        {"runs": 3, "calls": 5, "tokens": 720, "cost": pytest.approx(0.02), "model": "openai/gpt-4o"}
        | {"cost_basis": "known", "unpriced": [], "late": 0},
    ]
    assert report["by_protocol"] == [
        {"runs": 2, "calls": 8, "tokens": 960, "cost": pytest.approx(0.01), "protocol": "confer"}
        | {"cost_basis": "partial", "unpriced": claude, "late": 0},
        {"runs": 1, "calls": 1, "tokens": None, "cost": pytest.approx(0.01), "protocol": "vote"}
        | {"cost_basis": "known", "unpriced": [], "late": 0},
    ]
    now, then = month_of(time.time()), month_of(time.time() - 40 * 86400)
    assert [(row["month"], row["runs"], row["calls"]) for row in report["by_month"]] == [(then, 1, 4), (now, 2, 5)]


def test_stats_tables(db: Path) -> None:
    lines = [line.rstrip() for line in history("stats", "--db", str(db)).splitlines()]
    assert lines[0] == f"{db}: 3 runs · 9 calls · 960 tokens · cost at least $0.0200 (no price: anthropic/claude)"
    assert lines[2] == "By model"
    assert lines[3].split() == ["model", "runs", "calls", "tokens", "cost"]
    assert lines[4].split() == ["anthropic/claude", "2", "4", "240", "—"], "an unknown price is never $0"
    assert lines[5].split() == ["openai/gpt-4o", "3", "5", "720", "$0.0200"]
    protocol = lines.index("By protocol")
    assert lines[protocol + 2].split()[:7] == ["confer", "2", "8", "960", "at", "least", "$0.0100"]
    assert lines[protocol + 2].split()[-1] == "anthropic/claude)", "the models of no price are named"
    assert lines[protocol + 3].split() == ["vote", "1", "1", "—", "$0.0100"]
    month = lines.index("By month")
    assert [line.split()[0] for line in lines[month + 2 :]] == [
        month_of(time.time() - 40 * 86400),
        month_of(time.time()),
    ]


def test_demo_personas_are_free(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    started = run_started().model_copy(update={"members": [MemberInfo(name="sage", model="demo/sage")]})
    call = CallFinished(
        call_id="d1", member="sage", model="demo/sage", stage="answer", round=0, text="[simulated] yes", latency=0.1
    )
    keep(path, "demo", [started, call, RunFinished(final_answer="[simulated] yes")])
    text = history("stats", "--db", str(path))
    assert text.splitlines()[0].endswith("cost simulated, free")
    assert any(
        line.startswith("demo/sage ") and line.rstrip().endswith("simulated, free") for line in text.splitlines()
    )


def test_stats_of_an_empty_store(tmp_path: Path) -> None:
    path = tmp_path / "none.db"
    assert history("stats", "--db", str(path)) == f"No runs yet in {path}.\n"
    assert json.loads(history("stats", "--json", "--db", str(path)))["total"]["runs"] == 0
    assert not path.exists(), "reading never creates the file"
