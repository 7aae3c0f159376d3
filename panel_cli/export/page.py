"""A run as one HTML file a person can share: inline CSS, inline SVG charts, no script, and
nothing fetched, so it opens the same anywhere, offline, years later.

Every name and text from a user or a model goes through `esc` (or, for the final answer,
through markdown-it with raw HTML off, so it is text too); the page's own markup is the only
markup. A Content-Security-Policy forbids every fetch, so even a link or image a model wrote
could not load anything: images in the answer become links a reader may follow on purpose.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, version
from importlib.resources import files
from typing import Any

from markdown_it import MarkdownIt

from panel_cli.export.report import (
    Bar,
    CallRow,
    Chart,
    ColumnKey,
    DelphiGrid,
    Plan,
    Report,
    Stage,
    Task,
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

PREVIEW = 160
# Nothing may load: styles are inline, images only as data URIs (the page has none).
POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
STATUS_TONES = {
    "finished": "good",
    "answered": "good",
    "succeeded": "good",
    "approved": "good",
    "no_answer": "warn",
    "running": "info",
    "stale": "warn",
    "interrupted": "warn",
    "resumed": "info",
    "timed out": "warn",
    "skipped": "warn",
    "failed": "bad",
    "rejected": "bad",
}


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def render_html(report: Report) -> str:
    run = report.run
    body = "\n".join(
        part
        for part in (
            _masthead(report),
            _final_answer(report),
            _outcome(report),
            _panel(report),
            _stages(report),
            _warnings(report),
            _calls(report),
            _footer(report),
        )
        if part
    )
    return (
        "<!doctype html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">\n'
        f'<meta name="generator" content="panel {esc(panel_version())}">\n'
        f"<title>{esc(fmt.one_line(run.question, 80))} · panel {esc(run.protocol)}</title>\n"
        f"<style>\n{stylesheet()}</style>\n</head>\n"
        f'<body>\n<main class="report protocol-{esc(run.protocol)}">\n{body}\n</main>\n</body>\n</html>\n'
    )


def stylesheet() -> str:
    return files("panel_cli.export").joinpath("report.css").read_text(encoding="utf-8")


def panel_version() -> str:
    try:
        return version("panel-cli")
    except PackageNotFoundError:
        return "unknown"


# Markdown -------------------------------------------------------------------------------------


def _image_as_link(renderer: Any, tokens: list[Any], index: int, options: Any, env: Any) -> str:
    """An image in a model's answer would be fetched when the page opens; a link is not."""
    token = tokens[index]
    source = token.attrGet("src") or ""
    alt = renderer.renderInlineAsText(token.children or [], options, env) or source
    return f'<a class="image-link" href="{esc(source)}" rel="noopener noreferrer nofollow">image: {esc(alt)}</a>'


def _link_open(renderer: Any, tokens: list[Any], index: int, options: Any, env: Any) -> str:
    tokens[index].attrSet("rel", "noopener noreferrer nofollow")
    return renderer.renderToken(tokens, index, options, env)


def markdown_html(text: str) -> str:
    """A model's Markdown as HTML: CommonMark with tables and strikethrough; raw HTML in it
    is escaped, `javascript:` links are dropped (markdown-it's own check), images are links."""
    parser = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    parser.add_render_rule("image", _image_as_link)
    parser.add_render_rule("link_open", _link_open)
    return parser.render(text)


# Building blocks ------------------------------------------------------------------------------


def badge(text: str, tone: str | None = None) -> str:
    tone = tone or STATUS_TONES.get(text, "")
    return f'<span class="badge {tone}">{esc(text)}</span>'


def label(text: str | None) -> str:
    return f'<span class="label">{esc(text)}</span>' if text else ""


