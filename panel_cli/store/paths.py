"""Where the transcript file is: `--db`, else `PANEL_DB`, else panel.db in the user data folder."""

from __future__ import annotations

import os
from pathlib import Path


def default_db_path() -> Path:
    """`PANEL_DB` lets a shell or a test point every command at one file without `--db`."""
    if env := os.environ.get("PANEL_DB"):
        return Path(env).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("panel", appauthor=False)) / "panel.db"


def resolve_db_path(db: Path | str | None = None) -> Path:
    """A `--db` given on the command line wins over `PANEL_DB` and the default."""
    return Path(db).expanduser() if db else default_db_path()
