"""The run core and everything under it never write to the terminal themselves: what a person sees
goes through the view (or the notice) the caller hands in, so one run serves a terminal, a pipe,
a library caller and a server. Every module is read as a syntax tree; a module that may write is
listed below with the reason."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "panel_cli"
QUIET = ("runs", "protocols", "llm", "store", "tools", "eval")

# Modules of those packages that may write, each with why.
ALLOWED = {
    "tools/group_leader.py": "the body of a separate process (a tool server's group leader), whose stderr is its own",
}

STREAMS = {"stdout", "stderr", "__stdout__", "__stderr__"}
WRITERS = {"print", "pprint", "echo", "secho", "Console"}


def writes(source: str) -> list[str]:
    """Each place `source` writes to the terminal or could: a call of print (or pprint, typer's
    and click's echo, a Rich Console made), any use of sys.stdout or sys.stderr, and Rich's
    Console imported (to be handed one is to draw on someone's terminal)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if name in WRITERS:
                found.append(f"line {node.lineno}: {name}()")
        elif isinstance(node, ast.Attribute) and node.attr in STREAMS:
            if isinstance(node.value, ast.Name) and node.value.id == "sys":
                found.append(f"line {node.lineno}: sys.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module == "sys":
            found += [f"line {node.lineno}: from sys import {a.name}" for a in node.names if a.name in STREAMS]
        elif isinstance(node, ast.ImportFrom) and node.module == "rich.console":
            found += [f"line {node.lineno}: imports Console" for a in node.names if a.name == "Console"]
    return found


def modules() -> list[str]:
    return sorted(str(path.relative_to(PACKAGE)) for folder in QUIET for path in (PACKAGE / folder).rglob("*.py"))


@pytest.mark.parametrize("module", modules())
def test_the_module_writes_nothing_itself(module: str) -> None:
    if module in ALLOWED:
        pytest.skip(ALLOWED[module])
    assert writes((PACKAGE / module).read_text(encoding="utf-8")) == []


def test_every_exception_is_a_module_of_those_packages() -> None:
    assert set(ALLOWED) <= set(modules())


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("print('x')", ["line 1: print()"]),
        ("import sys\nsys.stderr.write('x')", ["line 2: sys.stderr"]),
        ("from sys import stdout", ["line 1: from sys import stdout"]),
        ("from rich.console import Console\nConsole(stderr=True)", ["line 1: imports Console", "line 2: Console()"]),
        ("import rich.console\nrich.console.Console()", ["line 2: Console()"]),
        ("import typer\ntyper.echo('x')", ["line 2: echo()"]),
        ("def f(console):\n    return console.width", []),
    ],
)
def test_a_write_is_found_however_it_is_spelled(source: str, found: list[str]) -> None:
    assert writes(source) == found
