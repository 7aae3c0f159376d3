"""An eval as one HTML page a person can share: the run export's page (its stylesheet, its
Content-Security-Policy, its tables and bars, `esc` on every text), laid out for an eval:
what was measured and how, a bar per system with its theory line, every pair, and each
question with its gold answer and every system's answer and run id.

Every question, answer and name goes through `esc`: nothing from a dataset or a model is markup.
"""

from __future__ import annotations

from panel_cli.eval.results import EvalResult, SystemScore
from panel_cli.eval.theory import VOTER_MODEL
from panel_cli.export.eval_confidence import confidence_html, stopping_html
from panel_cli.export.page import POLICY, badge, bar_svg, esc, panel_version, stylesheet, table
from panel_cli.view import fmt
from panel_cli.view.eval import (
    NOT_MEASURABLE,
    answer_read,
    cost,
    departure_of,
    facts,
    per_correct,
    percent,
    system_label,
    theory_label,
    theory_of,
    theory_sentence,
)
from panel_cli.view.eval_confidence import unkept_sentence

STATUS_TONES = {"finished": "good", "running": "info", "stale": "warn", "interrupted": "warn", "failed": "bad"}


def render_eval_html(result: EvalResult) -> str:
    body = "\n".join(
        part
        for part in (
            _masthead(result),
            _scores(result),
            _theory(result),
            confidence_html(result),
            stopping_html(result),
            _pairs(result),
            _questions(result),
            _footer(result),
        )
        if part
    )
    title = f"Eval of {result.panel} on {result.dataset}"
    return (
        "<!doctype html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">\n'
        f'<meta name="generator" content="panel {esc(panel_version())}">\n'
        f"<title>{esc(title)} · panel eval</title>\n"
        f"<style>\n{stylesheet()}</style>\n</head>\n"
        f'<body>\n<main class="report eval">\n{body}\n</main>\n</body>\n</html>\n'
    )


def _masthead(result: EvalResult) -> str:
    items = "".join(f"<div><dt>{esc(name)}</dt><dd>{esc(value)}</dd></div>" for name, value in facts(result))
    return (
        '<header class="masthead">'
        f'<p class="eyebrow"><b>panel</b> · eval · {badge(result.status, STATUS_TONES.get(result.status))}</p>'
        f'<h1 class="question">Eval of {esc(result.panel)} on {esc(result.dataset)}</h1>'
        f'<dl class="facts">{items}</dl>'
        "</header>"
    )


def _score_row(result: EvalResult, score: SystemScore) -> str:
    if score.not_measurable is not None:
        accuracy = f'<span class="badge warn">{esc(NOT_MEASURABLE)}</span>'
        interval = ""
    else:
        line = theory_of(result, score)
        accuracy = bar_svg(score.accuracy, tone="good", marker=line, name=f"{score.system} {percent(score.accuracy)}")
        accuracy += f" {esc(percent(score.accuracy))}"
        interval = f"{score.ci_low * 100:.1f}–{score.ci_high * 100:.1f}%"
    money = cost(score)
    cells = [
        f"<td><b>{esc(system_label(result, score))}</b></td>",
        f"<td>{accuracy}</td>",
        f'<td class="num">{esc(interval)}</td>',
        f'<td class="num">{esc(f"{score.answered}/{score.questions}")}</td>',
        f'<td class="num">{esc(f"{score.calls:,}")}</td>',
        f'<td class="num">{esc(fmt.tokens(score.tokens))}</td>',
        f'<td class="num">{esc(money)}</td>',
        f'<td class="num">{esc(per_correct(score))}</td>',
        f'<td class="num">{esc(fmt.seconds(score.wall_time_s))}</td>',
    ]
    return f"<tr>{''.join(cells)}</tr>"