def bar_svg(share: float, *, tone: str = "", marker: float | None = None, half: bool = False, name: str = "") -> str:
    """A horizontal bar as long as `share` (0–1) of its track; `marker` draws a reference mark
    (what chance gives), `half` the majority line of a runoff round."""
    width = f"{max(0.0, min(share, 1.0)) * 100:.2f}%"
    parts = [
        f'<svg class="bar" width="100%" height="16" role="img" aria-label="{esc(name)}">',
        '<rect class="track" x="0" y="0" width="100%" height="16" rx="4"></rect>',
        f'<rect class="fill {tone}" x="0" y="0" width="{width}" height="16" rx="4"></rect>',
    ]
    if marker is not None:
        x = f"{max(0.0, min(marker, 1.0)) * 100:.2f}%"
        parts.append(f'<line class="marker" x1="{x}" x2="{x}" y1="-3" y2="19"></line>')
    if half:
        parts.append('<line class="half" x1="50%" x2="50%" y1="-3" y2="19"></line>')
    parts.append("</svg>")
    return "".join(parts)


def span_svg(start: float, length: float, status: str, name: str) -> str:
    """A subtask on the timeline: from `start` for `length`, both shares of the whole span."""
    x = f"{max(0.0, min(start, 1.0)) * 100:.2f}%"
    width = f"{max(0.005, min(length, 1.0 - start)) * 100:.2f}%"
    return (
        f'<svg class="bar" width="100%" height="16" role="img" aria-label="{esc(name)}">'
        '<rect class="track" x="0" y="0" width="100%" height="16" rx="4"></rect>'
        f'<rect class="span {esc(status)}" x="{x}" y="0" width="{width}" height="16" rx="4"></rect></svg>'
    )


def dot_svg(state: str) -> str:
    kind = state.split(" ")[0]
    return f'<svg class="dot {esc(kind)}" width="10" height="10" aria-hidden="true"><circle cx="5" cy="5" r="5"></circle></svg>'


def table(headers: Iterable[tuple[str, bool]], rows: Iterable[str], css: str = "") -> str:
    head = "".join(
        f'<th class="num">{esc(name)}</th>' if numeric else f"<th>{esc(name)}</th>" for name, numeric in headers
    )
    return f'<div class="scroll"><table class="{css}"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'


def folded(preview: str, full: str | None = None, *, failed: bool = False, truncated: bool = False) -> str:
    """A text cell: the first line of `preview`, and `full` (by default the preview whole)
    behind `more` when it says more than that line."""
    css = ' class="failed-text"' if failed else ""
    mark = ' <span class="truncated">(truncated)</span>' if truncated else ""
    line = fmt.one_line(preview, PREVIEW)
    full = preview if full is None else full
    if line == full.strip():
        return f"<span{css}>{esc(line)}</span>{mark}"
    return f'<details><summary{css}>{esc(line)}</summary><div class="full">{esc(full)}</div></details>{mark}'


# Sections -------------------------------------------------------------------------------------


def _masthead(report: Report) -> str:
    run = report.run
    meta = [
        ("status", badge(run.status)),
        ("run", f"<code>{esc(run.id)}</code>"),
        ("started", esc(utc(run.started_at))),
        ("took", esc(report.duration or "not finished")),
        ("calls", esc(f"{run.calls:,}")),
        ("tokens", esc(fmt.tokens(run.tokens))),
        ("cost", esc(report.cost)),
    ]
    items = "".join(f"<div><dt>{esc(name)}</dt><dd>{value}</dd></div>" for name, value in meta)
    return (
        '<header class="masthead">'
        f'<p class="eyebrow"><b>panel</b> · {esc(run.protocol)} · {esc(run.panel)}</p>'
        f'<h1 class="question">{esc(run.question.strip())}</h1>'
        f'<dl class="meta">{items}</dl>'
        "</header>"
    )


