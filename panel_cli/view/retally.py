"""What `panel history retally` draws: the stored outcome and the recount side by side, then
the runoff's rounds, if any."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from panel_cli.thresholds import as_percent
from panel_cli.view import fmt

if TYPE_CHECKING:
    from panel_cli.protocols.vote.tally import Tally
    from panel_cli.store.records import RunRecord

Outcome = dict[str, Any]


def draw_retally(
    console: Console, run: RunRecord, stored: Outcome | None, recount: Outcome, counted: Tally, retally_id: str
) -> None:
    """`stored` is what the run concluded (None: it never finished), `recount` the re-tally's
    outcome and `counted` its tally."""
    from panel_cli.view.vote import render_rounds

    console.print(
        Text.assemble(
            ("Re-tally of run ", "bold"), (run.id, "bold"), f" ({run.protocol}): ", fmt.one_line(run.question, 100)
        )
    )
    if stored is None:
        console.print(
            Text(f"The run did not finish ({run.status}); there is no stored outcome to compare with.", style="yellow")
        )
    table = Table(header_style="bold")
    for header in ("", "stored", "re-tally"):
        table.add_column(header)
    rows: list[tuple[str, Callable[[Outcome], str]]] = [
        (
            "method",
            lambda o: (
                str(o.get("method"))
                + (f" (more than {as_percent(o['threshold'])})" if isinstance(o.get("threshold"), int | float) else "")
                + (f", tie_break {o['tie_break']}" if o.get("tie_break") else "")
            ),
        ),
        ("quorum", lambda o: f"{o.get('quorum')}, {'met' if o.get('quorum_met') else 'not met'}"),
        *((option, lambda o, option=option: _option_cell(o, option)) for option in counted.options),
        ("votes", lambda o: f"{o.get('total_votes')} of {o.get('ballots_cast')} ballots"),
        (
            "winner",
            lambda o: (
                f"{o['winner']}{' (the leader chose)' if o.get('leader_override') else ''}"
                if o.get("winner")
                else "none"
            ),
        ),
    ]
    if (stored or {}).get("failure_reason") or recount.get("reason"):
        rows.append(("why none", lambda o: str(o.get("failure_reason") or o.get("reason") or "")))
    for name, show in rows:
        table.add_row(
            Text(name), Text(show(stored)) if stored is not None else Text("—", style="dim"), Text(show(recount))
        )
    console.print(table)
    if counted.rounds:
        console.print(render_rounds(counted.rounds))
    console.print(Text(f"Recorded as re-tally {retally_id}; no model was called.", style="dim"))


def _option_cell(outcome: Outcome, option: str) -> str:
    """An option's votes; with weighted voting, their weight too."""
    counts, weights = outcome.get("vote_counts"), outcome.get("weights")
    # A stored result is read as it is: a count or a weight of another shape is shown as text.
    count = counts.get(option) if isinstance(counts, dict) else None
    if count is None:
        return "—"
    weight = weights.get(option) if isinstance(weights, dict) else None
    weighted = outcome.get("method") in ("weighted", "weighted_plurality")
    return f"{count} (weight {weight:g})" if weighted and isinstance(weight, int | float) else str(count)
