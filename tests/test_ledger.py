"""One ledger per run: every call a run starts has one row with its final status, and every
surface that reports a run's calls, tokens and cost (`--json`, the summary line, `history
show`, `history list`, `history stats`, batch's JSONL, eval's table) says the same of it."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAIServer, after, error, hang, reply
from tests.helpers import cli, cli_json, cli_ok, write_panel


def call_rows(db: Path) -> list[tuple[str, str | None, int | None, int | None]]:
    """Each stored call: its member, how it ended and its tokens."""
    with sqlite3.connect(db) as connection:
        rows = connection.execute("SELECT member, error_kind, tokens_in, tokens_out FROM calls ORDER BY member")
        return list(rows)


def test_a_race_keeps_a_row_for_every_call_it_started(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    """The winner answers once the server holds all four requests; the others never answer and
    are cancelled. Every request the server received is a call row with its final status, and
    `--json`, the store and `history show` agree."""
    fake_server.script("a", after(lambda: len(fake_server.requests) >= 4, reply("first", prompt_tokens=10)))
    for name in ("b", "c", "d"):
        fake_server.script(name, hang())
    panel = write_panel(tmp_path / "race.yaml", fake_server, ["a", "b", "c", "d"], "protocol: ensemble")
    db = Path(os.environ["PANEL_DB"])

    result = cli_json("ensemble", str(panel), "--mode", "race", "-q", "Which database?")

    assert len(fake_server.requests) == 4
    assert result["calls"] == len(fake_server.requests)
    assert result["calls_by_status"] == {"answered": 1, "reused": 0, "failed": 0, "cancelled": 3, "refused": 0}
    assert result["tokens"] == 30, "the winner's 10 + 20; a cancelled call reported nothing"
    assert (result["cost"], result["cost_basis"], result["unpriced_models"]) == (None, "unknown", ["openai/a"])
    assert call_rows(db) == [
        ("a", None, 10, 20),
        ("b", "cancelled", None, None),
        ("c", "cancelled", None, None),
        ("d", "cancelled", None, None),
    ]
    shown = cli_ok("history", "show", result["run_id"])
    assert "waiting" not in shown
    assert "4 calls · 30 tokens" in shown
    assert "first to answer" in result["reason"] and "3 others were cancelled" in result["reason"]


def test_a_race_whose_members_all_answer_at_once_cancels_none(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    """Every member answers in the same instant: each call is answered, none is said to be
    cancelled, and each counts its tokens."""
    fake_server.default(after(lambda: len(fake_server.requests) >= 3, reply("same")))
    panel = write_panel(tmp_path / "race.yaml", fake_server, ["a", "b", "c"], "protocol: ensemble")

    result = cli_json("ensemble", str(panel), "--mode", "race", "-q", "Which database?")

    assert result["calls"] == len(fake_server.requests) == 3
    assert result["calls_by_status"]["answered"] + result["calls_by_status"]["cancelled"] == 3
    answered = result["calls_by_status"]["answered"]
    assert result["tokens"] == 30 * answered
    assert ("cancelled" in result["reason"]) == (answered < 3)


def test_a_wrong_key_at_a_proxy_names_the_member_endpoint_and_key_variable(
    fake_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    fake_server.script("a", error(400, "No connected db"))
    panel = write_panel(
        tmp_path / "proxy.yaml",
        fake_server,
        ["a"],
        "protocol: ensemble",
        member_lines="    api_key_env: PROXY_KEY\n",
    )
    outcome = cli(
        "ensemble", str(panel), "-q", "Which database?", env={"PROXY_KEY": "sk-proxy-secret-123456", "NO_COLOR": "1"}
    )
    said = outcome.output
    assert outcome.exit_code != 0
    assert "No connected db" in said
    port = fake_server.url.split(":")[2].split("/")[0]
    assert f"No connected db (a called 127.0.0.1:{port} with the key in PROXY_KEY)" in said
    assert "sk-proxy-secret-123456" not in said
    stored = json.dumps(call_rows(Path(os.environ["PANEL_DB"])))
    assert "sk-proxy-secret" not in stored