def _final_answer(report: Report) -> str:
    run = report.run
    if not run.final_answer:
        reason = (run.result or {}).get("failure_reason") or run.error or "the run ended before an answer"
        return (
            '<section class="card answer none" id="final-answer"><h2>No answer was reached</h2>'
            f'<p class="failed-text">{esc(reason)}</p></section>'
        )
    title = "Final answer" if run.status == "finished" else "Final answer (no answer reached)"
    return (
        f'<section class="card answer" id="final-answer"><h2>{esc(title)}</h2>'
        f'<article class="markdown">{markdown_html(run.final_answer)}</article></section>'
    )


def _outcome(report: Report) -> str:
    facts = list(report.facts)
    if report.run.error:
        facts.insert(0, ("error", report.run.error))
    if not facts:
        return ""
    items = "".join(f"<div><dt>{esc(name)}</dt><dd>{esc(value)}</dd></div>" for name, value in facts)
    return f'<section class="card" id="outcome"><h2>Outcome</h2><dl class="facts">{items}</dl></section>'


def _panel(report: Report) -> str:
    """A member per row, its label before its name; the role column only when some member has one."""
    with_roles = any(member.roles or member.task for member in report.members)
    rows = []
    for member in report.members:
        roles = "".join(f'<span class="role">{esc(role)}</span>' for role in member.roles)
        task = f'<div class="task-text">task: {esc(member.task)}</div>' if member.task else ""
        role_cell = f"<td>{roles}{task}</td>" if with_roles else ""
        rows.append(
            f"<tr><td>{label(member.label)}<b>{esc(member.name)}</b></td><td><code>{esc(member.model)}</code></td>{role_cell}</tr>"
        )
    headers = [("member", False), ("model", False), *([("role", False)] if with_roles else [])]
    return f'<section class="card" id="panel"><h2>Panel</h2>{table(headers, rows)}</section>'


def _stages(report: Report) -> str:
    if not report.stages:
        return ""
    cards = "\n".join(_stage(stage, index) for index, stage in enumerate(report.stages, start=1))
    return f'<h2 class="section-title" id="rounds">Deliberation</h2>\n{cards}'


def _stage(stage: Stage, index: int) -> str:
    calls = sum(row.status != "waiting" for row in stage.rows)
    parts = [
        f'<section class="card stage stage-{esc(stage.stage)}" id="stage-{index}">'
        f'<h3>{esc(stage.title)} <span class="count">{esc(plural(calls, "call"))}</span></h3>'
    ]
    if stage.plan is not None:
        parts.append(_plan(stage.plan))
    elif stage.rows:
        parts.append(_stage_table(stage))
    if stage.tally is not None:
        parts.append(_chart(stage.tally, "tally"))
    if stage.aggregate is not None:
        parts.append(_chart(stage.aggregate, "aggregate"))
    if stage.bias is not None:
        parts.append(_chart(stage.bias, "bias"))
    if stage.vote is not None:
        parts.append(_vote(stage.vote))
    if stage.verdict is not None:
        parts.append(_verdict(stage.verdict))
    if stage.verdict_grid:
        parts.append(_verdict_grid(stage.verdict_grid))
    if stage.delphi is not None:
        parts.append(_delphi(stage.delphi))
    if stage.outcome:
        parts.append(f'<p class="outcome-line{"" if stage.won else " none"}">{esc(stage.outcome)}</p>')
    if stage.notes:
        parts.append('<ul class="notes">' + "".join(f"<li>{esc(note)}</li>" for note in stage.notes) + "</ul>")
    if stage.warnings:
        parts.append(
            '<ul class="warnings">' + "".join(f"<li>⚠ {esc(warning)}</li>" for warning in stage.warnings) + "</ul>"
        )
    parts.append("</section>")
    return "".join(parts)


def _stage_table(stage: Stage) -> str:
    columns = stage_columns(stage)
    rows = []
    for row in stage.rows:
        cells = "".join(_row_cell(row, column.key, column.numeric) for column in columns)
        rows.append(f"<tr>{cells}</tr>")
    return table(((column.header, column.numeric) for column in columns), rows, "stage-table")


