"""An eval's result for people: a table on the terminal with a bar per system (its accuracy
and 95% interval, and its own theory line for simulated voters), the comparisons with the
baseline in plain words, and the same as a Markdown report with every question's grades.

User and model text (names, questions, answers, the judge's reasons) is always `Text` on the
terminal and escaped in Markdown: it never reads as markup."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from panel_cli.eval.grading import first_line
from panel_cli.eval.results import BASELINE, EvalResult, SystemScore
from panel_cli.eval.theory import VOTER_MODEL, Theory
from panel_cli.export.markdown import cell, table
from panel_cli.view import fmt

BAR_WIDTH = 20
SIMULATED_COST = "simulated"
SIMULATED_CELL = "demo"
LEGEND = "bar: █ up to the 95% interval, ▓ the interval below the accuracy, ░ above it"
SIMULATED_LEGEND = "; cost demo: simulated, free"


def percent(share: float) -> str:
    return f"{share * 100:.1f}%"


def interval(score: SystemScore) -> str:
    return f"{score.ci_low * 100:.1f}–{score.ci_high * 100:.1f}%"


def system_label(result: EvalResult, score: SystemScore) -> str:
    return f"{BASELINE} ({result.baseline})" if score.system == BASELINE else score.system


def bar(score: SystemScore, theory: float | None = None, width: int = BAR_WIDTH) -> Text:
    """The accuracy as a bar: solid up to the interval's lower end, shaded across the interval
    (darker below the accuracy, lighter above), and the theory line as `│` when there is one."""
    text = Text()
    mark = None if theory is None else min(width - 1, int(theory * width))
    for index in range(width):
        middle = (index + 0.5) / width
        if index == mark:
            text.append("│", style="bold magenta")
        elif middle < score.ci_low:
            text.append("█", style="green")
        elif middle <= score.accuracy:
            text.append("▓", style="green")
        elif middle <= score.ci_high:
            text.append("░", style="green")
        else:
            text.append("·", style="dim")
    return text


def cost(score: SystemScore, simulated: str = SIMULATED_COST) -> str:
    return simulated if score.simulated and score.cost is None else fmt.cost(score.cost)


THEORY_INTRO = f"Theory for simulated voters ({VOTER_MODEL}), │ on the bars:"


def theory_sentence(label: str, theory: Theory) -> str:
    """`confer: 91.0%, exact — confer (confidence): the answer with …`; a simulated figure
    with its standard error; no figure, and why."""
    if theory.accuracy is None:
        return f"{label}: {theory.note or 'no closed form'}."
    if theory.way == "simulation":
        spread = f" ± {theory.standard_error * 100:.1f}" if theory.standard_error is not None else ""
        how = f"simulated over {theory.samples:,} questions" if theory.samples else "simulated"
        figure = f"{percent(theory.accuracy)}{spread} ({how}, one standard error)"
    else:
        figure = f"{percent(theory.accuracy)} exactly"
    return f"{label}: {figure} — {theory.rule}."


def theory_of(result: EvalResult, score: SystemScore) -> float | None:
    line = result.theory.get(score.system)
    return line.accuracy if line is not None else None


def compact_tokens(value: int | None) -> str:
    """`446,642` reads `447k` and `7,944` reads `7.9k` in the table, where eight columns share a line."""
    if value is None:
        return fmt.UNKNOWN
    if value >= 10_000_000:
        return f"{value / 1_000_000:.0f}M"
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 10_000:
        return f"{value / 1000:.0f}k"
    if value >= 1000:
        return f"{value / 1000:.1f}k"
    return str(value)


def render(result: EvalResult) -> RenderableType:
    title = Text(f"Eval of {result.panel} on {result.dataset}: {result.questions} questions, graded by {result.grader}")
    # The title is a line of its own, not the table's: a table's title is padded or folded to the table's width.
    grid = Table(box=None, padding=(0, 1), pad_edge=False, header_style="bold")
    grid.add_column("system", no_wrap=True)
    grid.add_column("accuracy", no_wrap=True)
    grid.add_column("95% CI", justify="right", no_wrap=True)
    grid.add_column("calls", justify="right", no_wrap=True)
    grid.add_column("tokens", justify="right", no_wrap=True)
    grid.add_column("cost", justify="right", no_wrap=True)
    grid.add_column("time", justify="right", no_wrap=True)
    for score in result.systems:
        accuracy = bar(score, theory_of(result, score))
        accuracy.append(f" {percent(score.accuracy):>6}")
        grid.add_row(
            Text(system_label(result, score)),
            accuracy,
            Text(f"{score.ci_low * 100:.0f}–{score.ci_high * 100:.0f}%"),
            Text(f"{score.calls:,}"),
            Text(compact_tokens(score.tokens)),
            Text(cost(score, SIMULATED_CELL)),
            Text(fmt.seconds(score.wall_time_s)),
        )
    simulated = any(score.simulated and score.cost is None for score in result.systems)
    lines: list[RenderableType] = [
        title,
        grid,
        Text(LEGEND + (SIMULATED_LEGEND if simulated else ""), style="dim"),
        Text(""),
    ]
    if result.theory:
        lines.append(Text(THEORY_INTRO))
        lines += [
            Text(f"  {theory_sentence(system_label(result, score), result.theory[score.system])}")
            for score in result.systems
            if score.system in result.theory
        ]
    for comparison in result.comparisons:
        line = Text(f"{comparison.system}: ", style="bold")
        line.append(
            comparison.verdict,
            style="green" if comparison.significant and comparison.only_system > comparison.only_baseline else "",
        )
        lines.append(line)
    for score in result.systems:
        unanswered = score.questions - score.answered
        if unanswered:
            failed = f", {score.failed} of them failed outright" if score.failed else ""
            lines.append(
                Text(
                    f"{score.system}: {unanswered} run{'s' if unanswered != 1 else ''} reached no answer{failed}; graded wrong.",
                    style="yellow",
                )
            )
    judged = [score for score in result.systems if score.judge_tokens is not None or score.judge_cost is not None]
    if judged:
        tokens = sum(score.judge_tokens or 0 for score in judged)
        known = [score.judge_cost for score in judged if score.judge_cost is not None]
        lines.append(
            Text(
                f"Grading by {result.grader}: {tokens:,} tokens, {fmt.cost(sum(known) if known else None)} (not counted above)."
            )
        )
    lines.append(Text(f"Every run is stored, tagged eval {result.eval_id}.", style="dim"))
    return Group(*lines)


def markdown(result: EvalResult) -> str:
    """The report: the settings, the scores, the comparisons, the theory line, then each
    question's grade per system (and the judge's reasons, when a judge graded)."""
    systems = [score.system for score in result.systems]
    parts = [
        f"# Eval of {cell(result.panel)} on {cell(result.dataset)}",
        "\n".join(
            [
                f"- Eval: `{result.eval_id}` ({result.questions} questions; every run is stored, tagged with this id)",
                f"- Graded by: {cell(result.grader)}",
                f"- Baseline: {cell(result.baseline)} answering alone",
                f"- Seed of simulated members: {result.seed}; {result.concurrency} questions at a time",
            ]
        ),
        "## Scores",
        table(
            ["system", "accuracy", "95% interval", "answered", "calls", "tokens", "cost", "wall time"],
            [
                [
                    cell(system_label(result, score)),
                    percent(score.accuracy),
                    interval(score),
                    f"{score.answered}/{score.questions}",
                    f"{score.calls:,}",
                    fmt.tokens(score.tokens),
                    cost(score),
                    fmt.seconds(score.wall_time_s),
                ]
                for score in result.systems
            ],
            numeric={1, 2, 3, 4, 5, 6, 7},
        ),
    ]
    if result.comparisons:
        parts += ["## Against the baseline (McNemar's exact test, paired by question)"]
        parts += [
            "\n".join(
                f"- **{cell(comparison.system)}**: {cell(comparison.verdict, 400)}" for comparison in result.comparisons
            )
        ]
    if result.theory:
        parts += [
            "## Theory",
            f"For simulated voters: {VOTER_MODEL}.",
            "\n".join(
                f"- {cell(theory_sentence(system_label(result, score), result.theory[score.system]), 600)}"
                for score in result.systems
                if score.system in result.theory
            ),
        ]
    by_key = {(item.system, item.question_id): item for item in result.items}
    questions = list(dict.fromkeys(item.question_id for item in result.items))
    rows = []
    for question in questions:
        row = [cell(question)]
        for system in systems:
            item = by_key.get((system, question))
            if item is None:
                row.append("")
                continue
            read = first_line(item.final_answer or "") if item.grade.method == "judge" else item.grade.predicted
            shown = read or ("failed" if item.error else "no answer" if item.final_answer is None else "unreadable")
            row.append(f"{'✓' if item.correct else '✗'} {cell(shown, 40)}")
        rows.append(row)
    parts += ["## Per question", table(["question", *systems], rows)]
    judged = [item for item in result.items if item.grade.method == "judge"]
    if judged:
        parts += [
            "## Judge verdicts",
            table(
                ["question", "system", "verdict", "reason"],
                [
                    [
                        cell(item.question_id),
                        cell(item.system),
                        item.grade.predicted or "none",
                        cell(item.grade.reason, 200),
                    ]
                    for item in judged
                ],
            ),
        ]
    return "\n\n".join(parts) + "\n"