def _scores(result: EvalResult) -> str:
    headers = [
        ("system", False),
        ("accuracy (theory line marked)", False),
        ("95% interval", True),
        ("answered", True),
        ("calls", True),
        ("tokens", True),
        ("cost", True),
        ("per correct answer", True),
        ("wall time", True),
    ]
    rows = [_score_row(result, score) for score in result.systems]
    notes = "".join(
        f"<li><b>{esc(score.system)}</b>: {esc(NOT_MEASURABLE)}: {esc(score.not_measurable)}.</li>"
        for score in result.systems
        if score.not_measurable is not None
    )
    notes += "".join(
        f"<li><b>{esc(comparison.system)}</b>: {esc(comparison.verdict)}</li>" for comparison in result.comparisons
    )
    notes += "".join(f"<li>{esc(note)}</li>" for score in result.systems for note in [unkept_sentence(score)] if note)
    listed = f"<ul>{notes}</ul>" if notes else ""
    return f'<section class="card" id="scores"><h2>Scores</h2>{table(headers, rows)}{listed}</section>'


def _theory(result: EvalResult) -> str:
    if not result.theory:
        return ""
    lines = []
    for score in result.systems:
        line = result.theory.get(score.system)
        if line is None:
            continue
        found = departure_of(result, score.system)
        verdict = ""
        if found is not None:
            tone = "warn" if found.departs else "good"
            verdict = (
                f' <span class="badge {tone}">{esc(f"{found.standard_errors:+.1f} SE")}</span> {esc(found.verdict)}'
            )
        lines.append(f"<li>{esc(theory_sentence(theory_label(result, score), line))}{verdict}</li>")
    return (
        f'<section class="card" id="theory"><h2>Theory</h2><p class="dim">For simulated voters: {esc(VOTER_MODEL)}.</p>'
        f"<ul>{''.join(lines)}</ul></section>"
    )


def _pairs(result: EvalResult) -> str:
    if not result.pairs:
        return ""
    headers = [
        ("first", False),
        ("second", False),
        ("difference", True),
        ("95% interval (Newcombe)", True),
        ("only first", True),
        ("only second", True),
        ("McNemar p", True),
        ("Holm p", True),
    ]
    rows = [
        "<tr>"
        f"<td>{esc(pair.first)}</td><td>{esc(pair.second)}</td>"
        f'<td class="num">{esc(f"{pair.difference * 100:+.1f} pts")}</td>'
        f'<td class="num">{esc(f"{pair.ci_low * 100:+.1f} to {pair.ci_high * 100:+.1f}")}</td>'
        f'<td class="num">{pair.only_first}</td><td class="num">{pair.only_second}</td>'
        f'<td class="num">{esc(f"{pair.p_value:.3g}")}</td>'
        f'<td class="num">{badge(f"{pair.p_holm:.3g}", "good" if pair.significant else "")}</td>'
        "</tr>"
        for pair in result.pairs
    ]
    return (
        '<section class="card" id="pairs"><h2>Every pair</h2><p class="dim">McNemar\'s exact test on the questions '
        "only one of the two got right, adjusted for every pair (Holm).</p>"
        f"{table(headers, rows)}</section>"
    )


def _questions(result: EvalResult) -> str:
    systems = [score.system for score in result.systems]
    by_key = {(item.system, item.question_id): item for item in result.items}
    rows = []
    for question in result.asked:
        cells = [
            f"<td><code>{esc(question.id)}</code></td>",
            f"<td>{esc(fmt.one_line(question.question, 200))}</td>",
            f"<td>{esc(question.answer)}</td>",
        ]
        for system in systems:
            item = by_key.get((system, question.id))
            if item is None:
                cells.append("<td></td>")
                continue
            mark = badge("✓", "good") if item.correct else badge("✗", "bad")
            cells.append(
                f"<td>{mark} {esc(fmt.one_line(answer_read(item), 60))}<br><code>{esc(item.run_id)}</code></td>"
            )
        rows.append(f"<tr>{''.join(cells)}</tr>")
    headers = [("id", False), ("question", False), ("gold", False), *((system, False) for system in systems)]
    return f'<section class="card" id="questions"><h2>Per question</h2>{table(headers, rows, "calls")}</section>'


def _footer(result: EvalResult) -> str:
    return (
        f"<footer>Exported by panel {esc(panel_version())} from eval <code>{esc(result.eval_id)}</code>; every run "
        "named here is kept in the transcript store. One self-contained file: nothing in it is fetched and no script "
        "runs.</footer>"
    )
