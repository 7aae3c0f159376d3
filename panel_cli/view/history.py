"""What `panel history` draws of stored runs: the runs table of `list`, the header, thread and
calls of `show`, the table of `decisions`, and the console they all print with.

Imported by every history command, so it loads Rich's tables and nothing more: the event models
and the protocols' views come in only with `show` and `replay`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from panel_cli.store.records import THREAD_LIMIT
from panel_cli.view import fmt
from panel_cli.wording import plural

if TYPE_CHECKING:
    from panel_cli.store.records import CallRecord, DecisionRecord, RunRecord, RunSummary

QUESTION_PREVIEW = 60
THREAD_PREVIEW = 80
OUTCOME_PREVIEW = 40
MIN_CELL = 6
STATUS_STYLES = {
    "running": "yellow",
    "stale": "red",
    "finished": "green",
    "no_answer": "yellow",
    "failed": "red",
    "interrupted": "magenta",
    "resumed": "cyan",
    "damaged": "bold red",
}
# Off a terminal, with no COLUMNS, a table is drawn at its own width, whatever that is: a
# pipe has no width to fit, and a cut id or question helps no script.
UNLIMITED = 1_000_000


def console(*, stderr: bool = False) -> Console:
    """Questions, answers, names and provider errors are data: a `[bold]`, a `[/INST]` or a
    `:smile:` in one of them must print as written, so markup, emoji codes and highlighting
    are off, and styles are applied with `Text`."""
    return Console(stderr=stderr, markup=False, emoji=False, highlight=False)


def table_console() -> Console:
    """The console a table of runs is printed with: a terminal's width, else the width
    `COLUMNS` gives, else none at all (`table_width`)."""
    found = console()
    if found.is_terminal or os.environ.get("COLUMNS", "").isdigit():
        return found
    return Console(markup=False, emoji=False, highlight=False, width=UNLIMITED)


def table_width(shown: Console) -> int | None:
    """The width a table of runs must fit, None for no limit."""
    return None if shown.width >= UNLIMITED else shown.width


def local_time(timestamp: float, seconds: bool = True) -> str:
    """Local time, which is what a person remembers a run by."""
    return datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")


def started(run: RunSummary, seconds: bool = True) -> str:
    """When a run started, or that its row does not say (a damaged run)."""
    if run.status == "damaged" and not run.started_at:
        return "unknown time"
    return local_time(run.started_at, seconds)


def status_text(status: str) -> Text:
    return Text(status, style=STATUS_STYLES.get(status, ""))


# -- `history list` ----------------------------------------------------------------------


def runs_table(runs: list[RunSummary], short_ids: Mapping[str, str], width: int | None) -> Table:
    """The runs, one per line. Every cell is a `Text` cut with an ellipsis rather than wrapped,
    so a run stays one line; the panel, question and outcome share what the other columns leave
    of the width, the question first (`_share`). The id is never cut: it is what a person types
    next. With no `width` (a pipe), nothing is cut."""
    rows = [
        [
            short_ids[run.id],
            _when(run),
            run.protocol,
            run.panel,
            fmt.one_line(run.question, QUESTION_PREVIEW if width else len(run.question) + 1),
            run.status,
            fmt.one_line(run.outcome or "", OUTCOME_PREVIEW if width else len(run.outcome or "") + 1),
            str(run.calls),
            fmt.basis_cost(run.cost, run.cost_basis, run.unpriced),
        ]
        for run in runs
    ]
    headers = ["id", "started", "protocol", "panel", "question", "status", "outcome", "calls", "cost"]
    natural = [max(cell_len(header), *(cell_len(row[index]) for row in rows)) for index, header in enumerate(headers)]
    flexible = {headers.index(name): natural[headers.index(name)] for name in ("panel", "question", "outcome")}
    sizes: dict[int, int] = {}
    if width is not None:
        room = width - sum(size for index, size in enumerate(natural) if index not in flexible) - (len(headers) - 1)
        sizes = dict(zip(flexible, _share(room, *flexible.values()), strict=True))
    table = Table(box=None, pad_edge=False, collapse_padding=True, header_style="bold")
    for index, header in enumerate(headers):
        table.add_column(
            header,
            no_wrap=True,
            width=sizes.get(index),
            min_width=natural[index] if header == "id" else None,
            justify="right" if header in ("calls", "cost") else "left",
        )
    for row in rows:
        cells = [Text(cell, no_wrap=True, overflow="ellipsis") for cell in row]
        cells[headers.index("status")].stylize(STATUS_STYLES.get(row[headers.index("status")], ""))
        table.add_row(*cells)
    return table


def _share(room: int, panel: int, question: int, outcome: int) -> tuple[int, int, int]:
    """Widths for the panel, question and outcome columns in `room` characters: the panel up to
    a fifth and the outcome up to a quarter, the question the rest; what the question does not
    need goes back to the outcome, then the panel. None narrower than MIN_CELL."""
    panel_width = min(panel, max(MIN_CELL, room // 5))
    outcome_width = min(outcome, max(MIN_CELL, room // 4))
    question_width = max(MIN_CELL, room - panel_width - outcome_width)
    spare = max(0, question_width - question)
    question_width -= spare
    grown = min(outcome, outcome_width + spare)
    spare -= grown - outcome_width
    return min(panel, panel_width + spare), question_width, grown


def _when(run: RunSummary) -> str:
    """A run's start as the list shows it: `11-30 14:54` this year, `2024-11-30` before."""
    if run.status == "damaged" and not run.started_at:
        return fmt.UNKNOWN
    moment = datetime.fromtimestamp(run.started_at)
    return moment.strftime("%m-%d %H:%M" if moment.year == datetime.now().year else "%Y-%m-%d")


