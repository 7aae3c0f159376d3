"""`panel estimate FILE` and `--dry-run` as a user runs them (in process): no request reaches a
model, nothing is stored, no key is needed, and an unknown price makes the total "at least"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from panel_cli.errors import UserError
from tests.fakes.openai_server import FakeOpenAIServer, reply
from tests.helpers import cli, cli_ok, write_panel


def estimate_panel(path: Path, server: FakeOpenAIServer, *extra: str, model: str = "openai/{name}") -> Path:
    """Members ann and bob on the fake server, asking which database."""
    return write_panel(path, server, ["ann", "bob"], "question: Which database?", *extra, model=model)


def test_estimate_json_calls_nothing_and_says_the_price_is_unknown(fake_server, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    data = json.loads(
        cli_ok(
            "estimate",
            str(estimate_panel(tmp_path / "p.yaml", fake_server, "protocol: confer", "max_rounds: 2")),
            "--json",
        )
    )
    assert fake_server.requests == []
    assert not Path(tmp_path / "panel.db").exists()
    assert (data["protocol"], data["calls_low"], data["calls_high"]) == ("confer", 4, 6)
    assert [stage["stage"] for stage in data["stages"]] == ["answer", "vote"]
    assert data["unpriced"] == ["openai/ann", "openai/bob"]
    assert (data["cost_low"], data["cost_high"], data["complete"]) == (None, None, False)
    assert data["models"][0]["output_limit"] == "4,096 (assumed: not in litellm's table)"


def test_dry_run_on_a_protocol_command_prints_the_table_and_stores_nothing(fake_server, tmp_path):
    panel = estimate_panel(tmp_path / "p.yaml", fake_server)
    out = cli_ok("council", str(panel), "--dry-run", "-q", "Tea or coffee?")
    assert fake_server.requests == []
    assert not Path(tmp_path / "panel.db").exists()
    assert "Estimate: council, panel fake, 2 members (no model called)" in out
    assert "unknown" in out and "No price in litellm's table for openai/ann, openai/bob" in out


def test_priced_models_add_up(fake_server, tmp_path):
    panel = estimate_panel(
        tmp_path / "p.yaml",
        fake_server,
        "protocol: vote",
        "options: [x, y]",
        "defaults: {max_tokens: 100}",
        model="openai/gpt-4o-mini",
    )
    data = json.loads(cli_ok("run", str(panel), "--dry-run", "--json"))
    assert fake_server.requests == []
    assert data["complete"] is True and data["unpriced"] == []
    (vote,) = data["stages"]
    line = vote["calls"][0]
    assert line["prompt_tokens_low"] == line["prompt_tokens_high"] > 0  # a ballot quotes nothing
    assert line["cost_low"] == pytest.approx(line["prompt_tokens_low"] * 0.15e-6)
    assert line["cost_high"] == pytest.approx(line["prompt_tokens_low"] * 0.15e-6 + 100 * 0.6e-6)
    assert data["cost_high"] == pytest.approx(2 * line["cost_high"])
    assert data["models"] == [
        {
            "model": "openai/gpt-4o-mini",
            "calls_low": 2,
            "calls_high": 2,
            "input_per_million": pytest.approx(0.15),
            "output_per_million": pytest.approx(0.6),
            "cost_low": pytest.approx(data["cost_low"]),
            "cost_high": pytest.approx(data["cost_high"]),
            "output_limit": "100 (max_tokens)",
        }
    ]


def test_demo_is_free(tmp_path):
    out = cli_ok("estimate", "configs/council.yaml", "--demo", "-q", "Tea or coffee?")
    assert "free" in out and "at least" not in out and "Demo personas are simulated and cost nothing." in out


def test_attachments_are_counted(fake_server, tmp_path):
    panel = estimate_panel(tmp_path / "p.yaml", fake_server, "protocol: ensemble")
    notes = tmp_path / "notes.txt"
    notes.write_text("word " * 500)
    bare = json.loads(cli_ok("estimate", str(panel), "--json"))
    attached = json.loads(cli_ok("estimate", str(panel), "--json", "--attach", str(notes)))
    grown = attached["stages"][0]["calls"][0]["prompt_tokens_low"] - bare["stages"][0]["calls"][0]["prompt_tokens_low"]
    assert 500 <= grown < 600


def test_a_follow_ups_dry_run_counts_the_earlier_turn(fake_server, tmp_path):
    """A follow-up sends the earlier question and answer with every call, so its estimate counts them."""
    earlier = "word " * 300
    fake_server.default(reply(earlier))
    panel = estimate_panel(tmp_path / "p.yaml", fake_server, "protocol: ensemble")
    db = str(tmp_path / "runs.db")
    first = json.loads(cli_ok("ensemble", str(panel), "--json", "--db", db))
    words = first["final_answer"].count("word")  # every member's answer, as ensemble's default mode joins them
    assert words == 600
    requests = len(fake_server.requests)
    bare = json.loads(cli_ok("ensemble", str(panel), "--dry-run", "--json", "--db", db))
    follow = json.loads(cli_ok("ensemble", str(panel), "--dry-run", "--json", "--db", db, "--continue", "last"))
    grown = follow["stages"][0]["calls"][0]["prompt_tokens_low"] - bare["stages"][0]["calls"][0]["prompt_tokens_low"]
    assert words <= grown < words + 50  # the earlier answer, its question and the turns' framing
    assert len(fake_server.requests) == requests


def test_a_panel_error_stops_the_estimate_like_a_run(fake_server, tmp_path):
    panel = estimate_panel(tmp_path / "p.yaml", fake_server, "protocol: vote", "options: [only]")
    with pytest.raises(UserError) as caught:
        cli("estimate", str(panel), catch_exceptions=False)
    assert caught.value.exit_code == 2
    assert "needs at least two options" in caught.value.message
