"""An eval as a Markdown report: what was measured and how (to cite it), the scores with each
system's theory line, the comparisons and every pair, then each question with its gold answer
and every system's answer and run (and the judge's reasons, when a judge graded).

Every name, question and answer is escaped (`cell`): nothing from a dataset or a model reads
as Markdown."""

from __future__ import annotations

from panel_cli.eval.results import EvalResult, SystemScore
from panel_cli.eval.theory import VOTER_MODEL
from panel_cli.export.eval_confidence import confidence_markdown, stopping_markdown
from panel_cli.export.markdown import cell, table
from panel_cli.view import fmt
from panel_cli.view.eval import (
    NOT_MEASURABLE,
    answer_read,
    cost,
    departure_of,
    facts,
    interval,
    per_correct,
    percent,
    system_label,
    theory_label,
    theory_sentence,
)
from panel_cli.view.eval_confidence import unkept_sentence


def markdown(result: EvalResult) -> str:
    """The report: what was measured and how (to cite it), the scores with each system's
    theory line, the comparisons and every pair, then each question with its gold answer and
    every system's answer and run (and the judge's reasons, when a judge graded)."""
    systems = [score.system for score in result.systems]
    parts = [
        f"# Eval of {cell(result.panel)} on {cell(result.dataset)}",
        "\n".join(f"- {name.capitalize()}: {cell(value, 600)}" for name, value in facts(result)),
        "## Scores",
        table(
            [
                "system",
                "accuracy",
                "95% interval",
                "theory",
                "answered",
                "calls",
                "tokens",
                "cost",
                "per correct",
                "wall time",
            ],
            [
                [
                    cell(system_label(result, score)),
                    NOT_MEASURABLE if score.not_measurable is not None else percent(score.accuracy),
                    "" if score.not_measurable is not None else interval(score),
                    theory_cell(result, score),
                    f"{score.answered}/{score.questions}",
                    f"{score.calls:,}",
                    fmt.tokens(score.tokens),
                    cost(score),
                    per_correct(score),
                    fmt.seconds(score.wall_time_s),
                ]
                for score in result.systems
            ],
            numeric={1, 2, 3, 4, 5, 6, 7},
        ),
    ]
    unscored = [score for score in result.systems if score.not_measurable is not None]
    if unscored:
        parts.append(
            "\n".join(
                f"- **{cell(score.system)}**: {NOT_MEASURABLE}: {cell(score.not_measurable or '', 400)}."
                for score in unscored
            )
        )
    if result.comparisons:
        parts += ["## Against the baseline (McNemar's exact test, paired by question)"]
        parts += [
            "\n".join(
                f"- **{cell(comparison.system)}**: {cell(comparison.verdict, 400)}" for comparison in result.comparisons
            )
        ]
    if result.pairs:
        parts += [
            "## Every pair",
            "McNemar's exact test on the questions only one of the two got right, its p-value adjusted for every "
            "pair (Holm); the difference of accuracies with its 95% interval (Newcombe's, for paired data).",
            table(
                ["first", "second", "difference", "95% interval", "only first", "only second", "p", "p (Holm)"],
                [
                    [
                        cell(pair.first),
                        cell(pair.second),
                        f"{pair.difference * 100:+.1f} pts",
                        f"{pair.ci_low * 100:+.1f} to {pair.ci_high * 100:+.1f}",
                        str(pair.only_first),
                        str(pair.only_second),
                        f"{pair.p_value:.3g}",
                        f"{pair.p_holm:.3g}{' *' if pair.significant else ''}",
                    ]
                    for pair in result.pairs
                ],
                numeric={2, 3, 4, 5, 6, 7},
            ),
        ]
    if result.theory:
        parts += ["## Theory", f"For simulated voters: {VOTER_MODEL}."]
        lines = []
        for score in result.systems:
            if score.system not in result.theory:
                continue
            lines.append(f"- {cell(theory_sentence(theory_label(result, score), result.theory[score.system]), 600)}")
            found = departure_of(result, score.system)
            if found is not None:
                mark = "**departs**: " if found.departs else ""
                lines.append(f"  - {mark}{cell(found.verdict, 600)}")
        parts.append("\n".join(lines))
    parts += [part for part in [confidence_markdown(result), stopping_markdown(result)] if part]
    parts += [f"- {cell(note, 400)}" for score in result.systems for note in [unkept_sentence(score)] if note]
    parts += ["## Per question", per_question(result, systems)]
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


def theory_cell(result: EvalResult, score: SystemScore) -> str:
    """`91.0%, −3.2 SE`: the system's theory line and how far the measure stands from it."""
    line = result.theory.get(score.system)
    if line is None or line.accuracy is None:
        return ""
    found = departure_of(result, score.system)
    apart = f", {found.standard_errors:+.1f} SE{' !' if found.departs else ''}" if found is not None else ""
    return f"{percent(line.accuracy)}{apart}"


def per_question(result: EvalResult, systems: list[str]) -> str:
    """A row per question: its id, the question, the gold answer, and each system's answer
    (✓ or ✗) with its run id."""
    by_key = {(item.system, item.question_id): item for item in result.items}
    asked = result.asked or []
    rows = []
    for question in asked:
        row = [cell(question.id), cell(question.question, 80), cell(question.answer, 40)]
        for system in systems:
            item = by_key.get((system, question.id))
            row.append(
                "" if item is None else f"{'✓' if item.correct else '✗'} {cell(answer_read(item), 40)} `{item.run_id}`"
            )
        rows.append(row)
    return table(["id", "question", "gold", *systems], rows)
