"""Keys sent to other hosts. A panel file can point a member at any `api_base`, and litellm then
sends the user's own provider key there (`model: openai/anything`, `api_base: http://some-host/`
hands over OPENAI_API_KEY). A panel file is trusted like code (it can start commands too), so
what is checked here is that the user can see what it does: `panel validate` lists every
command it starts and every key that goes to a host other than its provider's own, with the
line, and every run (a protocol command, batch, eval) says so once, before its first call, when
the host is not this machine. The key's value is never printed.

The member that would send the key elsewhere is a backup chairman, never called (the first
chairman answers): the runs here are whole runs against the fake server, and no test reaches
another host.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.openai_server import responder
from tests.helpers import cli

KEY = "fake-live-Zx8Cv6Bn4Mq2Wr9Ty"
NOTICE = "warning: OPENAI_API_KEY is sent to some-host.example, not to openai's own API ("


def council_panel(folder: Path, url: str) -> Path:
    """Two members on the fake server (this machine); a backup chairman on some-host.example."""
    path = folder / "p.yaml"
    path.write_text(
        "name: keys\nprotocol: council\nquestion: Is it safe?\n"
        "members:\n"
        f"  - name: a\n    model: openai/a\n    api_base: {url}\n"
        f"  - name: b\n    model: openai/b\n    api_base: {url}\n"
        "chairman:\n"
        "  - a\n"
        "  - name: backup\n"
        "    model: openai/backup\n"
        "    api_base: http://some-host.example/v1\n"
    )
    return path


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch, fake_server) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    fake_server.default(responder(lambda _request: "Yes.\n\nFINAL RANKING: Response A, Response B"))


def notices(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning: OPENAI_API_KEY")]


@pytest.mark.subprocess
def test_validate_lists_the_commands_a_file_starts_and_the_keys_it_sends_elsewhere(keyed, fake_server, tmp_path):
    path = council_panel(tmp_path, fake_server.url)
    text = path.read_text().replace(
        "name: a\n    model: openai/a\n", "name: a\n    model: openai/a\n    tools: [notes]\n"
    )
    path.write_text(
        text + "tools:\n  notes:\n    command: python notes.py --fast\n"
        "    env:\n      NOTES_TOKEN: ${OPENAI_API_KEY}\n      MODE: quiet\n"
        "  idle:\n    command: python idle.py\n    env: {IDLE_KEY: '${OPENAI_API_KEY}'}\n"
    )
    (tmp_path / "notes.py").write_text("")
    (tmp_path / "idle.py").write_text("")

    outcome = cli("validate", str(path))

    assert outcome.exit_code == 0, outcome.output
    section = outcome.stdout.split("beyond calling the providers:\n", 1)[1].splitlines()
    assert section[:4] == [
        f"  starts python notes.py --fast in {tmp_path} with NOTES_TOKEN=your ${{OPENAI_API_KEY}}, MODE=quiet"
        " (tools.notes, line 18)",
        "  sends OPENAI_API_KEY to 127.0.0.1 (this machine), not to openai's own API (member a, line 8)",
        "  sends OPENAI_API_KEY to 127.0.0.1 (this machine), not to openai's own API (member b, line 11)",
        "  sends OPENAI_API_KEY to some-host.example, not to openai's own API (member backup, line 16)",
    ]
    assert KEY not in outcome.output
    assert "idle" not in "\n".join(section).lower(), "a server no member names is never started"


def test_validate_shows_where_a_command_runs_and_what_environment_it_gets(tmp_path):
    """`cwd: evil` runs `evil/notes_server.py`, and `env` can carry `PYTHONSTARTUP`: both are
    shown with the command; a value named like a secret is not, nor one expanded from `${VAR}`, whose
    variable is named instead."""
    (tmp_path / "evil").mkdir()
    (tmp_path / "evil" / "notes_server.py").write_text("")
    path = tmp_path / "p.yaml"
    path.write_text(
        "name: t\ntools:\n  notes:\n    command: [python, notes_server.py]\n    cwd: evil\n"
        "    env: {PYTHONSTARTUP: /tmp/x.py, NOTES_TOKEN: abc123456789, HOME_DIR: '${SOME_SETTING}'}\n"
        "members:\n  - {name: a, model: demo/sage, tools: [notes]}\n"
    )
    outcome = cli("validate", str(path), env={"SOME_SETTING": "expanded-from-the-environment"})
    assert outcome.exit_code == 0, outcome.output
    section = outcome.stdout.split("beyond calling the providers:\n", 1)[1].splitlines()
    assert section == [
        f"  starts python notes_server.py in {tmp_path / 'evil'} with PYTHONSTARTUP=/tmp/x.py,"
        " NOTES_TOKEN=[redacted], HOME_DIR=your ${SOME_SETTING} (tools.notes, line 3)"
    ]
    assert "abc123456789" not in outcome.output and "expanded-from-the-environment" not in outcome.output


def test_validate_says_nothing_more_for_a_panel_that_only_calls_its_providers(keyed, tmp_path):
    path = tmp_path / "plain.yaml"
    path.write_text("members:\n  - {name: a, model: openai/gpt-4o}\n  - {name: b, model: demo/sage}\n")
    outcome = cli("validate", str(path))
    assert outcome.exit_code == 0, outcome.output
    assert "beyond calling the providers" not in outcome.stdout


@pytest.mark.subprocess
def test_a_run_names_each_key_sent_elsewhere_once_before_its_first_call(keyed, fake_server, tmp_path):
    path = council_panel(tmp_path, fake_server.url)
    outcome = cli("council", str(path), "--json", "--db", str(tmp_path / "runs.db"))

    assert outcome.exit_code == 0, outcome.output
    assert notices(outcome.stderr) == [f"{NOTICE}{path}, line 15: member 'backup')."], outcome.stderr
    assert json.loads(outcome.stdout)["final_answer"], "stdout carries the result alone"
    assert KEY not in outcome.output
    assert fake_server.requests and all(r.headers["authorization"] == f"Bearer {KEY}" for r in fake_server.requests)


@pytest.mark.subprocess
def test_a_batch_and_an_eval_say_it_once_too(keyed, fake_server, tmp_path):
    path = council_panel(tmp_path, fake_server.url)
    (tmp_path / "questions.txt").write_text("One?\nTwo?\nThree?\n")
    db = str(tmp_path / "runs.db")
    questions = str(tmp_path / "questions.txt")
    batch = cli("batch", str(path), "--questions", questions, "-o", str(tmp_path / "r.jsonl"), "--quiet", "--db", db)
    assert batch.exit_code == 0, batch.output
    assert len(notices(batch.stderr)) == 1, batch.stderr

    (tmp_path / "gold.jsonl").write_text(
        '{"question": "One?", "answer": "Yes"}\n{"question": "Two?", "answer": "Yes"}\n'
    )
    evaluated = cli("eval", str(path), "--dataset", str(tmp_path / "gold.jsonl"), "--protocols", "council", "--db", db)
    assert evaluated.exit_code == 0, evaluated.output
    assert len(notices(evaluated.stderr)) == 1, evaluated.stderr
    assert KEY not in batch.output + evaluated.output


def test_a_key_sent_to_this_machine_or_the_providers_own_host_is_no_news(keyed, fake_server, tmp_path):
    path = council_panel(tmp_path, fake_server.url)
    path.write_text(path.read_text().replace("http://some-host.example/v1", "https://api.openai.com/v1"))
    outcome = cli("council", str(path), "--quiet", "--db", str(tmp_path / "runs.db"))
    assert outcome.exit_code == 0, outcome.output
    assert notices(outcome.stderr) == []


def test_validate_lists_the_headers_a_file_sends_to_a_tool_server(monkeypatch, tmp_path):
    """A header may carry a `${TOKEN}` of the user's to the server's host."""
    monkeypatch.setenv("GH_TOKEN", "ghp_" + "x" * 36)
    path = tmp_path / "p.yaml"
    path.write_text(
        "members:\n  - {name: a, model: demo/sage, tools: [web]}\n"
        "tools:\n  web:\n    url: https://mcp.example/mcp\n    headers: {Authorization: 'Bearer ${GH_TOKEN}'}\n"
    )
    outcome = cli("validate", str(path))
    assert outcome.exit_code == 0, outcome.output
    assert "  sends the headers Authorization to mcp.example, carrying your ${GH_TOKEN} (tools.web, line 4)\n" in (
        outcome.stdout
    )
    assert "ghp_" not in outcome.output


@pytest.mark.subprocess
def test_a_run_names_the_key_litellm_sends_for_a_route_panels_table_never_knew(keyed, fake_server, tmp_path):
    """`custom_openai/` sends OPENAI_API_KEY to its `api_base`: litellm is asked, not a table."""
    path = council_panel(tmp_path, fake_server.url)
    path.write_text(path.read_text().replace("model: openai/backup", "model: custom_openai/backup"))
    outcome = cli("council", str(path), "--json", "--db", str(tmp_path / "runs.db"))
    assert outcome.exit_code == 0, outcome.output
    assert notices(outcome.stderr) == [
        f"warning: OPENAI_API_KEY is sent to some-host.example, not to custom_openai's own API ({path}, line 15: member 'backup')."
    ], outcome.stderr
    assert KEY not in outcome.output
