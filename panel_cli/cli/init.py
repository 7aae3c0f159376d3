"""`panel init [DIR]`: starter panel files to copy from, and the default panel.

Each protocol gets two files: `<protocol>.demo.yaml`, which runs offline at once, and
`<protocol>.yaml`, the same panel on real models, to edit. `defaults.yaml` (the members a
command uses when it is given no file and no `--members`) goes to the config directory,
where `panel_cli.runs.panels` looks for it. A file that is already there is never touched:
it may hold the user's edits.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

# Where the package keeps the starter files (package data).
STARTERS = "starters"
DEFAULT_DIR = Path("panels")


def init(
    directory: Path = typer.Argument(
        DEFAULT_DIR, metavar="DIR", help="Where to write the starter panel files.", file_okay=False
    ),
) -> None:
    """Write a starter panel file per protocol (a demo and a real variant) and your default panel."""
    from rich.console import Console
    from rich.text import Text

    from panel_cli.models.aliases import config_dir
    from panel_cli.runs.panels import DEFAULT_PANEL_FILE

    starters = starter_files()
    panels = {name: directory / name for name in starters if name != DEFAULT_PANEL_FILE}
    targets = {**panels, DEFAULT_PANEL_FILE: config_dir() / DEFAULT_PANEL_FILE}
    for folder in {target.parent for target in targets.values()}:
        make_folder(folder)
    written: list[Path] = []
    kept: list[Path] = []
    for name, target in targets.items():
        if write_new(target, starters[name].read_text(encoding="utf-8")):
            written.append(target)
        else:
            kept.append(target)

    console = Console(markup=False, highlight=False, soft_wrap=True)
    if written:
        console.print(f"Wrote {len(written)} file{'' if len(written) == 1 else 's'}:")
        for path in written:
            console.print(Text(f"  {path}"))
    if kept:
        console.print(f"Kept {len(kept)} file{'' if len(kept) == 1 else 's'} already there (not overwritten):")
        for path in kept:
            console.print(Text(f"  {path}"))
    demo = shlex.quote(str(directory / "confer.demo.yaml"))
    console.print()
    console.print(Text(f"Try a panel now, offline: panel run {demo}"))
    console.print(
        Text(
            f"Then edit the models in {directory}/<protocol>.yaml and in {targets[DEFAULT_PANEL_FILE]}"
            " to the ones you use (`panel models` lists the short names), and set each provider's key"
            " in its usual variable (OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY);"
            " `panel validate FILE` shows which keys are set."
        )
    )


def starter_files() -> dict[str, Traversable]:
    """The starter files shipped with the package, by file name."""
    from importlib.resources import files

    entries = sorted(files("panel_cli").joinpath(STARTERS).iterdir(), key=lambda entry: entry.name)
    return {entry.name: entry for entry in entries if entry.name.endswith(".yaml")}


def make_folder(folder: Path) -> None:
    from panel_cli.errors import UserError

    if folder.exists() and not folder.is_dir():
        raise UserError(f"{folder} is a file, not a folder; give a folder to write the panel files to.")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"Cannot create the folder {folder}: {exc.strerror or exc}.") from None


def write_new(path: Path, text: str) -> bool:
    """Write `text` to `path` unless something is already there (False then). Exclusive
    creation, so a file that appears meanwhile is not overwritten either."""
    from panel_cli.errors import UserError

    try:
        with path.open("x", encoding="utf-8") as stream:
            stream.write(text)
    except FileExistsError:
        return False
    except OSError as exc:
        raise UserError(f"Cannot write {path}: {exc.strerror or exc}.") from None
    return True
