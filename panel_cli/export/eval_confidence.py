"""The confidence section of an eval's exported report: a sentence per system (ECE, Brier against
the exact posterior's, what it rests on) and its reliability diagram, as a table and a chart in
Markdown and as an SVG on the HTML page; then the systems without one, and why. And the
stopping section: a sentence per system asked under a stopping rule (`view.eval_stopping`)."""

from __future__ import annotations

from panel_cli.eval.results import EvalResult
from panel_cli.export.markdown import cell
from panel_cli.export.page import esc
from panel_cli.export.reliability import reliability_markdown, reliability_svg
from panel_cli.view.eval_confidence import CONFIDENCE_INTRO, confidence_sentence, with_confidence, without_confidence
from panel_cli.view.eval_stopping import STOPPING_INTRO, stopping_sentence, with_stopping


def confidence_markdown(result: EvalResult) -> str:
    """`## Confidence` and its systems; empty for an eval that kept no confidence."""
    if not any(score.confidence is not None for score in result.systems):
        return ""
    parts = ["## Confidence", CONFIDENCE_INTRO]
    for score in with_confidence(result):
        assert score.confidence is not None
        parts += [f"- {cell(confidence_sentence(score), 600)}", reliability_markdown(score.confidence.bins)]
    rest = without_confidence(result)
    if rest:
        parts.append(cell(rest, 1000))
    return "\n\n".join(parts)


def confidence_html(result: EvalResult) -> str:
    """The HTML page's confidence card; empty for an eval that kept no confidence."""
    if not any(score.confidence is not None for score in result.systems):
        return ""
    figures = []
    for score in with_confidence(result):
        assert score.confidence is not None
        figures.append(
            f'<figure class="reliability">{reliability_svg(score.confidence.bins, score.system)}'
            f"<figcaption>{esc(confidence_sentence(score))}</figcaption></figure>"
        )
    rest = without_confidence(result)
    note = f'<p class="dim">{esc(rest)}</p>' if rest else ""
    return (
        f'<section class="card" id="confidence"><h2>Confidence</h2><p class="dim">{esc(CONFIDENCE_INTRO)}</p>'
        f'<div class="reliability-grid">{"".join(figures)}</div>{note}</section>'
    )


def stopping_markdown(result: EvalResult) -> str:
    """`## Stopping early` and a sentence per system asked under a rule; empty without one."""
    scores = with_stopping(result)
    if not scores:
        return ""
    return "\n".join(
        ["## Stopping early", STOPPING_INTRO, "", *(f"- {cell(stopping_sentence(s), 800)}" for s in scores)]
    )


def stopping_html(result: EvalResult) -> str:
    """The HTML page's stopping card; empty without a system asked under a rule."""
    scores = with_stopping(result)
    if not scores:
        return ""
    items = "".join(f"<li>{esc(stopping_sentence(score))}</li>" for score in scores)
    return (
        f'<section class="card" id="stopping"><h2>Stopping early</h2><p class="dim">{esc(STOPPING_INTRO)}</p>'
        f"<ul>{items}</ul></section>"
    )