def nothing_found(
    path: Path, total: int, status: str | None, protocol: str | None, search: str | None, since: float | None
) -> str:
    """An empty filter must not read as an empty store: say what was asked for, and how many
    runs there are in all (`total`)."""
    if not total:
        return f"No runs yet in {path}."
    kind = " ".join(word for word in (status, protocol) if word)
    asked = f"No {kind} runs" if kind else "No runs"
    if search is not None:
        asked += f" matching '{search}'"
    if since is not None:
        asked += f" since {local_time(since, seconds=False)}"
    return f"{asked} in {path} ({plural(total, 'run')} in all)."


# -- `history show` ----------------------------------------------------------------------


def run_header(run: RunRecord) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    grid.add_row("Run", Text(run.id))
    grid.add_row("Question", Text(run.question))
    grid.add_row("Status", _status_detail(run))
    if run.resumed_from is not None:
        grid.add_row("Resumes", Text(f"run {run.resumed_from}, which stopped before its end"))
    if run.damage:
        grid.add_row(
            "Damage",
            Text(f"{run.damage}: shown as far as it can be read; `panel history delete` removes it.", style="red"),
        )
    if run.error:
        grid.add_row("Error", Text(run.error))
    grid.add_row("Protocol", Text(f"{run.protocol} · panel {run.panel}"))
    if run.members:
        members = ", ".join(
            f"{member.label} " * bool(member.label) + f"{member.name} ({member.model})" for member in run.members
        )
        grid.add_row("Members", Text(members))
    grid.add_row("Started", started(run))
    if run.finished_at is not None:
        grid.add_row("Ended", f"{local_time(run.finished_at)} ({run.finished_at - run.started_at:.1f}s)")
    cost = fmt.basis_cost(run.cost, run.cost_basis, run.unpriced)
    grid.add_row("Totals", f"{plural(run.calls, 'call')} · {fmt.tokens(run.tokens)} tokens · {cost}")
    return grid


def _status_detail(run: RunRecord) -> Text:
    """`stale` says whose process is gone, so a person can check that it really is."""
    status = status_text(run.status)
    if run.resumed_by is not None:
        status.append(f" by run {run.resumed_by}, which took it over")
    if run.status == "stale" and run.pid is not None:
        status.append(f" (running, but its process {run.pid}" + (f" on {run.host}" if run.host else "") + " is gone)")
    return status


def thread_table(run: RunRecord, short_ids: Mapping[str, str]) -> Table:
    """The run among its follow-ups, a line each: the runs it follows up, oldest first, then
    the run itself (marked), then its follow-ups indented under the run they follow up. Each
    line is the id, the question and the answer's first line, cut to the width."""
    ancestors = run.thread.ancestors
    ids = [f"  {short_ids[line.run_id]}" for line in ancestors] + [f"▸ {short_ids[run.id]}"]
    ids += [f"{'  ' * line.depth}↳ {short_ids[line.run_id]}" for line in run.thread.follow_ups]
    table = Table(
        title="Thread",
        title_justify="left",
        title_style="bold",
        box=None,
        pad_edge=False,
        show_header=False,
        expand=True,
    )
    table.add_column(no_wrap=True, min_width=max(cell_len(cell) for cell in ids))
    table.add_column(no_wrap=True, overflow="ellipsis", ratio=1)
    table.add_column(no_wrap=True, overflow="ellipsis", ratio=1)
    oldest_parent = ancestors[0].parent_id if ancestors else run.parent_id
    if oldest_parent is not None:
        gap = (
            "earlier runs not shown"
            if len(ancestors) >= THREAD_LIMIT
            else f"follows up {oldest_parent}, no longer stored"
        )
        table.add_row(Text("  …", style="dim"), Text(gap, style="dim"), Text(""))
    answer = fmt.one_line(run.final_answer, THREAD_PREVIEW) if run.final_answer is not None else None
    lines = [(line.question, line.answer_preview, line.status, "") for line in ancestors]
    lines.append((run.question, answer, run.status, "bold"))
    lines += [(line.question, line.answer_preview, line.status, "") for line in run.thread.follow_ups]
    for cell, (question, preview, status, style) in zip(ids, lines, strict=True):
        question_cell = Text(fmt.one_line(question, THREAD_PREVIEW), style=style, no_wrap=True, overflow="ellipsis")
        table.add_row(Text(cell, style=style), question_cell, _thread_answer(preview, status))
    return table


