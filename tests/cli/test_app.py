"""The `panel` shell: version, help, the lazily loaded history group, and shell completion."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from panel_cli.cli import completion
from panel_cli.cli.app import HISTORY_HELP, app

ROOT = Path(__file__).resolve().parents[2]

# Wide enough that Rich never wraps an option's help onto a second line.
runner = CliRunner(env={"COLUMNS": "250"})

COMMANDS = [
    [],
    ["confer"],
    ["council"],
    ["ensemble"],
    ["vote"],
    ["decide"],
    ["delphi"],
    ["supervise"],
    ["orchestrate"],
    ["run"],
    ["validate"],
    ["models"],
    ["history"],
    ["history", "list"],
    ["history", "show"],
    ["history", "decisions"],
    ["history", "retally"],
    ["history", "replay"],
    ["history", "delete"],
    ["history", "purge"],
    ["history", "stats"],
    ["history", "export"],
    ["resume"],
    ["init"],
]


def helped(*args: str) -> str:
    result = runner.invoke(app, [*args, "--help"], prog_name="panel")
    assert result.exit_code == 0, result.output
    return result.output


def test_version_comes_from_the_package_metadata() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"panel {version('panel-cli')}\n"


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "panel")
def test_dash_h_is_help_everywhere(command: list[str]) -> None:
    short = runner.invoke(app, [*command, "-h"], prog_name="panel")
    assert short.exit_code == 0, short.output
    assert short.output == helped(*command)
    assert f"Usage: panel {' '.join(command)}".rstrip() in short.output


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "panel")
def test_flags_show_no_value_type(command: list[str]) -> None:
    output = helped(*command)
    assert "--help" in output
    assert "<bool>" not in output


def test_help_lists_history_with_its_own_one_line_help() -> None:
    from panel_cli.cli.history import history_app

    assert typer.main.get_group(history_app).help == HISTORY_HELP
    lines = [line for line in helped().splitlines() if "history" in line]
    assert len(lines) == 1 and HISTORY_HELP in lines[0]


def test_history_runs_through_the_lazy_group(tmp_path: Path) -> None:
    result = runner.invoke(app, ["history", "list", "--db", str(tmp_path / "none.db")])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("No runs yet in ")


def test_common_options_read_as_documented() -> None:
    output = helped("confer")
    assert 'The question; "-" reads it from stdin. Default: the panel file\'s question, else stdin.' in output
    assert "Transcript database (default: $PANEL_DB, else panel.db in the user data folder)." in output


# -- completion callbacks ---------------------------------------------------------------


def context(**params: object) -> typer.Context:
    ctx = typer.Context(typer.main.get_command(app))
    ctx.params.update(params)
    return ctx


def test_a_gate_is_offered_the_votes_options(tmp_path: Path) -> None:
    file = tmp_path / "v.yaml"
    file.write_text("options: [merge, block, Maybe]\nmembers:\n  - {name: a, model: demo/sage}\n")
    assert completion.vote_options(context(panel_file=file), "") == ["merge", "block", "Maybe"]
    assert completion.vote_options(context(panel_file=file), "m") == ["merge", "Maybe"]
    assert completion.vote_options(context(panel_file=file, choices=["yes", "no"]), "") == ["yes", "no"]
    assert completion.vote_options(context(), "") == []
    (tmp_path / "bad.yaml").write_text("options: [")
    assert completion.vote_options(context(panel_file=tmp_path / "bad.yaml"), "") == []
    assert completion.verdicts("") == ["approved"] and completion.verdicts("x") == []


def test_panel_files_offers_yaml_files_and_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    for name in ("a.yaml", "b.yml", "notes.txt", ".hidden.yaml", "sub/deep.yaml"):
        (work / name).write_text("")
    monkeypatch.chdir(work)
    assert completion.panel_files("") == ["a.yaml", "b.yml", "sub/"]
    assert completion.panel_files("sub/") == ["sub/deep.yaml"]
    assert completion.panel_files("sub/d") == ["sub/deep.yaml"]
    assert completion.panel_files(".") == [".hidden.yaml"]
    assert completion.panel_files(f"{work}/b") == [f"{work}/b.yml"]
    assert completion.panel_files("missing/") == []


def test_member_names_come_from_the_panel_file(tmp_path: Path) -> None:
    file = tmp_path / "p.yaml"
    file.write_text(
        "members:\n  - {name: gpt, model: demo/sage}\n  - {name: claude, model: demo/skeptic}\n"
        "  - {name: llama, model: demo/sage}\n"
    )
    assert completion.member_names(context(panel_file=file), "") == ["gpt", "claude", "llama"]
    assert completion.member_names(context(panel_file=file), "cl") == ["claude"]
    assert completion.member_names(context(panel_file=file), "gpt,") == ["gpt,claude", "gpt,llama"]
    assert completion.member_names(context(panel_file=file), "gpt,llama,c") == ["gpt,llama,claude"]
    assert completion.member_names(context(), "") == []
    typed_before_the_option = context()
    typed_before_the_option.args = [str(file)]
    assert completion.member_names(typed_before_the_option, "l") == ["llama"]
    (tmp_path / "bad.yaml").write_text("members: [")
    assert completion.member_names(context(panel_file=tmp_path / "bad.yaml"), "") == []


@pytest.fixture
def runs_db(tmp_path: Path) -> Path:
    """A transcript file made by the store itself, with three runs."""
    from panel_cli.store.connection import connect
    from panel_cli.store.writer import RunWriter

    path = tmp_path / "runs.db"
    db = connect(path)
    writer = RunWriter(db, pid=None, host=None)
    for run_id, started, question in (
        ("abc123", 1_700_000_000.0, "Which  database\nshould we use?"),
        ("abd456", 1_700_000_100.0, "Ship it?"),
        ("xyz789", 1_700_000_200.0, ""),
    ):
        writer.write(
            {
                "run_id": run_id,
                "seq": 1,
                "ts": started,
                "type": "run_started",
                "protocol": "confer",
                "panel": "p",
                "question": question,
                "members": [],
                "config": {},
            }
        )
    db.close()
    return path


def test_run_ids_newest_first_by_prefix(runs_db: Path) -> None:
    ids = completion.run_ids(context(db=runs_db), "ab")
    assert [run_id for run_id, _ in ids] == ["abd456", "abc123"]
    assert ids[1][1].endswith("confer Which database should we use?")
    assert [run_id for run_id, _ in completion.run_ids(context(db=runs_db), "")] == ["xyz789", "abd456", "abc123"]


def test_run_ids_read_panel_db_and_never_create_a_file(
    runs_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PANEL_DB", str(runs_db))
    assert len(completion.run_ids(context(), "")) == 3
    missing = tmp_path / "missing.db"
    assert completion.run_ids(context(db=missing), "") == []
    assert not missing.exists()
    (tmp_path / "junk.db").write_text("not a database")
    assert completion.run_ids(context(db=tmp_path / "junk.db"), "") == []


def test_run_ids_leave_the_file_unchanged(runs_db: Path) -> None:
    before = runs_db.read_bytes()
    completion.run_ids(context(db=runs_db), "")
    assert runs_db.read_bytes() == before
    assert sqlite3.connect(runs_db).execute("SELECT count(*) FROM runs").fetchone() == (3,)


@pytest.mark.parametrize("panel_db", [None, "~/elsewhere.db"])
def test_default_db_path_is_the_stores(panel_db: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    from panel_cli.store.paths import default_db_path

    if panel_db is None:
        monkeypatch.delenv("PANEL_DB", raising=False)
    else:
        monkeypatch.setenv("PANEL_DB", panel_db)
    assert completion.default_db_path() == default_db_path()


def test_callbacks_work_through_typer_completion(runs_db: Path) -> None:
    """Typer calls each callback by its signature: wired as the command modules wire
    them, they answer through Typer's real completion path."""
    sample = typer.Typer()

    @sample.command()
    def pick(
        panel_file: Path = typer.Argument(..., autocompletion=completion.panel_files),
        agents: str = typer.Option("", "--agents", autocompletion=completion.member_names),
        db: Path = typer.Option(None, "--db"),
    ) -> None:
        """Not run: only completed."""

    @sample.command()
    def show(
        run_id: str = typer.Argument(..., autocompletion=completion.run_ids),
        db: Path = typer.Option(None, "--db"),
    ) -> None:
        """Not run: only completed."""

    def complete(words: str) -> list[str]:
        env = {"_PANEL_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(len(words.split(" ")) - 1)}
        result = CliRunner(env=env).invoke(sample, [], prog_name="panel")
        return result.output.split()

    demo = os.path.relpath(ROOT / "configs" / "demo.yaml")
    assert complete(f"panel pick {demo} --agents sage,s") == ["sage,skeptic"]
    assert complete(f"panel show --db {runs_db} ab") == ["abd456", "abc123"]


# -- completion end to end --------------------------------------------------------------


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("panel confer configs/de", ["configs/demo.yaml"]),
        ("panel council configs/", ["configs/council.yaml", "configs/demo.yaml", "configs/ensemble.yaml"]),
        ("panel history li", ["list"]),
    ],
)
def test_bash_completion_end_to_end(words: str, expected: list[str]) -> None:
    env = {
        **os.environ,
        "_PANEL_COMPLETE": "complete_bash",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split(" ")) - 1),
    }
    result = subprocess.run(
        [sys.executable, "-m", "panel_cli"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    offered = result.stdout.split()
    assert set(expected) <= set(offered) and all(word.startswith(words.split(" ")[-1]) for word in offered)
