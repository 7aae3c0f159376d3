"""What `panel history stats` draws: the totals on a line, then a table by model, by protocol
and by month."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from panel_cli.view import fmt
from panel_cli.wording import plural

if TYPE_CHECKING:
    from panel_cli.store.stats import StatsReport, Usage


def draw_stats(console: Console, path: Path, report: StatsReport) -> None:
    total = report.total
    if not total.runs:
        console.print(Text(f"No runs yet in {path}."), soft_wrap=True)
        return
    cost = fmt.basis_cost(total.cost, total.cost_basis, total.unpriced)
    totals = f"{plural(total.runs, 'run')} · {_calls(total)} · {fmt.tokens(total.tokens)} tokens · cost {cost}"
    console.print(Text(f"{path}: {totals}"), soft_wrap=True)
    groups: list[tuple[str, list[tuple[str, Usage]]]] = [
        ("model", [(row.model, row) for row in report.by_model]),
        ("protocol", [(row.protocol, row) for row in report.by_protocol]),
        ("month", [(row.month, row) for row in report.by_month]),
    ]
    for name, rows in groups:
        console.print()
        console.print(_usage_table(name, rows))


def _usage_table(name: str, rows: list[tuple[str, Usage]]) -> Table:
    """One group of the stats. A demo persona's calls cost nothing, and say so rather than
    showing an unknown price; a group with calls of no price shows `at least`."""
    table = Table(
        title=f"By {name}", title_justify="left", title_style="bold", header_style="bold", box=None, pad_edge=False
    )
    table.add_column(name)
    for header in ("runs", "calls", "tokens", "cost"):
        table.add_column(header, justify="right", no_wrap=True)
    for key, usage in rows:
        cost = fmt.basis_cost(usage.cost, usage.cost_basis, usage.unpriced if name != "model" else ())
        calls = fmt.calls_count(usage.calls, {"late": usage.late})
        table.add_row(Text(key or fmt.UNKNOWN), f"{usage.runs:,}", calls, fmt.tokens(usage.tokens), cost)
    return table


def _calls(usage: Usage) -> str:
    """`12 calls (1 late)`: the late ones (answered after their stage stopped waiting) are told."""
    return fmt.calls_count(usage.calls, {"late": usage.late}, noun=True)
