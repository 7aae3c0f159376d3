"""No key in any export, and user and model text escaped in every format.

The runs (tests/export/conftest.py) were made with OPENAI_API_KEY set, against a fake server
whose members echo the key they were sent, with hostile member names, question, options and
replies: `<script>`, `</svg>`, `[/bold]`, raw HTML in Markdown, images, frames and stylesheets
pointing at a trap server, a `javascript:` link.
"""

from __future__ import annotations

import json
import re

import pytest
from markdown_it import MarkdownIt

from tests.export.conftest import HOSTILE_NAMES, HOSTILE_OPTIONS, HOSTILE_QUESTION, KEY, HostileRuns, export
from tests.export.dom import Node, parse

FORMATS = ["md", "json", "html"]


@pytest.mark.parametrize("key_in_env", [False, True], ids=["key-unset", "key-set"])
@pytest.mark.parametrize("export_format", FORMATS)
def test_no_export_holds_the_key(
    export_format: str, key_in_env: bool, hostile_runs: HostileRuns, monkeypatch: pytest.MonkeyPatch
) -> None:
    if key_in_env:
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
    for protocol, run_id in hostile_runs.ids.items():
        text = export(hostile_runs.db, run_id, "--format", export_format, "-o", "-")
        assert KEY not in text, protocol
    council = export(hostile_runs.db, hostile_runs.ids["council"], "--format", export_format, "-o", "-")
    assert "[redacted]" in council, "the echoed key was scrubbed, not merely absent"


def scripted(page: Node) -> list[Node]:
    """Elements that could run or fetch something, or restyle the page."""
    risky = {"script", "img", "iframe", "link", "object", "embed", "base", "form"}
    return [
        node
        for node in page.elements()
        if node.tag in risky
        or any(name.startswith("on") for name in node.attrs)
        or "url(" in node.attrs.get("style", "")
    ]


def test_html_escapes_every_user_and_model_text(hostile_runs: HostileRuns) -> None:
    trap = hostile_runs.trap.url
    text = export(hostile_runs.db, hostile_runs.ids["council"], "-f", "html", "-o", "-")
    page = parse(text)
    assert scripted(page) == []
    assert len(page.select("style")) == 1, "only the page's own stylesheet"
    assert all(svg.classes & {"bar", "dot"} for svg in page.select("svg")), "no svg but the charts'"
    assert '<script>alert("owned")' not in text and "</svg><svg" not in text and "[/bold]" in text
    # Shown as written.
    assert page.one("h1.question").text == HOSTILE_QUESTION
    assert page.one("title").text.startswith(HOSTILE_QUESTION[:40])
    panel = page.one("#panel").text
    assert all(name in panel for name in HOSTILE_NAMES)
    assert (
        '<script>alert("owned")</script> </svg><svg onload="alert(2)"></svg> [/bold] [bold red]loud[/]'
        in page.one("#stage-1").text
    )
    assert all(name in page.one("figure.aggregate").text for name in HOSTILE_NAMES)
    # The final answer keeps its Markdown, not its HTML; links cannot run or load anything.
    answer = page.one("#final-answer .markdown")
    assert answer.one("h2").text == "Plan" and len(answer.select("li")) == 2
    assert "<b>in code</b>" in answer.one("li code").text and "<script>in a fence</script>" in answer.one("pre").text
    assert [(link.attrs["href"], link.text) for link in answer.select("a")] == [
        (f"{trap}/pixel.png", "image: pixel"),
        (f"{trap}/docs", "the docs"),
    ]
    assert all(link.attrs["rel"] == "noopener noreferrer nofollow" for link in answer.select("a"))
    assert "[run me](javascript:alert(3))" in answer.text, "a javascript: link stays text"
    # Every URL is the models' own (whole, or cut short in a preview), and only those two links
    # hold one in an attribute.
    for match in re.finditer(r"https?://[^\s\"'<>)&…]+", text):
        assert match.group(0).startswith(trap) or trap.startswith(match.group(0)), match.group(0)
    holders = [(node.tag, name) for node in page.elements() for name, value in node.attrs.items() if "//" in value]
    assert holders == [("a", "href"), ("a", "href")]


def test_html_escapes_options_and_names_in_charts(hostile_runs: HostileRuns) -> None:
    text = export(hostile_runs.db, hostile_runs.ids["vote"], "-f", "html", "-o", "-")
    page = parse(text)
    assert scripted(page) == []
    assert [row.one("th").text for row in page.one("figure.tally").select("tr")] == HOSTILE_OPTIONS
    assert [row.one("th").text for row in page.one("figure.runoff").select("tbody tr")] == HOSTILE_OPTIONS
    labels = [svg.attrs["aria-label"] for svg in page.one("figure.tally").select("svg.bar")]
    assert [label.rsplit(": ", 1)[0] for label in labels] == HOSTILE_OPTIONS


def md_tables(markdown: str) -> list[list[str]]:
    tables: list[list[str]] = []
    for block in markdown.split("\n\n"):
        lines = block.splitlines()
        if (
            len(lines) > 1
            and lines[0].startswith("| ")
            and re.fullmatch(r"\|(-+:?\|)+", lines[1].replace("---:", "---"))
        ):
            tables.append(lines)
    return tables


@pytest.mark.parametrize("protocol", ["council", "vote"])
def test_markdown_escapes_every_user_and_model_text(protocol: str, hostile_runs: HostileRuns) -> None:
    markdown = export(hostile_runs.db, hostile_runs.ids[protocol], "-f", "md")
    # A ticket renderer that lets HTML through still gets none from a user or a model.
    rendered = parse(MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown))
    assert scripted(rendered) == [] and not rendered.select("svg") and not rendered.select("style")
    assert not rendered.select("b"), "<b> from a name, an option or a reply stays text"
    assert "[/bold]" in rendered.text and HOSTILE_QUESTION in rendered.text
    # A `|` in a name or a reply cannot add a column.
    for table in md_tables(markdown):
        widths = {len(re.findall(r"(?<!\\)\|", line)) for line in table}
        assert len(widths) == 1, table


def test_markdown_final_answer_keeps_its_formatting(hostile_runs: HostileRuns) -> None:
    trap = hostile_runs.trap.url
    markdown = export(hostile_runs.db, hostile_runs.ids["council"], "-f", "md")
    answer = markdown[markdown.index("## Final answer") : markdown.index("## Panel")]
    assert '&lt;script>alert("owned")&lt;/script>' in answer
    assert (
        "## Plan" in answer
        and "- first `<b>in code</b>`" in answer
        and "```html\n<script>in a fence</script>\n```" in answer
    )
    assert f"[image: pixel]({trap}/pixel.png)" in answer, "an image is fetched as the ticket opens; a link is not"


def test_json_is_the_stored_text_as_written(hostile_runs: HostileRuns) -> None:
    """JSON is data for a script: the texts as the models wrote them (JSON-escaped only)."""
    exported = json.loads(export(hostile_runs.db, hostile_runs.ids["council"], "-f", "json"))
    assert exported["question"] == HOSTILE_QUESTION
    assert [member["name"] for member in exported["members"]] == HOSTILE_NAMES
    assert exported["final_answer"].startswith('<script>alert("owned")</script>')
