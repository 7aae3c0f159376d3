"""`tools:`, a member's `tools`, `defaults.tool_budget` and `attach:` in a panel file: strict,
located errors, paths anchored at the file's folder, and what `panel validate` says."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from panel_cli.config import load_panel, parse_panel
from panel_cli.errors import ConfigError
from panel_cli.protocols.checks import check_panel
from panel_cli.tools.calls import ToolNameClash, ToolSpec, tool_set
from tests.helpers import cli

ROOT = Path(__file__).resolve().parents[2]


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_panel(text, "p.yaml")
    return caught.value.message.splitlines()


def test_server_shapes_are_checked_where_they_are_written():
    assert problems(
        "members:\n  - {name: a, model: demo/sage}\n"
        "tools:\n"
        "  both: {command: [x], url: http://x}\n"
        "  ftp: {url: ftp://x}\n"
        "  secret: {url: 'https://user:pw@host/mcp'}\n"
        "  env: {url: http://x, env: {A: b}}\n"
        "  neither: {timeout: 5s}\n"
        "  extra: {command: [x], port: 3}\n"
    ) == [
        "p.yaml, line 4: tools.both: give 'command' (a server panel starts) or 'url' (a server it reaches), not both.",
        "p.yaml, line 5: tools.ftp.url: a tool server's url starts with http:// or https://.",
        "p.yaml, line 6: tools.secret.url: a user or password in the URL is not supported; send a token in 'headers' (Authorization: Bearer ${TOKEN}).",
        "p.yaml, line 7: tools.env.env: only a server panel starts ('command') gets an environment.",
        "p.yaml, line 8: tools.neither: give 'command' (a server panel starts) or 'url' (a server it reaches), not both.",
        "p.yaml, line 9: tools.extra.port: unknown field.",
    ]


def test_a_member_names_only_declared_servers():
    assert problems(
        "members:\n  - {name: a, model: demo/sage, tools: [notes, web]}\nchairman: {name: c, model: demo/sage, tools: [zz]}\n"
        "tools:\n  notes: {command: python server.py}\n"
    ) == [
        "p.yaml, line 2: members[0].tools[1]: 'web' is not a tool server of this panel (notes).",
        "p.yaml, line 3: chairman.tools[0]: 'zz' is not a tool server of this panel (notes).",
    ]


def test_a_command_is_split_like_a_shell_and_its_folder_is_the_files(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(
        "members:\n  - {name: a, model: demo/sage, tools: [notes]}\ntools:\n  notes: {command: \"python 'my server.py'\"}\n"
    )
    server = load_panel(path).tools["notes"]
    assert server.command == ["python", "my server.py"]
    assert (server.cwd, server.timeout, server.transport) == (str(tmp_path), 30.0, "stdio")


def test_budget_bounds_and_default():
    assert parse_panel("members:\n  - {name: a, model: demo/sage}\n").defaults.tool_budget == 3
    assert problems("members:\n  - {name: a, model: demo/sage}\ndefaults: {tool_budget: 51}\n") == [
        "p.yaml, line 3: defaults.tool_budget: input should be less than or equal to 50."
    ]


def test_checks_warn_about_a_server_nobody_uses_and_refuse_a_missing_command(tmp_path):
    panel = parse_panel(
        "question: q\nmembers:\n  - {name: a, model: demo/sage, tools: [used]}\n  - {name: b, model: demo/skeptic}\n"
        f"tools:\n  used: {{command: [{sys.executable}]}}\n  idle: {{command: [python]}}\n",
        "p.yaml",
    )
    assert check_panel(panel, "confer") == ["p.yaml, line 7: tools.idle: no member names it, so it is not started."]
    missing = parse_panel(
        "question: q\nmembers:\n  - {name: a, model: demo/sage, tools: [x]}\ntools:\n  x: {command: [no-such-cmd-q]}\n",
        "p.yaml",
    )
    with pytest.raises(ConfigError) as caught:
        check_panel(missing, "confer")
    assert caught.value.message == "p.yaml, line 5: tools.x.command: no such command: no-such-cmd-q."


def test_the_demo_config_validates_without_a_warning_and_shows_its_tools():
    outcome = cli("validate", str(ROOT / "configs" / "tools.yaml"))
    assert outcome.exit_code == 0, outcome.output
    assert "warning" not in outcome.stderr
    for line in (
        "tools.notes: python tools/notes_server.py (stdio), for sage, engineer",
        "tool_budget: 3 calls per member per stage",
        "attach: brief.md",
    ):
        assert line in outcome.stdout


def test_tool_names_are_made_safe_and_told_apart_when_servers_share_one():
    offered = tool_set(
        {
            "notes": [
                ToolSpec("lookup", "notes", {"type": "object", "properties": {"q": {"type": "string"}}}),
                ToolSpec("read.file", "", {}),
            ],
            "web": [ToolSpec("lookup", "web", {"type": "object"})],
        }
    )
    assert [spec["function"]["name"] for spec in offered.specs] == ["notes_lookup", "read_file", "web_lookup"]
    assert {name: (route.server, route.tool) for name, route in offered.routes.items()} == {
        "notes_lookup": ("notes", "lookup"),
        "read_file": ("notes", "read.file"),
        "web_lookup": ("web", "lookup"),
    }
    assert offered.specs[1]["function"]["parameters"] == {"type": "object", "properties": {}}


def test_two_tools_of_one_server_made_alike_by_the_safe_spelling_are_refused():
    with pytest.raises(ToolNameClash) as caught:
        tool_set({"notes": [ToolSpec("read.file", "", {}), ToolSpec("read_file", "", {})]})
    assert caught.value.message == (
        "Tool server 'notes' has two tools offered as 'notes_read_file' ('read.file', 'read_file'): "
        "a tool's name must be unique in a run, so it cannot be used."
    )


def test_a_members_tools_keep_the_names_they_have_in_the_run():
    every = tool_set(
        {"notes": [ToolSpec("lookup", "", {})], "web": [ToolSpec("lookup", "", {}), ToolSpec("fetch", "", {})]}
    )
    mine = every.of_servers(["web"])
    assert [spec["function"]["name"] for spec in mine.specs] == ["web_lookup", "fetch"]
    assert {name: route.server for name, route in mine.routes.items()} == {"web_lookup": "web", "fetch": "web"}
