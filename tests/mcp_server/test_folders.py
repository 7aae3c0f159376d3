"""The panel folder and the files folder: a name is a panel only when it is a regular file whose
real path lies inside the folder; anything else is refused in one sentence naming what is there."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from panel_cli.errors import UserError
from panel_cli.mcp_server.folders import FilesFolder, PanelFolder


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    panels = tmp_path / "panels"
    panels.mkdir()
    for name in ("b.yaml", "a.yml", "a.yaml", ".hidden.yaml", "notes.txt"):
        (panels / name).write_text("members: []\n", encoding="utf-8")
    (panels / "sub.yaml").mkdir()  # a folder named like a panel
    os.mkfifo(panels / "pipe.yaml")  # would block whoever opened it
    (tmp_path / "outside.yaml").write_text("members: []\n", encoding="utf-8")
    (panels / "out.yaml").symlink_to(tmp_path / "outside.yaml")
    (panels / "dangling.yaml").symlink_to(tmp_path / "gone.yaml")
    (panels / "in.yaml").symlink_to(panels / "b.yaml")
    return panels


def test_only_regular_files_inside_the_folder_are_panels(folder: Path) -> None:
    files = PanelFolder(folder).files()
    assert list(files) == ["a", "b", "in"]
    assert files["a"] == folder / "a.yaml"  # .yaml before .yml


@pytest.mark.parametrize(
    "name", ["../outside", "out", "/etc/passwd", "sub", "pipe", "dangling", ".hidden", "a.yaml", ""]
)
def test_anything_else_is_refused_naming_the_panels(folder: Path, name: str) -> None:
    with pytest.raises(UserError) as refused:
        PanelFolder(folder).file(name)
    assert refused.value.message == f"'{name}' is not a panel in {folder}; the panels there: a, b, in."


def test_an_empty_folder_says_so(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"'x' is not a panel in .*; it holds no panel file \(\*\.yaml\)\."):
        PanelFolder(tmp_path).file("x")


def test_a_quoted_name_is_cleaned_and_short(folder: Path) -> None:
    with pytest.raises(UserError) as refused:
        PanelFolder(folder).file("\x1b[2J" + "x" * 500)
    assert refused.value.message.startswith("'" + "x" * 79 + "…' is not a panel")


def test_attachments_stay_inside_the_files_folder(tmp_path: Path) -> None:
    files = tmp_path / "files"
    (files / "docs").mkdir(parents=True)
    (files / "docs" / "brief.md").write_text("brief", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("secret", encoding="utf-8")
    (files / "leak.txt").symlink_to(tmp_path / "secret.txt")
    (files / "docs" / "up.md").symlink_to(files / "docs" / "brief.md")
    folder = FilesFolder(files)

    assert folder.file("docs/brief.md") == files / "docs" / "brief.md"
    assert folder.file("docs/up.md") == files / "docs" / "up.md"
    for entry in (
        "leak.txt",
        "../secret.txt",
        "docs/../../secret.txt",
        str(tmp_path / "secret.txt"),
        "docs",
        "no.md",
        "a\x00b",
    ):
        with pytest.raises(UserError, match=r"^attach: '.*' is not a file in .*; give a path inside that folder\.$"):
            folder.file(entry)