def _row_cell(row: CallRow, key: ColumnKey, numeric: bool) -> str:
    match key:
        case "member":
            return f'<td class="nowrap">{label(row.label)}{esc(fmt.who(row.member, row.about))}</td>'
        case "status":
            return f"<td>{badge(row.status)}</td>"
        case "text":
            full = pretty_reply(row.reply) if row.reply else row.text
            return f'<td class="text-cell">{folded(row.text, full, failed=row.failed, truncated=row.truncated)}</td>'
        case "choice":
            note = f'<span class="how">{esc(row.choice_note)}</span>' if row.choice_note else ""
            return f"<td><b>{esc(row.choice or '')}</b>{note}</td>"
        case "ranking":
            places = "".join(f"<li>{esc(place)}</li>" for place in row.ranking or [])
            return f'<td><ol class="ranking">{places}</ol></td>' if places else "<td></td>"
        case "changed":
            return f'<td class="nowrap">{dot_svg(row.changed)} {esc(row.changed)}</td>' if row.changed else "<td></td>"
    value = cell_text(row, key)
    return f'<td class="num">{esc(value)}</td>' if numeric else f"<td>{esc(value)}</td>"


def _bar_row(bar: Bar, tone: str) -> str:
    name = f"{label(bar.key)}{esc(bar.name)}" if bar.name else esc(bar.key)
    detail = f'<span class="detail">{esc(bar.detail)}</span>' if bar.detail else ""
    star = '<span class="star">★</span>' if bar.winner else ""
    css = ' class="winner"' if bar.winner else ""
    fill = "won" if bar.winner else tone
    svg = bar_svg(bar.share, tone=fill, marker=bar.marker, name=f"{bar.name or bar.key}: {bar.text}")
    return f'<tr{css}><th scope="row">{name}{detail}</th><td class="bar-cell">{svg}</td><td class="num">{esc(bar.text)}</td><td>{star}</td></tr>'


def _chart(chart: Chart, kind: str) -> str:
    rows = "".join(_bar_row(bar, "") for bar in chart.bars)
    note = f'<p class="chart-note">{esc(chart.note)}</p>' if chart.note else ""
    body = f"<table><tbody>{rows}</tbody></table>" if rows else ""
    return f'<figure class="chart {esc(kind)}"><h4>{esc(chart.title)}</h4>{body}{note}</figure>'


def _vote(vote: VoteSummary) -> str:
    parts = [f'<p class="rules">{esc(vote.rules)}</p>']
    if vote.chart is not None:
        parts.append(_chart(vote.chart, "tally"))
    parts.append(f'<p class="line dim">{esc(vote.quorum)}</p>')
    if vote.apart:
        parts.append(f'<p class="line apart">{esc(vote.apart)}</p>')
    if vote.runoff:
        parts.append(_runoff(vote))
    if vote.outcome:
        parts.append(f'<p class="outcome-line{"" if vote.won else " none"}">{esc(vote.outcome)}</p>')
    return "".join(parts)


