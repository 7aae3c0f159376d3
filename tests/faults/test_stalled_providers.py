"""Providers that never quite stop: an endpoint that drips a byte at a time is cut off by the
stage's deadline (every stage of every protocol has one by default) and, when the reply is
streamed, by `timeouts.idle` once nothing arrives for that long. The call is a `timeout`, the
run ends, and nothing here measures how long it took."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from panel_cli.config import Panel
from panel_cli.protocols.base import rules_of
from panel_cli.protocols.registry import names
from tests.fakes.openai_server import FakeOpenAIServer, RecordedRequest, drip, responder
from tests.helpers import cli

# A live view on a terminal, which is what streams answers.
TERMINAL = {"TTY_COMPATIBLE": "1", "NO_COLOR": "1"}


def council_reply(request: RecordedRequest) -> str:
    prompt = str(request.messages[-1]["content"])
    if "[panel-task: council.review]" in prompt:
        labels = re.findall(r"^=== Model ([A-Z]+) \[[0-9a-f]{8}\] ===$", prompt, re.MULTILINE)
        return "FINAL RANKING: " + ", ".join(f"Model {label}" for label in labels)
    return f"{request.model} thinks so."


def council_file(path: Path, server: FakeOpenAIServer, timeouts: str) -> Path:
    path.write_text(
        "name: stalled\nprotocol: council\nquestion: hi\n"
        f"timeouts: {timeouts}\n"
        "defaults: {retries: 0}\n"
        f"chairman: {{name: chair, model: openai/chair, api_base: {server.url}}}\n"
        "members:\n"
        + "".join(f"  - name: {name}\n    model: openai/{name}\n    api_base: {server.url}\n" for name in ("a", "b"))
    )
    return path


def synthesis_call(db: Path) -> tuple[str, str | None]:
    con = sqlite3.connect(db)
    status = con.execute("select status from runs").fetchone()[0]
    kinds = con.execute("select error_kind from calls where stage = 'synthesis'").fetchall()
    assert len(kinds) == 1
    return status, kinds[0][0]


@pytest.mark.parametrize("protocol", names())
def test_every_stage_of_every_protocol_has_a_default_deadline(protocol):
    rules = rules_of(protocol)
    assert all(limit is not None and 0 < limit <= 3600 for limit in rules.timeouts.values()), rules.timeouts


def test_an_idle_stream_default_is_a_minute_and_can_be_changed_or_turned_off():
    panel = {"members": [{"name": "a", "model": "demo/sage"}]}
    assert Panel.model_validate(panel).timeouts.idle == 60
    assert Panel.model_validate({**panel, "timeouts": {"idle": "5s"}}).timeouts.idle == 5
    assert Panel.model_validate({**panel, "timeouts": {"idle": "none"}}).timeouts.idle is None


def test_a_dripping_synthesis_ends_at_its_deadline_as_a_timeout(fake_server, tmp_path):
    """Unstreamed (no terminal), a byte a second is progress to the HTTP client: the synthesis
    stage's deadline is what ends it."""
    fake_server.default(responder(council_reply))
    fake_server.script("chair", drip(every=0.5))
    db = tmp_path / "runs.db"
    ran = cli("council", str(council_file(tmp_path / "p.yaml", fake_server, "{synthesis: 1s}")), "--db", str(db))

    assert ran.exit_code == 1, ran.output
    assert synthesis_call(db) == ("no_answer", "timeout")


def test_a_streamed_synthesis_that_stops_making_progress_ends_after_the_idle_limit(fake_server, tmp_path):
    """Streamed into the live view, a reply whose next piece does not come within
    `timeouts.idle` is cut off as a timeout, though the stage would have waited an hour."""
    fake_server.default(responder(council_reply))
    fake_server.script("chair", drip(every=0.2))
    db = tmp_path / "runs.db"
    panel = council_file(tmp_path / "p.yaml", fake_server, "{synthesis: 1h, idle: 1s}")
    ran = cli("council", str(panel), "--db", str(db), env=TERMINAL)

    assert ran.exit_code == 1, ran.output
    assert fake_server.requests_for("chair")[0].streamed
    assert synthesis_call(db) == ("no_answer", "timeout")
    assert (
        "nothing arrived for 1s"
        in sqlite3.connect(db).execute("select error from calls where stage = 'synthesis'").fetchone()[0]
    )
