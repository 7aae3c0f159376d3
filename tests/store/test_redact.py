from __future__ import annotations

from pathlib import Path

import pytest

from panel_cli.events import EventBus, RunFailed
from panel_cli.redact import REDACTED, redact, redact_obj, secret_values
from panel_cli.store.reader import TranscriptReader
from panel_cli.store.subscriber import TranscriptStore
from tests.store.sample_runs import answer_calls, run_started, vote_round

KEY = "fake-test-abcdefghijklmnop123"


def test_secret_values_picks_variables_named_like_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("HF_TOKEN", "hf_0123456789")
    monkeypatch.setenv("DB_PASSWORD", "hunter2hunter2")
    monkeypatch.setenv("AWS_SECRET", "aws-secret-value")
    monkeypatch.setenv("SHORT_KEY", "abc")
    monkeypatch.setenv("MY_PROVIDER_LOGIN", "credential-value")
    monkeypatch.setenv("HOME_DIRECTORY", "/home/someone/else")
    values = secret_values()
    assert {KEY, "hf_0123456789", "hunter2hunter2", "aws-secret-value"} <= set(values)
    assert "abc" not in values
    assert "credential-value" not in values
    assert "/home/someone/else" not in values
    assert "credential-value" in secret_values(extra_names=["MY_PROVIDER_LOGIN"])


def test_redact_replaces_every_occurrence_longest_first() -> None:
    assert redact(f"key={KEY}; again {KEY}", [KEY]) == f"key={REDACTED}; again {REDACTED}"
    assert redact(f"{KEY}-extra", [KEY, f"{KEY}-extra"]) == REDACTED
    assert redact("nothing here", []) == "nothing here"
    assert redact("a.b+c(", ["a.b+c("]) == REDACTED


def test_redact_obj_walks_nested_data() -> None:
    data = {"messages": [{"role": "user", "content": f"my key is {KEY}"}], KEY: (1, KEY), "n": 3, "x": None}
    assert redact_obj(data, [KEY]) == {
        "messages": [{"role": "user", "content": f"my key is {REDACTED}"}],
        REDACTED: [1, REDACTED],
        "n": 3,
        "x": None,
    }


async def test_no_key_reaches_the_database_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    path = tmp_path / "panel.db"
    leaked = f"Authentication failed for key {KEY}"
    async with await TranscriptStore.open(path) as store:
        bus = EventBus("r1", [store])
        await bus.emit(run_started(question=f"Is {KEY} a valid key?"))
        for event in answer_calls("r1"):
            if getattr(event, "messages", None):
                event = event.model_copy(
                    update={"messages": [{"role": "user", "content": f"use {KEY}"}], "text": f"Your key is {KEY}."}
                )
            await bus.emit(event)
        for event in vote_round("r1", error=leaked):
            await bus.emit(event)
        await bus.emit(RunFailed(message=leaked))

        written = {file.name: file.read_bytes() for file in tmp_path.glob("panel.db*")}
        assert {"panel.db", "panel.db-wal"} <= written.keys()
        assert b"[redacted]" in written["panel.db-wal"]
        for name, data in written.items():
            assert KEY.encode() not in data, name

    for file in tmp_path.glob("panel.db*"):
        assert KEY.encode() not in file.read_bytes(), file.name
    with TranscriptReader.open(path) as reader:
        run = reader.get_run("r1")
        calls = reader.run_calls("r1")
    assert run.question == f"Is {REDACTED} a valid key?"
    assert run.error == f"Authentication failed for key {REDACTED}"
    assert calls[0].messages == [{"role": "user", "content": f"use {REDACTED}"}]
    assert calls[0].response == f"Your key is {REDACTED}."
    assert calls[3].error == f"Authentication failed for key {REDACTED}"


async def test_api_key_env_names_are_redacted_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_LLM_CREDENTIAL", "credential-0123456789")
    path = tmp_path / "panel.db"
    async with await TranscriptStore.open(path, secret_names=["MY_LLM_CREDENTIAL"]) as store:
        await EventBus("r1", [store]).emit(run_started(question="is credential-0123456789 safe?"))
    with TranscriptReader.open(path) as reader:
        assert reader.get_run("r1").question == f"is {REDACTED} safe?"
