"""A run as Markdown a person pastes into a ticket: the question, the outcome and the final
answer first, then the panel, each round as tables, the warnings and every call.

Every name and text from a user or a model is escaped, so it reads as written wherever the
ticket is rendered: a `*` stays a star, a `|` cannot break a table, a `<script>` is text. The
final answer keeps its Markdown formatting but not its raw HTML, its images, nor a link to
anything but a web page (`[x](javascript:…)` is text). Terminal controls were taken out of
every text on the way in (`panel_cli.untrusted.clean_text`), and again when the run was read.
"""

from __future__ import annotations

import re
from typing import Any

from markdown_it import MarkdownIt

from panel_cli.export.report import (
    CallRow,
    Chart,
    ColumnKey,
    DelphiGrid,
    Plan,
    Report,
    Stage,
    Verdict,
    VoteSummary,
    call_note,
    cell_text,
    pretty_reply,
    stage_columns,
    utc,
)
from panel_cli.view import fmt
from panel_cli.wording import plural

CELL_LIMIT = 100
TEXT_BAR = 20
# Characters that mean something inline in CommonMark or a GFM table; a backslash makes each literal.
_INLINE = re.compile(r"([\\`*_\[\]<>|~&!#])")
# What makes a line the start of a block (heading, list, quote, thematic break, setext line).
_BLOCK_START = re.compile(r"^(\s*)([#>+=-]|\d+[.)])")
# What reads a model's Markdown as a ticket's renderer would (GitHub's is CommonMark too).
_COMMONMARK = MarkdownIt("commonmark")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# Where a link's destination follows (`](` inline, `]:` defining a reference) and it is not http(s).
_OTHER_LINK = re.compile(r"\]((?:\(|:)\s*(?:&lt;)?)(?!\s*https?://)", re.IGNORECASE)


def render_markdown(report: Report) -> str:
    parts = [_header(report), _final_answer(report), _panel(report), _rounds(report), _warnings(report), _calls(report)]
    return "\n\n".join(part for part in parts if part) + "\n"


def text(value: str) -> str:
    """User or model text on one line, literal."""
    return _INLINE.sub(r"\\\1", value)


def cell(value: str, limit: int = CELL_LIMIT) -> str:
    """A table cell: one line, cut at `limit`, literal."""
    return text(fmt.one_line(value, limit))


def quote(value: str) -> str:
    """Text that may span lines as a block quote, literal: no line of it can open a heading, a
    list or a quote of its own, and each keeps its break."""
    lines = [_BLOCK_START.sub(r"\1\\\2", text(line)) for line in value.splitlines() if line.strip()]
    return "  \n".join(f"> {line}" for line in lines)


def inert(markdown: str) -> str:
    """A model's Markdown with its formatting kept, its raw HTML made text and its images made
    links. Every `<` outside code becomes `&lt;`, so no tag (a `<script>`, a `<details>`, an
    `<img>`) reaches the page the ticket is shown on; every `![` becomes `[image: `, since an
    image a model chose is fetched as the ticket opens (and its URL can carry data away). Code
    keeps both: there they are already text. What is code is what a CommonMark parser reads as
    code, asked again after each change until every line kept as written is code, so no line
    that only looks like a fence (`` ``` `x ``, a fence of a list item the next line leaves)
    keeps its HTML; and a fence the model left open is closed, so it cannot swallow the rest
    of the document."""
    lines = markdown.splitlines()
    defused: set[int] = set()
    while True:
        out = [_outside_code_spans(line) if index in defused else line for index, line in enumerate(lines)]
        fences, code = _code_blocks(out)
        outside = set(range(len(lines))) - code - defused
        if not outside:
            return "\n".join(out + _closing_fence(out, fences))
        defused |= outside


def _code_blocks(lines: list[str]) -> tuple[list[Any], set[int]]:
    """The fenced code blocks of `lines`, and the index of every line inside a code block."""
    tokens = _COMMONMARK.parse("\n".join(lines))
    blocks = [token for token in tokens if token.type in ("fence", "code_block") and token.map]
    code = {index for token in blocks for index in range(*token.map)}  # type: ignore[misc]
    return [token for token in blocks if token.type == "fence"], code


def _closing_fence(lines: list[str], fences: list[Any]) -> list[str]:
    """The line that closes the last fence, when what follows the text would be inside it: at
    the fence's own indent (in a list item, under its text), else at the left margin."""
    if not fences or not _swallows(lines):
        return []
    fence = fences[-1]
    opener = lines[fence.map[0]]
    prefix = opener[: opener.index(fence.markup)]
    indent = re.sub(r"[-+*]|\d+[.)]", lambda marker: " " * len(marker.group()), prefix)
    closers = [indent + fence.markup, fence.markup]
    return [next((closer for closer in closers if not _swallows([*lines, closer])), fence.markup)]


def _swallows(lines: list[str]) -> bool:
    """Whether a paragraph after `lines` would be read as code."""
    _, code = _code_blocks([*lines, "", "after"])
    return len(lines) + 1 in code


