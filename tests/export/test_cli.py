"""`panel history export` options: where the export goes, which format, `--open`, bad input,
and what it imports. `--open` never opens anything here: `webbrowser.open` is replaced."""

from __future__ import annotations

import os
import subprocess
import sys
import webbrowser
from pathlib import Path

import pytest

from panel_cli.errors import UserError
from tests.export.conftest import ROOT, DemoRuns, export
from tests.helpers import cli


def invoke(demo_runs: DemoRuns, *args: str) -> tuple[str, str]:
    outcome = cli("history", "export", *args, "--db", str(demo_runs.db), catch_exceptions=False, columns=None)
    assert outcome.exit_code == 0, outcome.output
    return outcome.stdout, outcome.stderr


def test_markdown_to_stdout_by_default(demo_runs: DemoRuns) -> None:
    stdout, stderr = invoke(demo_runs, demo_runs.ids["confer"][:8])
    assert stdout.startswith("# panel confer · demo\n") and stderr == ""


def test_the_format_follows_the_file_name(demo_runs: DemoRuns, tmp_path: Path) -> None:
    run_id = demo_runs.ids["vote"]
    for name, opening in (
        ("r.html", "<!doctype html>"),
        ("r.json", "{\n"),
        ("r.md", "# panel vote"),
        ("r.MARKDOWN", "# panel vote"),
    ):
        stdout, stderr = invoke(demo_runs, run_id, "-o", str(tmp_path / name))
        assert stdout == "" and stderr == f"Wrote {tmp_path / name}.\n"
        assert (tmp_path / name).read_text(encoding="utf-8").startswith(opening)
    invoke(demo_runs, run_id, "-o", str(tmp_path / "forced.html"), "--format", "md")
    assert (tmp_path / "forced.html").read_text(encoding="utf-8").startswith("# panel vote")
    invoke(demo_runs, run_id, "-o", str(tmp_path / "forced.txt"), "--format", "json")
    assert (tmp_path / "forced.txt").read_text(encoding="utf-8").startswith("{\n")


@pytest.mark.parametrize("name", ["x.txt", "report", "notes.pdf"])
def test_a_file_name_that_names_no_format_is_refused_before_anything_is_written(
    demo_runs: DemoRuns, tmp_path: Path, name: str
) -> None:
    target = tmp_path / name
    outcome = cli("history", "export", demo_runs.ids["vote"], "-o", str(target), "--db", str(demo_runs.db))
    assert isinstance(outcome.exception, UserError) and outcome.exception.exit_code == 2
    suffix = f"'{target.suffix}'" if target.suffix else "no extension"
    assert outcome.exception.message == (
        f"-o {target}: {suffix} names no export format; give --format md, json or html,"
        " or a file ending in .md, .json or .html."
    )
    assert not target.exists()


