"""Secrets: no key reaches the store, `--json`, plain progress, the live view or a warning,
including keys the name rule would miss (short keys, `${VAR}` values, an api_key_env).

One test per row of the fault suite; runs go through the CLI in-process, against the fake
server, exactly as a user's would.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from panel_cli.events import (
    CallFinished,
    EventBus,
    MemberInfo,
    RunFinished,
    RunStarted,
    StageStarted,
    WarningRaised,
)
from panel_cli.models.catalog import litellm_dir
from panel_cli.redact import named_like_a_secret, secret_values
from panel_cli.view.live import LiveView
from tests.fakes.openai_server import FakeOpenAIServer, error, responder
from tests.helpers import cli, write_panel

KEY = "fake-live-Qw3rTy7Ui9Op1As5Df"


def secrets_panel(path: Path, server: FakeOpenAIServer, names: list[str], extra: str = "") -> Path:
    """`extra`: lines under every member."""
    fields = ("question: is it safe?", "max_rounds: 1")
    return write_panel(path, server, names, *fields, name="secrets", member_lines=extra)


def stored_bytes(folder: Path) -> bytes:
    return b"".join(path.read_bytes() for path in folder.glob("runs.db*"))


def echo_everything(request) -> str:
    """A model that repeats its key header and its whole prompt back."""
    return f"header {request.headers.get('authorization')}; prompt {json.dumps(request.messages)}"


def test_a_key_in_a_provider_error_or_an_answer_never_reaches_plain_progress(fake_server, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    fake_server.script("a", error(401, f"Incorrect API key provided: {KEY}."))
    fake_server.script("b", responder(echo_everything))
    fake_server.script("c", responder(echo_everything))
    file = secrets_panel(tmp_path / "p.yaml", fake_server, ["a", "b", "c"])
    outcome = cli("confer", str(file), "--db", str(tmp_path / "runs.db"), columns=None)
    assert outcome.exit_code == 0, outcome.output
    assert any(KEY in str(request.headers) for request in fake_server.requests), "the key was really sent"
    assert "[redacted]" in outcome.stderr, "the echoed key was scrubbed, not merely absent"
    assert KEY not in outcome.stdout and KEY not in outcome.stderr
    assert KEY.encode() not in stored_bytes(tmp_path)


def test_the_live_view_never_draws_a_key():
    out = io.StringIO()
    view = LiveView(Console(file=out, force_terminal=True, width=140, color_system=None))
    bus = EventBus("r1", [view], secrets=[KEY])

    async def run() -> None:
        await bus.emit(
            RunStarted(
                protocol="confer", panel="p", question=f"is {KEY} ok?", members=[MemberInfo(name="a", model="openai/a")]
            )
        )
        await bus.emit(StageStarted(stage="answer", round=0, members=["a"]))
        await bus.emit(
            CallFinished(
                call_id="1",
                member="a",
                model="openai/a",
                stage="answer",
                round=0,
                text=f"your key is {KEY}",
                latency=0.1,
            )
        )
        await bus.emit(WarningRaised(message=f"provider said {KEY}", member="a"))
        await bus.emit(RunFinished(final_answer=f"the key {KEY}", result={}))

    asyncio.run(run())
    view.close()
    drawn = out.getvalue()
    assert "[redacted]" in drawn and KEY not in drawn


@pytest.mark.parametrize("key", ["sk-1234", "abcd"])
def test_a_short_key_a_member_uses_is_redacted(key, fake_server, tmp_path, monkeypatch):
    """LiteLLM proxy's stock key is `sk-1234`: too short for the name rule, but a key in use."""
    monkeypatch.setenv("PROXY_TOKEN_FOR_PANEL", key)
    fake_server.default(responder(echo_everything))
    file = secrets_panel(tmp_path / "p.yaml", fake_server, ["a", "b"], extra="    api_key_env: PROXY_TOKEN_FOR_PANEL\n")
    outcome = cli("confer", str(file), "--json", "--db", str(tmp_path / "runs.db"), columns=None)
    assert outcome.exit_code == 0, outcome.output
    assert all(request.headers.get("authorization") == f"Bearer {key}" for request in fake_server.requests)
    assert f"Bearer {key}" not in outcome.stdout and "Bearer [redacted]" in outcome.stdout
    assert f"Bearer {key}".encode() not in stored_bytes(tmp_path)


def test_the_values_a_panel_file_expanded_are_redacted(fake_server, tmp_path, monkeypatch):
    """A `${VAR}` expanded into `system` is the user's secret whatever the variable's name."""
    persona = "You are agent Zorblax-7, clearance omega"
    monkeypatch.setenv("PANEL_PERSONA_TEXT", persona)
    fake_server.default(responder(echo_everything))
    file = secrets_panel(tmp_path / "p.yaml", fake_server, ["a", "b"], extra="    system: ${PANEL_PERSONA_TEXT}\n")
    outcome = cli("confer", str(file), "--json", "--db", str(tmp_path / "runs.db"), columns=None)
    assert outcome.exit_code == 0, outcome.output
    assert any(persona in json.dumps(request.messages) for request in fake_server.requests), "the model got it"
    assert persona not in outcome.stdout
    assert persona.encode() not in stored_bytes(tmp_path)


# Secrets the name rule missed: litellm's key variables without a `_KEY` suffix, and a secret
# that is a number. Each must stay out of stdout, `--json`, every export, the store and batch.
WATSONX_KEY = "wx-Zt8Kq2Lm4Np6Rs"
DB_PASSWORD = "31415926535897"


