"""docs/python.md is the Python API's contract: each of its examples runs as written, offline,
against the demo panels in configs/; the signatures it shows are the functions' own; its table of
options is each protocol's."""

from __future__ import annotations

import inspect
import re

import pytest

import panel_cli
from panel_cli.protocols.registry import specs
from tests.helpers import ROOT

DOC = (ROOT / "docs" / "python.md").read_text(encoding="utf-8")
EXAMPLES = re.findall(r"^```python\n(.*?)^```", DOC, re.DOTALL | re.MULTILINE)
SIGNATURES = re.findall(r"^```text\n(panel_cli\.(\w+)\((.*?)\) -> .*?)\n```", DOC, re.DOTALL | re.MULTILINE)


def test_the_examples_are_found() -> None:
    assert len(EXAMPLES) >= 8
    assert {name for _, name, _ in SIGNATURES} == {"run", "stream"}


@pytest.mark.parametrize("example", EXAMPLES, ids=[f"example-{index + 1}" for index in range(len(EXAMPLES))])
def test_an_example_runs_as_written(example: str, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(ROOT)
    exec(compile(example, "docs/python.md", "exec"), {"__name__": "__main__"})
    assert capsys.readouterr().out.strip()  # every example shows what it got


def rendered(function: object) -> list[str]:
    """A signature as the doc writes it: `name=default`, `*` before the keyword-only ones."""
    parts, starred = [], False
    for parameter in inspect.signature(function).parameters.values():  # type: ignore[arg-type]
        if parameter.kind is parameter.KEYWORD_ONLY and not starred:
            parts.append("*")
            starred = True
        if parameter.kind is parameter.VAR_KEYWORD:
            parts.append(f"**{parameter.name}")
        elif parameter.default is parameter.empty:
            parts.append(parameter.name)
        else:
            parts.append(f"{parameter.name}={parameter.default!r}")
    return parts


@pytest.mark.parametrize(("name", "listed"), [(name, listed) for _, name, listed in SIGNATURES])
def test_a_documented_signature_is_the_functions_own(name: str, listed: str) -> None:
    assert [part.strip() for part in " ".join(listed.split()).split(",")] == rendered(getattr(panel_cli, name))
    assert rendered(panel_cli.arun) == rendered(panel_cli.run)


def test_the_options_table_lists_each_protocols_own_options() -> None:
    rows = dict(re.findall(r"^\| (\w+) \| (`.*`.*) \|$", DOC, re.MULTILINE))
    documented = {protocol: re.findall(r"`(\w+)`", cells) for protocol, cells in rows.items()}
    assert documented == {spec.name: [option.name for option in spec.options] for spec in specs()}