def _outside_code_spans(line: str) -> str:
    pieces: list[str] = []
    position = 0
    for match in _CODE_SPAN.finditer(line):
        pieces += [_defuse(line[position : match.start()]), match.group(0)]
        position = match.end()
    pieces.append(_defuse(line[position:]))
    return "".join(pieces)


def _defuse(text: str) -> str:
    """No tag, no image, and no link but to a web page: a `javascript:`, `data:` or `file:`
    link (or any other) is shown as the text it is, its closing bracket escaped."""
    return _OTHER_LINK.sub(r"\\]\1", text.replace("<", "&lt;").replace("![", "[image: "))


def table(headers: list[str], rows: list[list[str]], numeric: set[int] | None = None) -> str:
    numeric = numeric or set()
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---:" if index in numeric else "---" for index in range(len(headers))) + "|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def text_bar(share: float) -> str:
    """A bar drawn with block characters, for a ticket that shows no picture."""
    length = round(max(0.0, min(share, 1.0)) * TEXT_BAR)
    return "`" + ("█" * length).ljust(TEXT_BAR, "·") + "`"


def _header(report: Report) -> str:
    run = report.run
    lines = [f"# {text(report.title)}", "", quote(run.question), ""]
    started = utc(run.started_at) + (f" · {report.duration}" if report.duration else " · not finished")
    facts = [
        ("run", f"`{run.id}`"),
        ("status", text(run.status)),
        ("started", started),
        ("totals", text(report.totals)),
    ]
    if run.error:
        facts.append(("error", cell(run.error, 500)))
    facts += [(name, cell(value, 200)) for name, value in report.facts]
    lines += [f"- **{text(name)}:** {value}" for name, value in facts]
    return "\n".join(lines)


def _final_answer(report: Report) -> str:
    answer = report.run.final_answer
    if not answer:
        reason = (report.run.result or {}).get("failure_reason") or report.run.error
        return "## Final answer\n\n_No answer was reached" + (f": {cell(str(reason), 500)}_" if reason else "._")
    heading = "## Final answer" if report.run.status == "finished" else "## Final answer (no answer reached)"
    return f"{heading}\n\n{inert(answer.strip())}"


def _panel(report: Report) -> str:
    """A member per row; the label and role columns only when some member has one."""
    labelled = any(member.label for member in report.members)
    with_roles = any(member.roles or member.task for member in report.members)
    rows = []
    for member in report.members:
        role = ", ".join(member.roles)
        if member.task:
            role = ", ".join(filter(None, [role, f"task: {fmt.one_line(member.task, 80)}"]))
        row = [*([cell(member.label or "")] if labelled else []), cell(member.name), f"`{cell(member.model)}`"]
        rows.append(row + ([cell(role, 200)] if with_roles else []))
    headers = [*(["label"] if labelled else []), "member", "model", *(["role"] if with_roles else [])]
    return "## Panel\n\n" + table(headers, rows)


def _rounds(report: Report) -> str:
    if not report.stages:
        return ""
    return "## Rounds\n\n" + "\n\n".join(_stage(stage) for stage in report.stages)


def _stage(stage: Stage) -> str:
    parts = [f"### {text(stage.title)}"]
    if stage.plan is not None:
        parts.append(_plan(stage.plan))
    elif stage.rows:
        parts.append(_stage_table(stage))
        parts += _replies(stage)
    if stage.tally is not None:
        parts.append(_chart(stage.tally, "answer" if stage.authors else "member"))
    if stage.aggregate is not None:
        parts.append(_chart(stage.aggregate, "answer"))
    if stage.bias is not None:
        parts.append(_chart(stage.bias, "measure"))
    if stage.vote is not None:
        parts.append(_vote(stage.vote))
    if stage.verdict is not None:
        parts.append(_verdict(stage.verdict))
    if stage.verdict_grid:
        parts.append(_verdict_grid(stage.verdict_grid))
    if stage.delphi is not None:
        parts.append(_delphi(stage.delphi))
    if stage.outcome:
        parts.append(f"**{text(stage.outcome)}**")
    parts += [f"_{text(note)}_" for note in stage.notes]
    parts += [f"> ⚠ {text(warning)}" for warning in stage.warnings]
    return "\n\n".join(parts)


def _stage_table(stage: Stage) -> str:
    columns = stage_columns(stage)
    rows = [[_row_cell(row, column.key) for column in columns] for row in stage.rows]
    numeric = {index for index, column in enumerate(columns) if column.numeric}
    return table([column.header for column in columns], rows, numeric)


def _replies(stage: Stage) -> list[str]:
    """Every reply of the stage whole, under the member who wrote it: a table cell holds only
    its first words."""
    replies = []
    for row in stage.rows:
        if not row.reply.strip():
            continue
        who = (f"{row.label} " if row.label else "") + fmt.who(row.member, row.about)
        note = " _(truncated)_" if row.truncated else ""
        replies.append(f"**{text(who)}**{note}\n\n{quote(pretty_reply(row.reply))}")
    return replies


