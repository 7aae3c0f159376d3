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
from panel_cli.view.output import NO_LIMIT
from panel_cli.wording import plural

if TYPE_CHECKING:
    from panel_cli.store.records import CallRecord, DecisionRecord, RunRecord, RunSummary

QUESTION_PREVIEW = 60
THREAD_PREVIEW = 80
OUTCOME_PREVIEW = 40
MIN_CELL = 6
# As much of a decision's winner, or its counts, as a line of `history decisions` gives them
# on a terminal.
DECISION_CELL = 24
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


def console(*, stderr: bool = False) -> Console:
    """Questions, answers, names and provider errors are data: a `[bold]`, a `[/INST]` or a
    `:smile:` in one of them must print as written, so markup, emoji codes and highlighting
    are off, and styles are applied with `Text`."""
    return Console(stderr=stderr, markup=False, emoji=False, highlight=False)


def table_console() -> Console:
    """The console tables are printed with (`list`, `decisions`, `stats`, `show`): a terminal's
    width, else the width `COLUMNS` gives, else none at all (`table_width`): a pipe has no
    width to fit, and a cut id or question helps no script."""
    found = console()
    if not found.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        found.width = NO_LIMIT
    return found


def table_width(shown: Console) -> int | None:
    """The width a table must fit, None for no limit."""
    return None if shown.width >= NO_LIMIT else shown.width


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
    of the width, the question first (`_share`). A header is never cut: on a narrow terminal
    whole columns give way instead, the panel first (`RUN_COLUMNS_GIVE_WAY`). The id is never
    cut: it is what a person types next. With no `width` (a pipe), nothing is cut."""
    cells = [
        {
            "id": short_ids[run.id],
            "started": _when(run),
            "protocol": run.protocol,
            "panel": run.panel,
            "question": fmt.one_line(run.question, QUESTION_PREVIEW if width else len(run.question) + 1),
            "status": run.status,
            "outcome": fmt.one_line(run.outcome or "", OUTCOME_PREVIEW if width else len(run.outcome or "") + 1),
            "calls": str(run.calls),
            "cost": fmt.basis_cost(run.cost, run.cost_basis, run.unpriced, compact=True),
        }
        for run in runs
    ]
    headers = kept_columns(RUN_COLUMNS, cells, width, flexible=RUN_FLEXIBLE, give_way=RUN_COLUMNS_GIVE_WAY)
    natural = {header: natural_width(header, cells) for header in headers}
    sizes: dict[str, int] = {}
    if width is not None:
        room = width - sum(natural[name] for name in headers if name not in RUN_FLEXIBLE) - (len(headers) - 1)
        shown = [natural[name] if name in headers else 0 for name in RUN_FLEXIBLE]
        sizes = {name: size for name, size in zip(RUN_FLEXIBLE, _share(room, *shown), strict=True) if name in headers}
    styles = [{"status": STATUS_STYLES.get(row["status"], "")} for row in cells]
    return one_line_table(headers, cells, sizes, natural, styles, right=("calls", "cost"))


def one_line_table(
    headers: list[str],
    cells: list[dict[str, str]],
    sizes: Mapping[str, int],
    natural: Mapping[str, int],
    styles: list[dict[str, str]],
    *,
    right: tuple[str, ...] = (),
) -> Table:
    """A table of runs (or decisions), a line each: the columns `headers`, each `sizes` wide
    (one not sized is as wide as its cells, `natural`), every cell cut with an ellipsis rather
    than wrapped, each row's cells styled as `styles` says."""
    table = Table(box=None, pad_edge=False, collapse_padding=True, header_style="bold")
    for header in headers:
        table.add_column(
            header,
            no_wrap=True,
            width=sizes.get(header),
            min_width=natural[header] if header not in sizes else None,
            justify="right" if header in right else "left",
        )
    for row, style in zip(cells, styles, strict=True):
        table.add_row(
            *(Text(row[header], style=style.get(header, ""), no_wrap=True, overflow="ellipsis") for header in headers)
        )
    return table


