"""What an eval's report says of its systems' stopping rules (`stop:`), in words every format
shares: calls per question beside the exact theory's expected calls, and the accuracy of the
answers stopped on before asking everyone, against the target of `confident(x)`."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text

from panel_cli.eval.results import EvalResult, SystemScore

STOPPING_INTRO = (
    "Stopping early (stop:): calls per question beside the exact theory's, and the answers a system stopped on "
    "before asking every member."
)


def stopping_sentence(score: SystemScore) -> str:
    """`vote, stop: decided: 2.74 calls per question (the exact theory 2.77); stopped early on
    812 of 1,000 questions, right on 95.3% of them (95% CI 93.6–96.6%).` and, under
    `confident(x)`, whether that reaches the target within its interval."""
    found = score.stopping
    assert found is not None
    calls = f"{found.calls_per_question:.2f} calls per question"
    if found.expected_calls is not None:
        calls += f" (the exact theory: {found.expected_calls:.2f})"
    sentence = f"{score.system}, stop: {found.rule}: {calls}"
    if found.stopped is None:
        return sentence + "."
    if found.stopped_accuracy is None or found.ci_low is None or found.ci_high is None:
        return f"{sentence}; it stopped early on none of its {found.questions:,} questions."
    sentence += (
        f"; stopped early on {found.stopped:,} of {found.questions:,} questions, right on "
        f"{found.stopped_accuracy * 100:.1f}% of them (95% CI {found.ci_low * 100:.1f}–{found.ci_high * 100:.1f}%)"
    )
    if found.target is None:
        return sentence + "."
    verdict = (
        "reaches the target within its interval"
        if found.holds
        else f"falls short of the target: its interval ends at {found.ci_high * 100:.1f}%"
    )
    return f"{sentence}; target {found.target * 100:g}%: {verdict}."


def with_stopping(result: EvalResult) -> list[SystemScore]:
    return [score for score in result.systems if score.stopping is not None]


def stopping_lines(result: EvalResult) -> list[RenderableType]:
    """The terminal's section: the intro, then a sentence per system asked under a rule."""
    scores = with_stopping(result)
    if not scores:
        return []
    lines: list[RenderableType] = [Text(STOPPING_INTRO)]
    for score in scores:
        short = score.stopping is not None and score.stopping.holds is False
        lines.append(Text(f"  {stopping_sentence(score)}", style="yellow" if short else ""))
    return lines
