"""Data flows one way: config -> run core -> engine -> events -> (view, store). Each rule below is
an arrow that must not point the other way; every import in a module counts, top-level or
inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "panel_cli"


def imports_of(path: Path) -> set[str]:
    """Every module a file imports, absolute names."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def modules_under(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py")) if folder else sorted(PACKAGE.rglob("*.py"))


def offending(paths: list[Path], forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    found = {}
    for path in paths:
        bad = sorted(name for name in imports_of(path) if name.startswith(forbidden))
        if bad:
            found[str(path.relative_to(PACKAGE))] = bad
    return found


@pytest.mark.parametrize(
    ("folder", "forbidden"),
    [
        # Nothing below the command line imports it.
        *[(folder, ("panel_cli.cli",)) for folder in ("runs", "protocols", "llm", "store", "view", "export")],
        *[(folder, ("panel_cli.cli",)) for folder in ("batch", "eval", "estimate", "tools")],
        # The run core runs engines; engines never reach up to it, nor draw or store anything.
        ("protocols", ("panel_cli.runs", "panel_cli.store", "panel_cli.view", "panel_cli.export", "rich")),
        # The gateway serves engines: it knows none of them, nor the run core, store or views.
        ("llm", ("panel_cli.protocols", "panel_cli.runs", "panel_cli.store", "panel_cli.view", "rich")),
        # The store and the views are fed events; they never run anything.
        ("store", ("panel_cli.runs", "panel_cli.protocols", "panel_cli.llm", "panel_cli.view")),
        ("view", ("panel_cli.runs", "panel_cli.llm.gateway", "panel_cli.store.writer")),
    ],
)
def test_no_arrow_points_the_other_way(folder: str, forbidden: tuple[str, ...]) -> None:
    assert offending(modules_under(folder), forbidden) == {}


def test_outside_cli_nothing_imports_the_command_line() -> None:
    """Only `python -m panel_cli` (`__main__`) starts it."""
    paths = [path for path in modules_under("") if path.relative_to(PACKAGE).parts[0] not in ("cli", "__main__.py")]
    assert offending(paths, ("panel_cli.cli",)) == {}


@pytest.mark.parametrize(
    ("folders", "forbidden"),
    [
        # The MCP server sits above the run core and below the command line, which only starts it.
        (("mcp_server",), ("panel_cli.cli",)),
        # Nothing below it serves MCP.
        (
            ("runs", "protocols", "llm", "store", "view", "export", "batch", "eval", "estimate", "tools"),
            ("panel_cli.mcp_server",),
        ),
    ],
)
def test_the_mcp_server_sits_between_the_run_core_and_the_command_line(
    folders: tuple[str, ...], forbidden: tuple[str, ...]
) -> None:
    assert offending([path for folder in folders for path in modules_under(folder)], forbidden) == {}
