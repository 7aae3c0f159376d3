"""What an eval's report says of confidence and provenance, in words every format shares, and
the terminal's section: for each system whose answers carry a confidence, the ECE, the Brier
score against the exact posterior's, what the confidence rests on, and its reliability chart;
and where the figures came from (date, versions, commit, the command, the sessions)."""

from __future__ import annotations

import shlex

from rich.console import RenderableType
from rich.padding import Padding
from rich.text import Text

from panel_cli.eval.results import EvalResult, SystemScore
from panel_cli.eval.theory import Theory
from panel_cli.view.reliability import reliability_chart

CONFIDENCE_INTRO = (
    "Confidence (the probability each answer is right): ECE, the gap between stated and measured, "
    "weighted by answers; Brier, the mean (confidence − right)², against the exact posterior's, the "
    "best the votes allow."
)


def provenance_facts(result: EvalResult) -> list[tuple[str, str]]:
    """(name, value) pairs: when it ran, Python and the commit, the command, the sessions."""
    settings = result.settings
    found: list[tuple[str, str]] = []
    if settings is None:
        return found
    if settings.started_at:
        sessions = f" ({result.sessions} sessions: resumed)" if result.sessions > 1 else ""
        found.append(("date", f"{settings.started_at}{sessions}"))
    ran = [f"Python {settings.python_version}" if settings.python_version else ""]
    ran.append(f"commit {settings.commit}" if settings.commit else "commit unknown (not a git checkout)")
    found.append(("ran on", ", ".join(part for part in ran if part)))
    if settings.command:
        found.append(("command", shlex.join(settings.command)))
    return found


def calibration_fact(result: EvalResult) -> str | None:
    """`20 questions of 4 options, <prior>: v1 3.30 ± 0.15, …; <warning>`."""
    calibration = result.calibration
    if calibration is None:
        return None
    text = (
        f"{calibration.questions} questions of {calibration.options} options, {calibration.prior}: "
        f"{calibration.weights_line()} (weight ± its standard error)"
    )
    warning = calibration.warning()
    return f"{text}; {warning}" if warning else text


def confidence_sentence(score: SystemScore) -> str:
    """How one system's confidence did, in a sentence; or why it has none."""
    found = score.confidence
    if found is None:
        return f"{score.system}: no confidence was kept for its answers."
    if found.items == 0:
        return f"{score.system}: no confidence: {found.reason or 'none of its answers has one'}."
    brier = f"Brier {found.brier:.3f}"
    if found.posterior_brier is not None and found.brier_ratio is not None:
        brier += f", {found.brier_ratio:.2f} × the exact posterior's {found.posterior_brier:.3f}"
    without = f"; {found.without} without one ({found.reason})" if found.without and found.reason else ""
    return (
        f"{score.system}: ECE {found.ece:.3f}, {brier}, over {found.items:,} answers{without}. "
        f"It rests on {found.basis or 'an unnamed basis'}."
    )


def optimum_sentence(theory: Theory) -> str:
    """Beside a rule whose members' stated confidences or weights are off: what their accuracy gives."""
    return f" The optimum: {theory.optimum_note}." if theory.optimum is not None and theory.optimum_note else ""


def unkept_sentence(score: SystemScore) -> str | None:
    if not score.unkept_runs:
        return None
    runs = f"{score.unkept_runs} run{'s' if score.unkept_runs != 1 else ''}"
    return (
        f"{score.system}: {runs} paid for but not graded (stopped in flight, or failed and run again on "
        "--resume) are counted in its calls, tokens and cost."
    )


def without_confidence(result: EvalResult) -> str | None:
    """One sentence for the systems whose answers have no confidence, each with why."""
    none = [
        f"{score.system} — {score.confidence.reason or 'none given'}"
        for score in result.systems
        if score.confidence is not None and score.confidence.items == 0 and score.not_measurable is None
    ]
    return f"Without a confidence: {'; '.join(none)}." if none else None


def with_confidence(result: EvalResult) -> list[SystemScore]:
    return [
        score
        for score in result.systems
        if score.confidence is not None and score.confidence.items and score.not_measurable is None
    ]


def confidence_lines(result: EvalResult) -> list[RenderableType]:
    """The terminal's confidence section: a sentence and a chart per system with a confidence,
    then one line naming the others and why they have none."""
    if not any(score.confidence is not None for score in result.systems):
        return []
    lines: list[RenderableType] = [Text(CONFIDENCE_INTRO)]
    for score in with_confidence(result):
        lines.append(Text(f"  {confidence_sentence(score)}"))
        assert score.confidence is not None
        lines.append(Padding(reliability_chart(score.confidence.bins), (0, 0, 0, 4)))
    rest = without_confidence(result)
    if rest:
        lines.append(Text(f"  {rest}", style="dim"))
    return lines