RUN_COLUMNS = ("id", "started", "protocol", "panel", "question", "status", "outcome", "calls", "cost")
# The columns that share what the others leave, each cut to fit (`_share`), and how narrow
# each may be before another column gives way: the question is what a run is known by.
RUN_FLEXIBLE = {"panel": MIN_CELL, "question": 20, "outcome": MIN_CELL}
# What a terminal too narrow for every column gives up first: the panel (its runs' protocol
# says most of it), then the protocol, the calls, the outcome, the start. The id, the question
# and the status always stay.
RUN_COLUMNS_GIVE_WAY = ("panel", "protocol", "calls", "outcome", "started", "cost")


def natural_width(header: str, rows: list[dict[str, str]]) -> int:
    """The width a column's header and cells need, uncut."""
    return max(cell_len(header), *(cell_len(row[header]) for row in rows))


def kept_columns(
    headers: tuple[str, ...],
    rows: list[dict[str, str]],
    width: int | None,
    *,
    flexible: Mapping[str, int],
    give_way: tuple[str, ...],
) -> list[str]:
    """The columns a table shows at `width`: every one when they fit with their headers whole
    (a `flexible` column cut to its header or the least it names, the others uncut), else
    without those that give way, in order, until they do. No `width`: every column."""
    kept = list(headers)
    if width is None:
        return kept

    def least(header: str) -> int:
        whole = natural_width(header, rows)
        return max(cell_len(header), min(whole, flexible[header])) if header in flexible else whole

    for header in give_way:
        if sum(least(name) for name in kept) + len(kept) - 1 <= width:
            break
        kept.remove(header)
    return kept