def leaky_reply(_request) -> str:
    return f"The environment holds {WATSONX_KEY} and {DB_PASSWORD}."


@pytest.fixture
def missed_secrets(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("WATSONX_APIKEY", WATSONX_KEY)
    monkeypatch.setenv("DB_PASSWORD", DB_PASSWORD)
    return [WATSONX_KEY, DB_PASSWORD]


def assert_hidden(text: str, secrets: list[str], where: str) -> None:
    assert "[redacted]" in text, f"{where}: nothing was scrubbed"
    for secret in secrets:
        assert secret not in text, f"{where}: {secret} leaked"


def test_litellm_keys_without_a_key_suffix_and_numeric_secrets_reach_no_output(missed_secrets, fake_server, tmp_path):
    fake_server.default(responder(leaky_reply))
    file = secrets_panel(tmp_path / "p.yaml", fake_server, ["a", "b"])
    db = str(tmp_path / "runs.db")

    plain = cli("confer", str(file), "--quiet", "--db", db)
    assert plain.exit_code == 0, plain.output
    assert_hidden(plain.stdout, missed_secrets, "stdout")
    as_json = cli("confer", str(file), "--json", "--db", db)
    assert as_json.exit_code == 0, as_json.output
    assert_hidden(as_json.stdout, missed_secrets, "--json")
    run_id = json.loads(as_json.stdout)["run_id"]
    for form in ("md", "json", "html"):
        exported = tmp_path / f"run.{form}"
        outcome = cli("history", "export", run_id, "-f", form, "-o", str(exported), "--db", db)
        assert outcome.exit_code == 0, outcome.output
        assert_hidden(exported.read_text(), missed_secrets, f"the {form} export")
    (tmp_path / "questions.txt").write_text("one?\ntwo?\n")
    results = tmp_path / "results.jsonl"
    batch = cli(
        "batch", str(file), "--questions", str(tmp_path / "questions.txt"), "-o", str(results), "--quiet", "--db", db
    )
    assert batch.exit_code == 0, batch.output
    assert_hidden(results.read_text(), missed_secrets, "batch JSONL")
    stored = stored_bytes(tmp_path)
    assert all(secret.encode() not in stored for secret in missed_secrets), "the store kept a secret"


# A name in litellm's code that holds a credential, unless it names where one is (a file, a
# folder, a URL, an endpoint) or who one is (an id).
CREDENTIAL_WORD = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIALS|JWT")
NOT_A_CREDENTIAL = re.compile(r"_(FILE|DIR|URL|BASE|HOST|ID)$|^GOOGLE_APPLICATION_CREDENTIALS$")
READ_FROM_ENV = re.compile(
    r"""(?:get_secret(?:_str|_bool)?\(\s*(?:secret_name=)?|os\.environ\.get\(\s*|os\.getenv\(\s*|os\.environ\[\s*)"([A-Z][A-Z0-9_]+)\""""
)


def test_every_key_variable_litellm_reads_is_redacted():
    """The shipped list (`LITELLM_SECRET_NAMES`) checked against the installed litellm: every
    variable its provider code reads a credential from is named like a secret or listed."""
    root = litellm_dir()
    assert root is not None
    sources = [root / "main.py", root / "utils.py", *(root / "llms").rglob("*.py")]
    names = {name for path in sources for name in READ_FROM_ENV.findall(path.read_text(encoding="utf-8"))}
    assert {"OPENAI_API_KEY", "WATSONX_APIKEY"} <= names, "litellm's code is not where this test reads it"
    credentials = {name for name in names if CREDENTIAL_WORD.search(name) and not NOT_A_CREDENTIAL.search(name)}
    assert sorted(name for name in credentials if not named_like_a_secret(name)) == []


def test_a_number_is_hidden_when_its_name_calls_it_a_secret_and_left_alone_when_it_is_a_setting(monkeypatch):
    monkeypatch.setenv("DB_PASSWORD", "31415926535897")
    monkeypatch.setenv("PIN_FOR_PROXY", "27182818")
    monkeypatch.setenv("SHORT_PIN", "2718")
    values = secret_values(extra_names=["PIN_FOR_PROXY", "SHORT_PIN"], known=["1024", "20240101", "zq-9x"])
    assert "31415926535897" in values, "a number named like a secret"
    assert "27182818" in values, "a long number a member sends as its key"
    assert "zq-9x" in values, "a short known value that is not a number"
    assert "2718" not in values and "1024" not in values, "a short number cannot be told from the text's numbers"
    assert "20240101" not in values, "a `${VAR}` that expanded to a number is a setting"


@pytest.mark.parametrize(
    "name",
    ["SMTP_PASSWD", "DB_PWD", "SSH_PASSPHRASE", "GCP_CREDENTIALS", "SERVICE_CREDENTIAL", "MAIL_APIKEY", "PASSWORD"],
)
def test_every_common_spelling_of_a_secret_is_named_like_one(name, monkeypatch):
    assert named_like_a_secret(name) and named_like_a_secret(name.lower())
    monkeypatch.setenv(name, "Hunter2-Hunter2")
    assert "Hunter2-Hunter2" in secret_values()


@pytest.mark.parametrize("name", ["PASSWORD_FILE", "CREDENTIALS_DIR", "PWD", "OLDPWD", "KEYBOARD", "MAX_TOKENS"])
def test_names_that_only_mention_a_secret_are_not_one(name):
    assert not named_like_a_secret(name)