def _thread_answer(answer: str | None, status: str) -> Text:
    """A run's answer on its thread line; a run with none shows its status instead."""
    if answer is None:
        return status_text(status)
    return Text(f"→ {answer}", no_wrap=True, overflow="ellipsis")


def unfinished(run: RunRecord) -> Text:
    """What a run with no end is: still going, or never to end (its events stop where it died)."""
    if run.status == "stale":
        said = "The run never ended: its process is gone (it crashed or was killed); `panel resume` can continue it."
    else:
        said = "The run is still going; this is how far it has come."
    return Text(said, style=STATUS_STYLES[run.status])


def calls_table(calls: list[CallRecord]) -> Table:
    """One row per call. A failure shows its clean message; the provider's raw `detail` stays
    in the store (and `--json`) for whoever debugs it."""
    table = Table(title="Calls", header_style="bold")
    table.add_column("member")
    table.add_column("stage")
    table.add_column("round", justify="right")
    table.add_column("latency", justify="right")
    table.add_column("tokens", justify="right")
    table.add_column("cost", justify="right")
    table.add_column("note")
    for call in calls:
        known = [count for count in (call.tokens_in, call.tokens_out) if count is not None]
        table.add_row(
            Text(fmt.who(call.member, call.about)),
            Text(call.stage),
            fmt.UNKNOWN if call.round is None else str(call.round),
            fmt.UNKNOWN if call.latency is None else f"{call.latency:.1f}s",
            fmt.tokens(sum(known) if known else None),
            fmt.call_cost(call.cost, call.model),
            _note(call),
        )
    return table


def _note(call: CallRecord) -> Text:
    if call.error_kind:
        return Text.assemble((call.error_kind, "red"), f": {call.error or ''}")
    note = Text("reused (paid by the run resumed)", style="cyan") if call.reused else Text("")
    if call.late:
        note.append(fmt.LATE_NOTE, style="yellow")
    if call.truncated:
        note.append(("; " if note else "") + "reply truncated", style="yellow")
    return note


def print_plain_answer(console: Console, payloads: list[dict[str, Any]]) -> None:
    """The plain view leaves the answer to its caller, as a run off a terminal prints it on
    stdout after the progress lines."""
    finished = next((payload for payload in reversed(payloads) if payload.get("type") == "run_finished"), None)
    answer = finished.get("final_answer") if finished is not None else None
    if isinstance(answer, str):
        console.print()
        console.print(Text(answer.rstrip()), soft_wrap=True)  # as written, not wrapped


# -- `history decisions` -----------------------------------------------------------------


def decisions_table(decisions: list[DecisionRecord], short_ids: Mapping[str, str], width: int | None = 80) -> Table:
    """A decision a line; the topic takes what the rest leaves and is cut (not at all with no
    `width`: a pipe). The id is never cut."""
    table = Table(box=None, pad_edge=False, collapse_padding=True, header_style="bold")
    longest = max((len(short_ids[decision.run_id]) for decision in decisions), default=2)
    table.add_column("id", no_wrap=True, min_width=longest)
    for name in ("decided", "method", "winner", "votes", "leader"):
        table.add_column(name, no_wrap=True)
    table.add_column("topic")
    for decision in decisions:
        table.add_row(
            Text(short_ids[decision.run_id]),
            local_time(decision.decided_at, seconds=False),
            Text(decision.method),
            Text(decision.winner or "none", style="" if decision.winner else "yellow"),
            Text(_decision_votes(decision)),
            Text(_decision_leader(decision)),
            Text(
                fmt.one_line(decision.topic, QUESTION_PREVIEW if width else len(decision.topic) + 1),
                no_wrap=True,
                overflow="ellipsis",
            ),
        )
    return table


def _decision_votes(decision: DecisionRecord) -> str:
    """`3 of 4` for the winner's votes; the counts when nothing won."""
    if decision.winner is not None and not decision.leader_override:
        return f"{decision.vote_counts.get(decision.winner, 0)} of {decision.total_votes}"
    return ", ".join(f"{option} {count}" for option, count in decision.vote_counts.items() if count) or "no votes"


def _decision_leader(decision: DecisionRecord) -> str:
    if decision.leader is None:
        return ""
    return f"{decision.leader} (chose)" if decision.leader_override else decision.leader
