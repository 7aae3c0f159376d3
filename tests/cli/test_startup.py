"""What `panel` imports before it can answer. Not timed (bench/startup.py measures): each test
runs the real entry point in a fresh interpreter and lists the heavy modules it loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version

import pytest

from tests.helpers import ROOT, run_python

pytestmark = pytest.mark.subprocess

HEAVY = ("litellm", "pydantic", "panel_cli.store", "panel_cli.config", "panel_cli.events")


def imported_after(*args: str) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """Run `panel ARGS` through `main` and return which of HEAVY (packages and their
    submodules) ended up in sys.modules, printed as JSON on the last line."""
    code = (
        "import json, sys\n"
        f"sys.argv = ['panel', *{list(args)!r}]\n"
        "from panel_cli.cli.app import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"heavy = {HEAVY!r}\n"
        "print(json.dumps(sorted({h for h in heavy for m in sys.modules if m == h or m.startswith(h + '.')})))\n"
    )
    result = run_python(code)
    return set(json.loads(result.stdout.splitlines()[-1])), result


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["--version"]])
def test_help_and_version_import_nothing_heavy(args: list[str]) -> None:
    heavy, result = imported_after(*args)
    assert heavy == set(), result.stderr
    assert "Usage: panel" in result.stdout or result.stdout.startswith(f"panel {version('panel-cli')}\n")


@pytest.mark.parametrize("args", [["confer", "--help"], ["council", "-h"], ["validate", "-h"], ["mcp", "-h"]])
def test_command_help_imports_nothing_heavy(args: list[str]) -> None:
    heavy, result = imported_after(*args)
    assert heavy == set(), result.stderr
    assert f"Usage: panel {args[0]}" in result.stdout


def test_history_help_does_not_import_litellm() -> None:
    heavy, result = imported_after("history", "list", "--help")
    assert "Usage: panel history list" in result.stdout
    assert "litellm" not in heavy


def test_importtime_of_help_names_no_heavy_module() -> None:
    """The same through `python -X importtime -m panel_cli`, the way a person would check."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "panel_cli", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    modules = {
        line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")
    }
    assert "typer" in modules and "panel_cli.cli.app" in modules
    assert {m for m in modules if m.split(".")[0] in {"litellm", "pydantic"}} == set()
    assert {m for m in modules if m.startswith(("panel_cli.store", "panel_cli.config", "panel_cli.events"))} == set()


@pytest.mark.parametrize("args", [["--help"], ["mcp", "--help"]])
def test_the_mcp_sdk_loads_only_when_panel_mcp_serves(args: list[str]) -> None:
    """`panel --help` lists `panel mcp` and `panel mcp --help` describes it, neither importing
    the SDK (nor anything heavy)."""
    code = (
        "import sys\n"
        f"sys.argv = ['panel', *{args!r}]\n"
        "from panel_cli.cli.app import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types', 'uvicorn', 'jsonschema')))\n"
    )
    result = run_python(code)
    assert result.stdout.splitlines()[-1] == "[]", result.stderr
    assert "mcp" in result.stdout
