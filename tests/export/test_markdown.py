"""A model's final answer in the Markdown export keeps its formatting, never its HTML, and cannot
break out of its section: what a CommonMark renderer (GitHub's, a ticket's) makes of the answer
followed by the next section is checked, not the text's look."""

from __future__ import annotations

import pytest
from markdown_it import MarkdownIt

from panel_cli.export.markdown import inert

RENDERER = MarkdownIt("commonmark")
NEXT_SECTION = "\n\n## Panel\n\nthe members"


def rendered(answer: str) -> str:
    return RENDERER.render(inert(answer) + NEXT_SECTION)


@pytest.mark.parametrize(
    "answer",
    [
        "Intro\n```python\nprint(1)",
        "~~~\n<b>open</b>",
        "````\n```\nstill code",
        "x\n```",
        "> fine\n\n```\n<script>alert(1)</script>",
    ],
)
def test_a_fence_left_open_is_closed_before_the_next_section(answer: str) -> None:
    html = rendered(answer)
    assert html.endswith("<h2>Panel</h2>\n<p>the members</p>\n")
    assert "<script>" not in html and "<b>" not in html


@pytest.mark.parametrize(
    "answer",
    [
        "``` `x\n<script>alert(1)</script>\n<img src=x onerror=alert(1)>",
        "- a\n  ```\n<script>alert(1)</script>",
        "<div>\n```\n<script>x</script>\n```",
        "1. item\n   ~~~\n<iframe src=x></iframe>",
    ],
)
def test_a_line_that_only_looks_like_code_keeps_no_html(answer: str) -> None:
    html = rendered(answer)
    assert not any(tag in html for tag in ("<script", "<img", "<iframe", "<div")), html
    assert html.endswith("<h2>Panel</h2>\n<p>the members</p>\n")


def test_code_keeps_its_text_and_formatting_stays() -> None:
    answer = (
        "## Plan\n\n- **one** [docs](https://example.com)\n\n```html\n<b>in a fence</b>\n```\n\n`<i>span</i>` <u>x</u>"
    )
    html = rendered(answer)
    assert "<h2>Plan</h2>" in html and "<strong>one</strong>" in html and '<a href="https://example.com">' in html
    assert '<pre><code class="language-html">&lt;b&gt;in a fence&lt;/b&gt;\n</code></pre>' in html
    assert "<code>&lt;i&gt;span&lt;/i&gt;</code>" in html and "<u>" not in html


def test_a_one_megabyte_line_is_one_paragraph() -> None:
    answer = "<b>" + "L" * 1_000_000
    html = rendered(answer)
    assert html.startswith("<p>&lt;b&gt;LLL") and "<b>" not in html
