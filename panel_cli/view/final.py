"""The end of a run: the final answer as Markdown in a panel, then a one-line summary.

Rich's Markdown costs `panel history show` a sixth of its start (markdown-it, and pygments for
code blocks), and many answers hold no Markdown at all. Those are drawn as the paragraphs
Markdown would make of them, and Markdown is imported only for an answer that needs it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.panel import Panel
from rich.segment import Segment
from rich.text import Text

from panel_cli.untrusted import without_controls
from panel_cli.view.output import NO_LIMIT
from panel_cli.view.summary import ViewTotals, bias_note, summary_fields

if TYPE_CHECKING:
    from panel_cli.events import RunFinished

# What could make CommonMark (with tables and strikethrough, as Rich parses it) read a text as
# more than paragraphs: emphasis, code, escapes, entities, HTML, tables, strikethrough and
# links anywhere; a block marker at the start of a line (heading, quote, list, rule, fence,
# setext underline, table); indentation; trailing spaces (hard breaks); and whitespace other
# than a space or a line break. Conservative: any of them sends the text to Markdown.
MARKDOWN_SYNTAX = re.compile(
    r"[*_`\\<>&|~]"  # inline syntax, HTML, entities, tables, strikethrough
    r"|\](?:[(\[:])"  # a link, a reference or a link definition ([x] alone is text)
    r"|^(?:[#+=-]|\d{1,9}[.)])"  # a block marker opening a line
    r"|^[ \t]|[ \t]$"  # indentation; trailing spaces make a hard break
    r"|[^\S \n]",  # tabs, carriage returns and other whitespace
    re.MULTILINE,
)


class Paragraphs:
    """Plain text drawn exactly as Rich's Markdown draws paragraphs: each paragraph's lines
    joined by a space, left-justified and wrapped, a blank line between paragraphs."""

    def __init__(self, paragraphs: list[str]) -> None:
        self.paragraphs = paragraphs

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        options = options.update(height=None)
        for index, paragraph in enumerate(self.paragraphs):
            if index:
                yield Segment.line()
            yield from console.render(Text(paragraph, justify="left"), options)


def answer_body(answer: str) -> RenderableType:
    """The answer as Markdown, or as its paragraphs when it holds no Markdown syntax; never
    a terminal control (a stored answer may predate their removal on the way in)."""
    answer = without_controls(answer)
    if answer.strip() and "\0" not in answer and not MARKDOWN_SYNTAX.search(answer):
        blocks = re.split(r"\n{2,}", answer.strip("\n"))
        return Paragraphs([block.replace("\n", " ") for block in blocks])
    from rich.markdown import Markdown

    return Markdown(answer)


# A panel's border and padding, each side.
PANEL_EDGES = 4


def answer_width(answer: str, title: str) -> int:
    """The width the answer's box needs to hold its longest line unfolded: a paragraph joined
    into one line, as `Paragraphs` draws it (a Markdown line is a little wider at most, as a
    list's bullet), and never narrower than its title."""
    lines = [" ".join(block.split("\n")) for block in re.split(r"\n{2,}", without_controls(answer))]
    longest = max((cell_len(line) for line in lines), default=0)
    return max(longest, cell_len(title) + PANEL_EDGES) + PANEL_EDGES


def render_final(console: Console, event: RunFinished, totals: ViewTotals | None = None) -> None:
    """Print the final answer and the summary. Without `totals` (calls, tokens, cost counted
    from the run's events) the summary holds only what `event.result` says."""
    if event.final_answer:
        title, style = ("answer", "green") if event.reached_answer else ("no answer reached", "red")
        # A `Text` title: a string would be parsed as markup, which loads Rich's emoji table.
        # Off a terminal with no width to fit, the box is as wide as the answer's longest line.
        width = answer_width(event.final_answer, title) if console.width >= NO_LIMIT else None
        body = answer_body(event.final_answer)
        console.print(Panel(body, title=Text(title), title_align="left", border_style=style, width=width))
    else:
        console.print(Text("No answer was reached.", style="bold red"))
    console.print(summary_line(event, totals, console.width))
    note = bias_note(event.result)
    if note is not None:
        console.print(Text(note, style="dim"))


def summary_line(event: RunFinished, totals: ViewTotals | None, width: int) -> Text:
    """`winner alice · confidence 83% · …`, wrapped between fields only, never inside one."""
    line = Text()
    column = 0
    for name, value in summary_fields(event, totals):
        field = Text.assemble((f"{name} ", "dim"), (value, "bold"))
        if column and column + 3 + field.cell_len > width:
            line.append("\n")
            column = 0
        elif column:
            line.append(" · ", style="dim")
            column += 3
        line.append_text(field)
        column += field.cell_len
    return line
