"""How `panel history` is put together: the commands in cli/, what they draw in view/, and no
module of the two importing the other in a circle."""

from __future__ import annotations

import ast
from pathlib import Path

import panel_cli

PACKAGE = Path(panel_cli.__file__).parent


def imported(path: Path) -> set[str]:
    """Every module a file imports, at the top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return found


def test_history_export_does_not_import_the_history_commands() -> None:
    """cli/history.py registers `export`; importing it back would be a circle again."""
    assert "panel_cli.cli.history" not in imported(PACKAGE / "cli" / "history_export.py")
    assert "panel_cli.cli.history" not in imported(PACKAGE / "cli" / "history_options.py")


def test_the_history_views_import_nothing_of_the_cli() -> None:
    for name in ("history", "history_json", "stats", "retally"):
        found = imported(PACKAGE / "view" / f"{name}.py")
        assert {module for module in found if module.startswith("panel_cli.cli")} == set(), name