def test_html_without_a_file_is_named_after_the_run(
    demo_runs: DemoRuns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    run_id = demo_runs.ids["council"]
    stdout, stderr = invoke(demo_runs, run_id[:8], "--format", "html")
    assert stdout == ""
    assert stderr == f"Wrote panel-{run_id}.html (no -o given, so named after the run).\n"
    assert (tmp_path / f"panel-{run_id}.html").read_text(encoding="utf-8").startswith("<!doctype html>")
    stdout, _ = invoke(demo_runs, run_id, "--format", "html", "-o", "-")
    assert stdout == (tmp_path / f"panel-{run_id}.html").read_text(encoding="utf-8")


def test_open_hands_the_file_to_the_system_viewer(
    demo_runs: DemoRuns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []
    monkeypatch.setattr(webbrowser, "open", lambda url: opened.append(url) or True)
    monkeypatch.chdir(tmp_path)
    run_id = demo_runs.ids["delphi"]
    invoke(demo_runs, run_id, "-o", "report.html", "--open")
    invoke(demo_runs, run_id, "--format", "md", "--open")
    assert opened == [(tmp_path / "report.html").as_uri(), (tmp_path / f"panel-{run_id}.md").as_uri()]


def test_open_needs_a_file(demo_runs: DemoRuns, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(webbrowser, "open", lambda url: pytest.fail("nothing to open"))
    with pytest.raises(UserError, match=r"^--open needs a file to open; give -o FILE instead of '-'\.$"):
        cli(
            "history",
            "export",
            demo_runs.ids["confer"],
            "-o",
            "-",
            "--open",
            "--db",
            str(demo_runs.db),
            catch_exceptions=False,
            columns=None,
        )


@pytest.mark.parametrize("viewer", [lambda url: False, lambda url: (_ for _ in ()).throw(OSError("no display"))])
def test_no_viewer_is_a_notice_and_the_export_still_succeeds(
    demo_runs: DemoRuns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, viewer: object
) -> None:
    monkeypatch.setattr(webbrowser, "open", viewer)
    target = tmp_path / "r.html"
    stdout, stderr = invoke(demo_runs, demo_runs.ids["confer"], "-o", str(target), "--open")
    assert stdout == ""
    assert stderr == f"Wrote {target}.\nNo viewer could be started for {target}; open it yourself.\n"
    assert target.read_text(encoding="utf-8").startswith("<!doctype html>")


def panel(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "panel_cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )


@pytest.mark.subprocess
def test_bad_input_is_one_sentence_and_exit_2(demo_runs: DemoRuns, tmp_path: Path) -> None:
    """A subprocess: only `main` turns a user error into exit code 2 (cheap: history never loads litellm)."""
    missing = panel("history", "export", "nope", "--db", str(demo_runs.db), cwd=tmp_path)
    assert missing.returncode == 2 and missing.stdout == ""
    assert (
        missing.stderr.splitlines()[-1]
        == "panel: No run has the id 'nope'; `panel history list` shows the stored runs."
    )
    nowhere = tmp_path / "no" / "such" / "folder" / "r.html"
    unwritable = panel(
        "history", "export", demo_runs.ids["confer"], "-o", str(nowhere), "--db", str(demo_runs.db), cwd=tmp_path
    )
    assert unwritable.returncode == 2
    assert unwritable.stderr.splitlines()[-1] == f"panel: Cannot write {nowhere}: No such file or directory."
    folder = panel(
        "history", "export", demo_runs.ids["confer"], "-o", str(tmp_path), "--db", str(demo_runs.db), cwd=tmp_path
    )
    assert (
        folder.returncode == 2
        and folder.stderr.splitlines()[-1] == f"panel: {tmp_path} is a folder; give a file name with -o."
    )
    bad_format = panel(
        "history", "export", demo_runs.ids["confer"], "--format", "pdf", "--db", str(demo_runs.db), cwd=tmp_path
    )
    assert bad_format.returncode == 2 and "'pdf' is not one of 'md', 'json', 'html'" in bad_format.stderr


def imported(stderr: str) -> set[str]:
    """Module names from `python -X importtime`'s report."""
    return {line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


@pytest.mark.subprocess
def test_export_never_imports_litellm_and_history_never_imports_export(demo_runs: DemoRuns, tmp_path: Path) -> None:
    done = panel(
        "history",
        "export",
        demo_runs.ids["council"],
        "-f",
        "html",
        "-o",
        "r.html",
        "--db",
        str(demo_runs.db),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    modules = imported(done.stderr)
    assert "markdown_it" in modules and "panel_cli.export.page" in modules
    assert not {name for name in modules if name.startswith("litellm")}
    listed = panel("history", "list", "--db", str(demo_runs.db), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    modules = imported(listed.stderr)
    assert "panel_cli.cli.history_export" in modules
    assert not {
        name for name in modules if name.startswith(("litellm", "markdown_it", "panel_cli.export", "panel_cli.events"))
    }


def test_export_and_show_json_agree_by_prefix(demo_runs: DemoRuns) -> None:
    run_id = demo_runs.ids["orchestrate"]
    assert export(demo_runs.db, run_id[:8], "-f", "json") == export(demo_runs.db, run_id, "-f", "json")
