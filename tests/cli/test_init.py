"""`panel init [DIR]`: the starter panel files and the default panel, never overwriting a
file, every one valid without a warning, and every demo variant running offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from panel_cli.config import load_panel
from panel_cli.models.aliases import config_dir
from panel_cli.protocols.registry import names
from tests.helpers import cli, cli_ok

PROTOCOLS = list(names())
PANEL_FILES = sorted(
    [f"{protocol}.demo.yaml" for protocol in PROTOCOLS] + [f"{protocol}.yaml" for protocol in PROTOCOLS]
)


def init(*args: str) -> str:
    return cli_ok("init", *args)


def test_writes_a_demo_and_a_real_panel_per_protocol_and_the_default_panel(tmp_path: Path) -> None:
    folder = tmp_path / "my panels"
    output = init(str(folder))
    assert sorted(path.name for path in folder.iterdir()) == PANEL_FILES
    assert (config_dir() / "defaults.yaml").is_file()
    assert output.startswith("Wrote 17 files:\n")
    assert f"  {folder / 'council.demo.yaml'}\n" in output and f"  {config_dir() / 'defaults.yaml'}\n" in output
    assert f"Try a panel now, offline: panel run '{folder / 'confer.demo.yaml'}'" in output
    assert "OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY" in output and "Kept" not in output
    for protocol in PROTOCOLS:
        demo, real = load_panel(folder / f"{protocol}.demo.yaml"), load_panel(folder / f"{protocol}.yaml")
        assert demo.protocol == real.protocol == protocol
        assert all(member.model.startswith("demo/") for member in demo.callable_members())
        assert not any(member.model.startswith("demo/") for member in real.callable_members())


def test_dir_defaults_to_panels_in_the_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    init()
    assert sorted(path.name for path in (tmp_path / "panels").iterdir()) == PANEL_FILES


def test_every_file_it_writes_validates_without_a_warning(tmp_path: Path) -> None:
    init(str(tmp_path))
    files = [str(tmp_path / name) for name in PANEL_FILES] + [str(config_dir() / "defaults.yaml")]
    outcome = cli("validate", *files)
    assert outcome.exit_code == 0, outcome.output
    assert outcome.output.count(" is valid.") == len(files) == 17
    assert "warning" not in outcome.output


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_demo_variant_runs_offline(protocol: str, tmp_path: Path) -> None:
    init(str(tmp_path))
    outcome = cli("run", str(tmp_path / f"{protocol}.demo.yaml"), "--json", "--db", str(tmp_path / "runs.db"))
    assert outcome.exit_code == 0, outcome.output
    result = json.loads(outcome.stdout)
    assert result["protocol"] == protocol and result["reached_answer"] and result["warnings"] == []


def test_an_existing_file_is_kept_and_named(tmp_path: Path) -> None:
    (tmp_path / "vote.yaml").write_text("# my own vote panel\n")
    config_dir().mkdir(parents=True, exist_ok=True)
    (config_dir() / "defaults.yaml").write_text("members: [{name: mine, model: demo/sage}]\n")

    output = init(str(tmp_path))

    assert (tmp_path / "vote.yaml").read_text() == "# my own vote panel\n"
    assert (config_dir() / "defaults.yaml").read_text() == "members: [{name: mine, model: demo/sage}]\n"
    assert output.startswith("Wrote 15 files:\n")
    assert (
        f"Kept 2 files already there (not overwritten):\n  {tmp_path / 'vote.yaml'}\n  {config_dir() / 'defaults.yaml'}\n"
        in output
    )
    again = init(str(tmp_path))
    assert again.startswith("Kept 17 files already there (not overwritten):\n") and "Wrote" not in again


def test_the_default_panel_is_the_one_commands_use_without_a_file(tmp_path: Path) -> None:
    init(str(tmp_path))
    outcome = cli("council", "--demo", "-q", "Tabs or spaces?", "--json", "--db", str(tmp_path / "runs.db"))
    assert outcome.exit_code == 0, outcome.output
    result = json.loads(outcome.stdout)
    assert [response["name"] for response in result["stage1_responses"]] == ["gpt", "claude", "gemini"]


def test_a_file_where_the_folder_should_be_is_one_sentence(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    outcome = cli("init", str(blocker / "panels"))
    assert outcome.exit_code != 0
    assert outcome.exception is not None and getattr(outcome.exception, "message", "").startswith(
        f"Cannot create the folder {blocker / 'panels'}:"
    )
    assert not any(config_dir().glob("*.yaml")), "nothing is written when the folder cannot be made"
