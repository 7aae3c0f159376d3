"""The two folders an agent chooses from, and nothing else: the panels (`--panels DIR`) and the
files it may attach (`--files DIR`).

A panel file is code (it can start commands and send keys where it says), so an agent never
gives one: it names a file the user put in the panel folder, by its name without the extension.
Only regular files whose real path lies inside the folder count, so `../x`, an absolute path or
a symlink that leads out of the folder is no panel, and is refused in one sentence naming the
panels there. Attachments follow the same rule inside the files folder.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from panel_cli.errors import UserError
from panel_cli.untrusted import clean_text

PANEL_SUFFIXES = (".yaml", ".yml")
# The panel a tool runs when the agent names none.
DEFAULT_PANEL = "default"
# How much of a name the agent gave an error quotes back.
QUOTED = 80


def quoted(value: str) -> str:
    """What the agent gave, as an error quotes it: on one line, cleaned, and short."""
    text = " ".join(clean_text(value).split())
    return f"'{text if len(text) <= QUOTED else text[: QUOTED - 1] + '…'}'"


def real_file_inside(folder: Path, path: Path) -> bool:
    """Whether `path`, followed through every symlink, is a regular file inside `folder`."""
    real = Path(os.path.realpath(path))
    if not real.is_relative_to(Path(os.path.realpath(folder))):
        return False
    try:
        return stat.S_ISREG(os.stat(real).st_mode)
    except OSError:
        return False


@dataclass(frozen=True)
class PanelFolder:
    """`--panels DIR`: the panel files an agent may run, by name."""

    path: Path

    def files(self) -> dict[str, Path]:
        """Every panel here by name (a `.yaml` before a `.yml` of the same name), sorted."""
        try:
            entries = sorted(self.path.iterdir())
        except OSError as error:
            raise UserError(f"Cannot read the panel folder {self.path}: {error.strerror}.") from None
        found: dict[str, Path] = {}
        for entry in entries:
            visible = entry.suffix in PANEL_SUFFIXES and not entry.name.startswith(".")
            if visible and entry.stem not in found and real_file_inside(self.path, entry):
                found[entry.stem] = entry
        return dict(sorted(found.items()))

    def file(self, name: str) -> Path:
        """The file of the panel called `name`; UserError naming the panels here for anything else."""
        files = self.files()
        if name not in files:
            raise self.not_a_panel(name, files)
        return files[name]

    def not_a_panel(self, name: str, files: dict[str, Path]) -> UserError:
        return UserError(f"{quoted(name)} is not a panel in {self.path}; {self.listing(files)}.")

    def listing(self, files: dict[str, Path] | None = None) -> str:
        names = list(files if files is not None else self.files())
        return f"the panels there: {', '.join(names)}" if names else "it holds no panel file (*.yaml)"


@dataclass(frozen=True)
class FilesFolder:
    """`--files DIR`: the files an agent may attach, by their path inside the folder."""

    path: Path

    def file(self, entry: str) -> Path:
        """The file `entry` names inside the folder; UserError for a path that leaves it (`..`, an
        absolute path, a symlink out), for a file that is not there, and for anything not a
        regular file. What the file holds is checked as every attachment is, when the run reads it."""
        relative = Path(entry)
        if not entry or "\x00" in entry or relative.is_absolute() or ".." in relative.parts:
            raise UserError(f"attach: {quoted(entry)} is not a file in {self.path}; give a path inside that folder.")
        path = self.path / relative
        if not real_file_inside(self.path, path):
            raise UserError(f"attach: {quoted(entry)} is not a file in {self.path}; give a path inside that folder.")
        return path
