"""Panel files: every error names the file, the line and the field (SPEC §1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from panel_cli.config import load_panel, parse_duration, parse_panel, resolve_question
from panel_cli.errors import ConfigError, UserError

MEMBERS = "members:\n  - name: a\n    model: demo/sage\n  - name: b\n    model: demo/skeptic\n"


def error_of(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_panel(text, "panel.yaml")
    return caught.value.message


def test_full_example_loads():
    panel = parse_panel(
        MEMBERS
        + "chairman: a\nanonymize: false\ntimeouts: {answer: 90s, review: 5m, synthesis: none}\n"
        "max_rounds: 4\nmethod: supermajority\nthreshold: 0.75\nquorum: 2\noptions: [PostgreSQL, MySQL]\n"
        "defaults: {temperature: 0.7, max_tokens: 1024, retries: 2}\n",
        "panel.yaml",
    )
    assert panel.timeouts.get("answer", 1) == 90 and panel.timeouts.get("review", 1) == 300
    assert panel.timeouts.get("synthesis", 1) is None, "an explicit none means no limit"
    assert panel.timeouts.get("vote", 30) == 30, "an unset stage takes the protocol default"
    assert [c.name for c in panel.chairmen()] == ["a"]
    assert panel.defaults.max_tokens == 1024


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (MEMBERS + "  - name: a\n    model: demo/sage\n", "panel.yaml, line 6: members[2].name: duplicate member name 'a'; names must be unique."),
        (MEMBERS + "colour: blue\n", "panel.yaml, line 6: colour: unknown field."),
        ("members:\n  - name: a\n    model: demo/sage\n    temprature: 1\n", "panel.yaml, line 4: members[0].temprature: unknown field."),
        ("members:\n  - name: a\n    model: demo/sage\n    temperature: 7\n", "panel.yaml, line 4: members[0].temperature: input should be less than or equal to 2."),
        ("members:\n  - name: a\n", "panel.yaml, line 2: members[0].model: this field is required."),
        (MEMBERS + "timeouts: {answer: soon}\n", "panel.yaml, line 6: timeouts.answer: 'soon' is not a duration; write it like 90s, 5m, 1h or none."),
        (MEMBERS + "chairman: zed\n", "panel.yaml, line 6: chairman: 'zed' is not a member; name a member or give an inline member."),
        (MEMBERS + "method: plurality\n", "panel.yaml, line 6: method: input should be 'majority', 'supermajority', 'unanimous', 'ranked_choice' or 'weighted'."),
        ("members:\n  - name: a\n   model: x\n", "panel.yaml, line 3: not valid YAML (expected <block end>, but found '<block mapping start>')."),
        (MEMBERS + "members: []\n", "panel.yaml, line 6: members: this key appears twice."),
        ("", "panel.yaml: the file is empty; a panel needs at least 'members'."),
        ("- a\n- b\n", "panel.yaml, line 1: a panel file is a mapping of fields such as 'members' and 'question'."),
    ],
)
def test_error_messages_name_file_line_and_field(text, expected):
    assert error_of(text) == expected


def test_unknown_demo_persona_points_at_the_model_line():
    assert error_of("members:\n  - name: a\n    model: demo/oracle\n").startswith("panel.yaml, line 3: members[0].model: unknown demo persona 'oracle'")


def test_env_vars_are_expanded(monkeypatch):
    monkeypatch.setenv("PANEL_TEST_BASE", "http://127.0.0.1:9999/v1")
    panel = parse_panel("members:\n  - name: a\n    model: openai/x\n    api_base: ${PANEL_TEST_BASE}\n", "panel.yaml")
    assert panel.members[0].api_base == "http://127.0.0.1:9999/v1"


def test_unset_env_var_is_an_error_with_its_line(monkeypatch):
    monkeypatch.delenv("PANEL_TEST_UNSET", raising=False)
    message = error_of("members:\n  - name: a\n    model: openai/x\n    system: ${PANEL_TEST_UNSET}\n")
    assert message == "panel.yaml, line 4: members[0].system: environment variable PANEL_TEST_UNSET is not set."


def test_shipped_aliases_resolve_with_their_endpoint():
    panel = parse_panel("members:\n  - name: g\n    model: gpt-4o\n  - name: l\n    model: llama\n", "p.yaml")
    assert panel.members[0].model == "openai/gpt-4o" and panel.members[0].api_base is None
    assert panel.members[1].model == "ollama/llama3.1" and panel.members[1].api_base == "http://localhost:11434"


def test_user_aliases_extend_and_override(tmp_path, monkeypatch):
    config = tmp_path / "cfg"
    config.mkdir()
    (config / "aliases.yaml").write_text("gpt-4o: openai/gpt-4o-2024-11-20\nlocal:\n  model: openai/qwen\n  api_base: http://127.0.0.1:8000/v1\n")
    monkeypatch.setenv("PANEL_CONFIG_DIR", str(config))
    panel = parse_panel("members:\n  - name: g\n    model: gpt-4o\n  - name: q\n    model: local\n", "p.yaml")
    assert panel.members[0].model == "openai/gpt-4o-2024-11-20"
    assert (panel.members[1].model, panel.members[1].api_base) == ("openai/qwen", "http://127.0.0.1:8000/v1")


def test_member_api_base_wins_over_the_alias():
    panel = parse_panel("members:\n  - name: l\n    model: llama\n    api_base: http://gpu-box:11434\n", "p.yaml")
    assert panel.members[0].api_base == "http://gpu-box:11434"


def test_backup_chairmen_and_inline_chairman():
    panel = parse_panel(MEMBERS + "chairman: [b, {name: judge, model: demo/engineer}]\n", "p.yaml")
    assert [c.name for c in panel.chairmen()] == ["b", "judge"]


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("5m", 300), ("1h", 3600), ("250ms", 0.25), (12, 12), ("none", None)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


def test_demo_replaces_every_model():
    panel = parse_panel("members:\n  - name: g\n    model: gpt-4o\n  - name: c\n    model: claude\n", "p.yaml").as_demo()
    assert [m.model for m in panel.members] == ["demo/sage", "demo/skeptic"]
    assert all(m.api_base is None for m in panel.members)


def test_question_sources_in_order(tmp_path: Path):
    (tmp_path / "q.md").write_text("From the file?\n")
    panel = parse_panel(MEMBERS + "question_file: q.md\n", "p.yaml")
    assert resolve_question(panel, tmp_path, None, None) == "From the file?"
    assert resolve_question(panel, tmp_path, None, "From stdin?") == "From stdin?"
    assert resolve_question(panel, tmp_path, "From -q?", "From stdin?") == "From -q?"
    with pytest.raises(UserError, match="No question"):
        resolve_question(parse_panel(MEMBERS, "p.yaml"), tmp_path, None, "  ")


def test_missing_file_is_one_sentence(tmp_path):
    with pytest.raises(UserError, match=r"nope.yaml: no such file\."):
        load_panel(tmp_path / "nope.yaml")


def test_file_name_becomes_the_panel_name(tmp_path):
    file = tmp_path / "db-choice.yaml"
    file.write_text(MEMBERS)
    assert load_panel(file).name == "db-choice"


def test_callable_members_adds_an_inline_chairman_once() -> None:
    panel = parse_panel(
        "members:\n  - {name: a, model: demo/sage}\n  - {name: b, model: demo/skeptic}\n"
        "chairman:\n  - a\n  - {name: judge, model: openai/gpt-4o, api_key_env: JUDGE_KEY}\n"
    )
    assert [m.name for m in panel.callable_members()] == ["a", "b", "judge"]
