"""The end of a run: the final answer as Markdown in a panel, then a one-line summary."""

from __future__ import annotations

from rich.console import Console
from rich.markdown import Markdown
from rich.panel import Panel
from rich.text import Text

from panel_cli.events import RunFinished
from panel_cli.view.summary import ViewTotals, summary_fields


def render_final(console: Console, event: RunFinished, totals: ViewTotals | None = None) -> None:
    """Print the final answer and the summary. Without `totals` (calls, tokens, cost counted
    from the run's events) the summary holds only what `event.result` says."""
    if event.final_answer:
        title, style = ("answer", "green") if event.reached_answer else ("no answer reached", "red")
        console.print(Panel(Markdown(event.final_answer), title=title, title_align="left", border_style=style))
    else:
        console.print(Text("No answer was reached.", style="bold red"))
    console.print(summary_line(event, totals, console.width))


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
