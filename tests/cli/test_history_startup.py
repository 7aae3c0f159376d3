"""What `panel history list` and `show` load, and what they leave alone. Not timed
(bench/history.py measures): each subprocess test runs the real entry point in a fresh
interpreter and lists the modules it loaded."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import typer
from rich.console import Console
from rich.markdown import Markdown
from rich.panel import Panel
from rich.text import Text
from typer.testing import CliRunner

from panel_cli.cli import app as app_module
from panel_cli.events import RunFinished
from panel_cli.view.final import Paragraphs, answer_body, render_final
from tests.helpers import run_python
from tests.store.sample_runs import ANSWER, confer_run, record

PLAIN_ANSWER = "[simulated] Start with PostgreSQL.\nMeasure it on your real workload.\n\nThen decide."
# Modules a plain-answer `show` does without, and those `history list` does without.
MARKDOWN = ("markdown_it", "rich.markdown", "pygments")
NOT_FOR_LIST = (
    "litellm",
    "asyncio",
    "panel_cli.events",
    "pydantic",
    "panel_cli.view.replay",
    "panel_cli.view.live",
    "rich._emoji_codes",
    *MARKDOWN,
)


def loaded_after(*args: str) -> set[str]:
    """Run `panel ARGS` through `main` in a fresh interpreter; the modules it loaded."""
    code = (
        "import json, sys\n"
        f"sys.argv = ['panel', *{list(args)!r}]\n"
        "from panel_cli.cli.app import main\n"
        "try:\n    main()\nexcept SystemExit as done:\n    assert not done.code, done.code\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout.splitlines()[-1]))


def among(modules: set[str], names: tuple[str, ...]) -> set[str]:
    return {module for module in modules for name in names if module == name or module.startswith(name + ".")}


@pytest.fixture
async def runs(tmp_path: Path) -> Path:
    """Two finished runs: `plain-1`'s answer is plain text, `markdown-2`'s is Markdown."""
    path = tmp_path / "runs.db"
    plain = RunFinished(final_answer=PLAIN_ANSWER, result={"winner": "gpt"})
    await record(path, "plain-1", confer_run("plain-1", ending=plain))
    await record(path, "markdown-2", confer_run("markdown-2"))
    return path


@pytest.mark.subprocess
def test_history_list_loads_no_event_model_view_or_markdown(runs: Path) -> None:
    modules = loaded_after("history", "list", "--db", str(runs))
    assert among(modules, NOT_FOR_LIST) == set()
    assert "panel_cli.store.reader" in modules


@pytest.mark.subprocess
def test_show_of_a_plain_answer_loads_no_markdown(runs: Path) -> None:
    modules = loaded_after("history", "show", "plain-1", "--db", str(runs))
    assert among(modules, (*MARKDOWN, "asyncio", "rich.live", "rich._emoji_codes")) == set()
    assert "litellm" not in modules and "panel_cli.view.history_stages" in modules
    assert among(modules, ("pydantic", "panel_cli.events", "panel_cli.view.replay")) == set(), "drawn from its payloads"


@pytest.mark.subprocess
def test_show_of_a_markdown_answer_loads_markdown(runs: Path) -> None:
    modules = loaded_after("history", "show", "markdown-2", "--db", str(runs))
    assert {"markdown_it", "rich.markdown"} <= modules


def test_a_history_command_builds_only_its_own_click_command(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Typer reads every parameter of a command to build it; `panel history list` builds
    `list` and the root group, none of the other top-level or history commands."""
    built: list[str] = []
    build = typer.main.get_command_from_info

    def counted(command_info: typer.models.CommandInfo, **settings: object) -> object:
        built.append(command_info.name or "")
        return build(command_info, **settings)  # type: ignore[arg-type]

    monkeypatch.setattr(typer.main, "get_command_from_info", counted)
    result = CliRunner().invoke(app_module.app, ["history", "list", "--db", str(runs)])
    assert result.exit_code == 0, result.output
    assert built == ["list"]
    built.clear()
    helped = CliRunner(env={"COLUMNS": "200"}).invoke(app_module.app, ["history", "--help"])
    assert helped.exit_code == 0, helped.output
    assert {"list", "show", "replay", "export", "retally"} <= set(built)
    assert all(f" {name} " in helped.output for name in ("list", "show", "replay", "export", "retally"))


# -- the final answer without Markdown ----------------------------------------------------------

PLAIN_TEXTS = [
    PLAIN_ANSWER,
    "One line.",
    "[simulated] Weigh the long-term consequences; “quoted” words, naïve café, 字字字 wide ones.",
    "\n\nLeading and trailing blank lines.\n\n\n\nA third paragraph after several.\n\n",
    "A [bracketed] note and (parentheses): not a link, 3.5 and 2024.",
    " ".join(["word"] * 80),
]
MARKDOWN_TEXTS = [
    ANSWER,
    "# Heading",
    "- a list item",
    "1. first",
    "2) second",
    "A [link](https://example.com).",
    "A [reference][ref].\n\n[ref]: https://example.com",
    "[shortcut]\n\n[shortcut]: https://example.com",
    "Hard  \nbreak",
    "    indented code",
    "Setext\n===",
    "Setext\n---",
    "`code`",
    "a_b",
    "x < y & z",
    "| a | b |\n|---|---|\n| 1 | 2 |",
    "~~struck~~",
    "tab\there",
    "line\r\nending",
    "no\u00a0break",
    "   ",
    "> quote",
    "+ plus item",
    "back\\slash",
]


def drawn(body: object, width: int, color: bool) -> str:
    stream = io.StringIO()
    console = Console(file=stream, width=width, force_terminal=color, color_system="truecolor" if color else None)
    console.print(Panel(body, title=Text("answer"), title_align="left", border_style="green"))  # type: ignore[arg-type]
    return stream.getvalue()


@pytest.mark.parametrize("text", PLAIN_TEXTS)
def test_an_answer_without_markdown_is_drawn_exactly_as_markdown_draws_it(text: str) -> None:
    body = answer_body(text)
    assert isinstance(body, Paragraphs)
    for width in (24, 80):
        for color in (False, True):
            assert drawn(body, width, color) == drawn(Markdown(text), width, color)


@pytest.mark.parametrize("text", MARKDOWN_TEXTS)
def test_an_answer_with_any_markdown_syntax_goes_to_markdown(text: str) -> None:
    assert isinstance(answer_body(text), Markdown)


def test_the_answer_title_is_not_read_as_markup() -> None:
    stream = io.StringIO()
    render_final(Console(file=stream, width=60), RunFinished(run_id="r1", final_answer="Plain.", result={}))
    assert stream.getvalue().startswith("╭─ answer ─")