def _share(room: int, panel: int, question: int, outcome: int) -> tuple[int, int, int]:
    """Widths for the panel, question and outcome columns in `room` characters: the panel up to
    a fifth and the outcome up to a quarter, the question the rest; what the question does not
    need goes back to the outcome, then the panel. None narrower than its header or MIN_CELL
    (a column left out, of width 0, stays 0)."""
    panel_least, outcome_least = max(MIN_CELL, len("panel")), max(MIN_CELL, len("outcome"))
    panel_width = min(panel, max(panel_least, room // 5))
    outcome_width = min(outcome, max(outcome_least, room // 4))
    question_width = max(MIN_CELL, len("question"), room - panel_width - outcome_width)
    spare = max(0, question_width - question)
    question_width -= spare
    grown = min(outcome, outcome_width + spare)
    spare -= grown - outcome_width
    return min(panel, panel_width + spare), question_width, grown


def _when(run: RunSummary) -> str:
    """A run's start as the list shows it: `11-30 14:54` this year, `2024-11-30` before."""
    if run.status == "damaged" and not run.started_at:
        return fmt.UNKNOWN
    return _moment(run.started_at)


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
    calls = fmt.calls_count(run.calls, run.calls_by_status, noun=True)
    grid.add_row("Totals", f"{calls} · {fmt.tokens(run.tokens)} tokens · {cost}")
    return grid


def _status_detail(run: RunRecord) -> Text:
    """`stale` says whose process is gone, so a person can check that it really is."""
    status = status_text(run.status)
    if run.resumed_by is not None:
        status.append(f" by run {run.resumed_by}, which took it over")
    if run.status == "stale" and run.pid is not None:
        status.append(f" (running, but its process {run.pid}" + (f" on {run.host}" if run.host else "") + " is gone)")
    return status


def thread_table(run: RunRecord, short_ids: Mapping[str, str], *, expand: bool = True) -> Table:
    """The run among its follow-ups, a line each: the runs it follows up, oldest first, then
    the run itself (marked), then its follow-ups indented under the run they follow up. Each
    line is the id, the question and the answer's first line, cut to the width (to
    THREAD_PREVIEW, where there is no width to `expand` to)."""
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
        expand=expand,
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


# What a follow-up may still be when the run it follows up is deleted: one `panel resume`
# continues, which needs the earlier turns from the store.
RESUMABLE_STATUSES = ("interrupted", "failed", "stale")


def follow_ups_note(run: RunRecord, short_ids: Mapping[str, str]) -> str | None:
    """What deleting a run does to its follow-ups, said before asking: `It has 2 follow-ups
    (3f9a2c1b, 77aa01bc); they stay, and their thread will say this run is no longer stored.`
    None when it has none."""
    lines = run.thread.follow_ups
    if not lines:
        return None
    direct = sum(line.depth == 1 for line in lines)
    how_many = plural(len(lines), "follow-up") + (f", {direct} of them direct" if direct < len(lines) else "")
    ids = ", ".join(short_ids[line.run_id] for line in lines[:5]) + (", …" if len(lines) > 5 else "")
    said = f"It has {how_many} ({ids}); {'it stays' if len(lines) == 1 else 'they stay'}, and"
    said += f" {'its' if len(lines) == 1 else 'their'} thread will say this run is no longer stored."
    stopped = [short_ids[line.run_id] for line in lines if line.status in RESUMABLE_STATUSES]
    if stopped:
        said += (
            f" The stopped {'one' if len(stopped) == 1 else 'ones'} ({', '.join(stopped)}) could no longer be resumed."
        )
    return said


def follow_ups_kept(run: RunRecord) -> str:
    """`its 2 follow-ups stay`, for the line that says the run was deleted."""
    count = len(run.thread.follow_ups)
    return "its follow-up stays" if count == 1 else f"its {plural(count, 'follow-up')} stay"


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
    """A decision a line. The topic takes what the rest leaves and is cut, the winner and the
    counts up to DECISION_CELL each; a header is never cut: on a narrow terminal whole columns
    give way instead (`DECISION_COLUMNS_GIVE_WAY`). Nothing is cut with no `width` (a pipe).
    The id is never cut."""
    cells = [
        {
            "id": short_ids[decision.run_id],
            "decided": _moment(decision.decided_at),
            "method": decision.method,
            "winner": decision.winner or "none",
            "votes": _decision_votes(decision),
            "leader": _decision_leader(decision),
            "topic": fmt.one_line(decision.topic, QUESTION_PREVIEW if width else len(decision.topic) + 1),
        }
        for decision in decisions
    ]
    headers = kept_columns(
        DECISION_COLUMNS, cells, width, flexible=DECISION_FLEXIBLE, give_way=DECISION_COLUMNS_GIVE_WAY
    )
    natural = {header: natural_width(header, cells) for header in headers}
    sizes: dict[str, int] = {}
    if width is not None:
        for header in ("winner", "votes"):
            if header in headers:
                sizes[header] = min(natural[header], max(DECISION_CELL, len(header)))
        taken = sum(sizes.get(name, natural[name]) for name in headers if name != "topic")
        sizes["topic"] = max(DECISION_FLEXIBLE["topic"], min(natural["topic"], width - taken - (len(headers) - 1)))
    styles = [{"winner": "" if decision.winner else "yellow"} for decision in decisions]
    return one_line_table(headers, cells, sizes, natural, styles)


DECISION_COLUMNS = ("id", "decided", "method", "winner", "votes", "leader", "topic")
DECISION_FLEXIBLE = {"winner": DECISION_CELL, "votes": DECISION_CELL, "topic": 20}
# What a narrow terminal gives up first: the leader (`votes` says when one chose), the method,
# the counts, the time. The id, the winner and the topic always stay.
DECISION_COLUMNS_GIVE_WAY = ("leader", "method", "votes", "decided")


def _moment(timestamp: float) -> str:
    """A time as a table of runs shows it: `11-30 14:54` this year, `2024-11-30` before."""
    moment = datetime.fromtimestamp(timestamp)
    return moment.strftime("%m-%d %H:%M" if moment.year == datetime.now().year else "%Y-%m-%d")


def _decision_votes(decision: DecisionRecord) -> str:
    """`3 of 4` for the winner's votes; the counts when nothing won."""
    if decision.winner is not None and not decision.leader_override:
        return f"{decision.vote_counts.get(decision.winner, 0)} of {decision.total_votes}"
    return ", ".join(f"{option} {count}" for option, count in decision.vote_counts.items() if count) or "no votes"


def _decision_leader(decision: DecisionRecord) -> str:
    if decision.leader is None:
        return ""
    return f"{decision.leader} (chose)" if decision.leader_override else decision.leader