def _row_cell(row: CallRow, key: ColumnKey) -> str:
    if key == "member":
        return (f"**{text(row.label)}** " if row.label else "") + cell(cell_text(row, key))
    if key == "text":
        value = row.shown if row.shown is not None else pretty_reply(row.reply)
        return cell(value) + (" _(truncated)_" if row.truncated else "")
    return cell(cell_text(row, key))


def _chart(chart: Chart, kind: str) -> str:
    rows = []
    for bar in chart.bars:
        name = cell(bar.key) + (f" · {cell(bar.name)}" if bar.name else "")
        mark = "★" if bar.winner else ""
        rows.append(
            [name, text_bar(bar.share), cell(bar.text) + (f" ({cell(bar.detail)})" if bar.detail else ""), mark]
        )
    lines = [f"**{text(chart.title)}**"]
    if rows:
        lines.append(table([kind, "", chart.measure, ""], rows))
    if chart.note:
        lines.append(f"_{text(chart.note)}_")
    return "\n\n".join(lines)


def _vote(vote: VoteSummary) -> str:
    lines = [f"**{text(vote.rules)}**"]
    if vote.chart is not None:
        lines.append(_chart(vote.chart, "option"))
    lines.append(text(vote.quorum) + (f" · {text(vote.apart)}" if vote.apart else ""))
    if vote.runoff:
        headers = ["option", *(f"round {entry.index}" for entry in vote.runoff)]
        rows = []
        for option in vote.options:
            row = [cell(option)]
            for entry in vote.runoff:
                if option not in entry.counts:
                    row.append("")
                elif entry.eliminated == option:
                    row.append(f"~~{entry.counts[option]}~~ dropped")
                elif entry.winner == option:
                    row.append(f"**{entry.counts[option]}** ★")
                else:
                    row.append(str(entry.counts[option]))
            rows.append(row)
        lines += [
            "**Instant runoff**",
            table(headers, rows),
            "\n".join(f"- {text(line)}" for line in vote.runoff_lines),
        ]
    if vote.outcome:
        lines.append(f"**{text(vote.outcome)}**")
    return "\n\n".join(lines)


def _verdict(verdict: Verdict) -> str:
    if verdict.verdict is None:
        return f"**Verdict:** none usable ({cell(verdict.problem or 'unknown', 300)})"
    lines = [f"**Verdict of {text(verdict.critic)}:** {verdict.verdict}"]
    lines += [f"- **{text(worker)}:** {cell(feedback, 500)}" for worker, feedback in verdict.feedback.items()]
    return "\n".join(lines)


def _verdict_grid(verdicts: list[Verdict]) -> str:
    marks = {"approved": "✓ approved", "rejected": "✗ rejected", "no verdict": "no verdict"}
    rows = [[cell(worker), *(marks[verdict.cell(worker)] for verdict in verdicts)] for worker in verdicts[-1].workers]
    return "**Verdicts**\n\n" + table(["worker", *(f"round {verdict.round}" for verdict in verdicts)], rows)


def _delphi(grid: DelphiGrid) -> str:
    rows = [
        [
            (f"**{text(label)}** " if label else "") + cell(name),
            *(text(grid.states.get(name, {}).get(number, "—")) for number in grid.rounds),
        ]
        for label, name in grid.experts
    ]
    return "**Rounds at a glance**\n\n" + table(["expert", *(f"round {number}" for number in grid.rounds)], rows)


def _plan(plan: Plan) -> str:
    rows = []
    for task in plan.tasks:
        indent = "    " * task.depth + ("└ " if task.depth else "")
        note = task.note or task.title
        rows.append(
            [
                f"{indent}`{cell(task.task_id)}`",
                cell(task.worker),
                cell(", ".join(task.depends_on)),
                task.status,
                "" if task.start is None else f"+{fmt.seconds(task.start)}",
                "" if task.duration is None else fmt.seconds(task.duration),
                cell(note),
            ]
        )
    head = f"**Task graph** · planned by {text(plan.planner)} ({plural(len(plan.tasks), 'subtask')})"
    return head + "\n\n" + table(["task", "worker", "after", "status", "start", "time", "title / output"], rows, {4, 5})


def _warnings(report: Report) -> str:
    if not report.warnings:
        return ""
    return "## Warnings\n\n" + "\n".join(f"- {cell(warning, 500)}" for warning in report.warnings)


def _calls(report: Report) -> str:
    if not report.calls:
        return "## Calls\n\n_No model was called._"
    rows = []
    for number, call in enumerate(report.calls, start=1):
        note = call_note(call)
        rows.append(
            [
                str(number),
                cell(call.member),
                f"`{cell(call.model)}`",
                cell(call.stage),
                "" if call.round is None else str(call.round),
                fmt.seconds(call.latency),
                fmt.tokens(call.tokens_in),
                fmt.tokens(call.tokens_out),
                fmt.call_cost(call.cost, call.model),
                cell(note, 200),
            ]
        )
    headers = ["#", "member", "model", "stage", "round", "latency", "tokens in", "tokens out", "cost", "note"]
    return f"## Calls\n\n{text(report.totals)}\n\n" + table(headers, rows, {0, 4, 5, 6, 7, 8})