def _runoff(vote: VoteSummary) -> str:
    """Options down, rounds across: each count as a bar of the live ballots, with the majority
    line; a dropped option is struck out in the round it goes, the winner starred."""
    rows = []
    for option in vote.options:
        cells = [f'<th scope="row">{esc(option)}</th>']
        for entry in vote.runoff:
            if option not in entry.counts:
                cells.append('<td class="round"></td>')
                continue
            count = entry.counts[option]
            share = count / entry.live if entry.live else 0.0
            state = "dropped" if entry.eliminated == option else "won" if entry.winner == option else ""
            tone = {"dropped": "lost", "won": "won"}.get(state, "")
            suffix = (
                " <small>dropped</small>"
                if state == "dropped"
                else ' <span class="star">★</span>'
                if state == "won"
                else ""
            )
            svg = bar_svg(share, tone=tone, half=True, name=f"{option}: {count} in round {entry.index}")
            cells.append(f'<td class="round {state}"><span class="count">{count}</span>{suffix}{svg}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    headers = [("option", False), *((f"round {entry.index} · {entry.live} live", False) for entry in vote.runoff)]
    steps = "".join(f"<li>{esc(line)}</li>" for line in vote.runoff_lines)
    return (
        '<figure class="chart runoff"><h4>Instant runoff</h4>'
        f"{table(headers, rows)}<ol>{steps}</ol>"
        '<p class="chart-note">the dashed line is half of the live ballots: an option past it wins</p></figure>'
    )


def _verdict(verdict: Verdict) -> str:
    if verdict.verdict is None:
        return f'<p class="line"><b>Verdict:</b> {badge("no verdict", "warn")} {esc(verdict.problem or "unknown")}</p>'
    tone = "good" if verdict.verdict == "APPROVED" else "bad"
    items = "".join(f"<li><b>{esc(worker)}</b>: {esc(text)}</li>" for worker, text in verdict.feedback.items())
    feedback = f'<ul class="feedback">{items}</ul>' if items else ""
    return f'<p class="line"><b>Verdict of {esc(verdict.critic)}:</b> {badge(verdict.verdict, tone)}</p>{feedback}'


def _verdict_grid(verdicts: list[Verdict]) -> str:
    marks = {
        "approved": ("✓ approved", "good"),
        "rejected": ("✗ rejected", "bad"),
        "no verdict": ("no verdict", "warn"),
    }
    rows = []
    for worker in verdicts[-1].workers:
        cells = "".join(
            f"<td>{dot_svg(verdict.cell(worker))} {badge(*marks[verdict.cell(worker)])}</td>" for verdict in verdicts
        )
        rows.append(f'<tr><th scope="row">{esc(worker)}</th>{cells}</tr>')
    headers = [("worker", False), *((f"review {verdict.round}", False) for verdict in verdicts)]
    return f'<figure class="chart verdicts"><h4>Verdicts</h4>{table(headers, rows, "grid")}</figure>'


def _delphi(grid: DelphiGrid) -> str:
    rows = []
    for expert_label, name in grid.experts:
        cells = []
        for number in grid.rounds:
            state = grid.states.get(name, {}).get(number)
            cells.append(f"<td>{dot_svg(state)} {esc(state)}</td>" if state else '<td class="dim">—</td>')
        rows.append(f'<tr><th scope="row">{label(expert_label)}{esc(name)}</th>{"".join(cells)}</tr>')
    headers = [("expert", False), *((f"round {number}", False) for number in grid.rounds)]
    return f'<figure class="chart delphi"><h4>Rounds at a glance</h4>{table(headers, rows, "grid")}</figure>'


def _plan(plan: Plan) -> str:
    return (
        f'<p class="line dim">planned by <b>{esc(plan.planner)}</b> · {esc(plural(len(plan.tasks), "subtask"))}</p>'
        f'<h4>Task graph</h4><ul class="tree">{_tree(plan.tasks)}</ul>{_timeline(plan.tasks)}'
    )


def _tree(tasks: list[Task]) -> str:
    """Nested lists from the tasks in drawing order: each hangs under its deepest dependency."""
    out: list[str] = []
    depth = 0
    for index, task in enumerate(tasks):
        if index:
            if task.depth > depth:
                out.append("<ul>")
            else:
                out.append("</li>" + "</ul></li>" * (depth - task.depth))
        depth = task.depth
        out.append(f"<li>{_task(task)}")
    if tasks:
        out.append("</li>" + "</ul></li>" * depth)
    return "".join(out)


def _task(task: Task) -> str:
    meta = [task.worker]
    if task.depends_on:
        meta.append("after " + ", ".join(task.depends_on))
    if task.duration is not None:
        meta.append(fmt.seconds(task.duration))
    head = (
        f'<div class="task-head"><code>{esc(task.task_id)}</code>{badge(task.status)}'
        f'<span class="task-title">{esc(task.title or task.description)}</span>'
        f'<span class="task-meta">{esc(" · ".join(meta))}</span></div>'
    )
    if task.output:
        body = folded(task.output)
    elif task.note:
        body = folded(task.note, failed=task.status == "failed")
    else:
        body = ""
    return head + (f'<div class="text-cell">{body}</div>' if body else "")


def _timeline(tasks: list[Task]) -> str:
    """When each subtask ran, on one time axis: overlapping bars ran at the same time."""
    timed = [task for task in tasks if task.start is not None]
    if not timed:
        return ""
    span = max((task.start or 0.0) + (task.duration or 0.0) for task in timed) or 1.0
    rows = []
    for task in tasks:
        if task.start is None:
            cell = '<td class="bar-cell dim">not started</td>'
        else:
            svg = span_svg(
                task.start / span, (task.duration or 0.0) / span, task.status, f"{task.task_id}: {task.status}"
            )
            cell = f'<td class="bar-cell">{svg}</td>'
        when = "" if task.start is None else f"+{fmt.seconds(task.start)}"
        rows.append(
            f'<tr><th scope="row"><code>{esc(task.task_id)}</code> {esc(task.worker)}</th>{cell}<td class="num">{esc(when)}</td></tr>'
        )
    return (
        '<figure class="chart timeline"><h4>Timeline</h4>'
        f"<table><tbody>{''.join(rows)}</tbody></table>"
        f'<p class="chart-note">{esc(fmt.seconds(span))} from the accepted plan to the last subtask</p></figure>'
    )


def _warnings(report: Report) -> str:
    if not report.warnings:
        return ""
    items = "".join(f"<li>⚠ {esc(warning)}</li>" for warning in report.warnings)
    return f'<section class="card" id="warnings"><h2>Warnings</h2><ul class="warnings">{items}</ul></section>'


def _calls(report: Report) -> str:
    """Every call in the order it ended; the round and note columns only when some call has one."""
    if not report.calls:
        return '<section class="card" id="calls"><h2>Calls</h2><p class="dim">No model was called.</p></section>'
    with_round = any(call.round is not None for call in report.calls)
    notes = [call_note(call) for call in report.calls]
    rows = []
    for number, (call, note) in enumerate(zip(report.calls, notes, strict=True), start=1):
        status = badge(call.error_kind, "bad") if call.error_kind else badge(call.status)
        cells = [
            f'<td class="num">{number}</td><td>{esc(call.member)}</td><td><code>{esc(call.model)}</code></td><td>{esc(call.stage)}</td>',
            f'<td class="num">{"" if call.round is None else call.round}</td>' if with_round else "",
            f'<td>{status}</td><td class="num">{esc(fmt.seconds(call.latency))}</td><td class="num">{esc(fmt.tokens(call.tokens_in))}</td>',
            f'<td class="num">{esc(fmt.tokens(call.tokens_out))}</td><td class="num">{esc(fmt.call_cost(call.cost, call.model))}</td>',
            f'<td class="note">{esc(note)}</td>' if any(notes) else "",
        ]
        rows.append(f"<tr>{''.join(cells)}</tr>")
    headers = [
        ("#", True),
        ("member", False),
        ("model", False),
        ("stage", False),
        *([("round", True)] if with_round else []),
        ("status", False),
        ("latency", True),
        ("tokens in", True),
        ("tokens out", True),
        ("cost", True),
        *([("note", False)] if any(notes) else []),
    ]
    return (
        f'<section class="card" id="calls"><h2>Calls</h2><p class="dim">{esc(report.totals)}</p>'
        f"{table(headers, rows, 'calls')}</section>"
    )


def _footer(report: Report) -> str:
    skipped = (
        f" {plural(report.unknown_events, 'event')} from a newer panel were left out." if report.unknown_events else ""
    )
    return (
        f"<footer>Exported by panel {esc(panel_version())} from run <code>{esc(report.run.id)}</code>. "
        f"One self-contained file: nothing in it is fetched and no script runs.{esc(skipped)}</footer>"
    )
