"""The examples panel ships with run as they are written: every command line in a demo panel
file's header, and the lines the README offers to try, run to their end and raise no warning
(one shows majority reaching no answer where the runoff does: exit 1, as documented)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from panel_cli.protocols.registry import names
from tests.helpers import cli

ROOT = Path(__file__).resolve().parents[1]


def header_lines() -> list[str]:
    """`#   panel <protocol> …` lines at the top of configs/*.yaml, for panels that need no key."""
    found = []
    for path in sorted((ROOT / "configs").glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        demo = "demo/" in text
        for line in re.findall(r"^#\s+(panel .+)$", text, re.MULTILINE):
            words = shlex.split(line.split("#")[0])
            if words[1] in names() and (demo or "--demo" in words):
                found.append(shlex.join(words))
    return found


def readme_lines() -> list[str]:
    """The protocol command lines README.md offers to try in backquotes."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = re.findall(r"`(panel [a-z]+ [^`]*(?:configs/|--demo)[^`]*)`", text)
    return sorted({line for line in lines if shlex.split(line)[1] in names()})


def example(line: str) -> Any:
    """A line whose panel file has tool servers starts them: it is marked `subprocess`."""
    files = [ROOT / word for word in shlex.split(line) if word.endswith(".yaml")]
    with_tools = any(re.search(r"^tools:", file.read_text(encoding="utf-8"), re.MULTILINE) for file in files)
    return pytest.param(line, marks=pytest.mark.subprocess, id=line) if with_tools else line


EXAMPLES = [example(line) for line in sorted(set(header_lines()) | set(readme_lines()))]


def test_the_examples_are_found() -> None:
    assert len(header_lines()) >= 15
    assert 'panel vote --options PostgreSQL MySQL --demo -q "Which database?"' in readme_lines()


@pytest.mark.parametrize("line", EXAMPLES)
def test_an_example_runs_to_its_end_with_no_warning(line: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    words = shlex.split(line)[1:]
    outcome = cli(*words, *([] if "--json" in words else ["--json"]), "--db", str(tmp_path / "r.db"))
    result = json.loads(outcome.stdout)
    assert outcome.exit_code == (0 if result["reached_answer"] else 1), outcome.output
    assert result["warnings"] == []
    assert result["reached_answer"] or line == "panel vote configs/vote.yaml --method majority --json"
