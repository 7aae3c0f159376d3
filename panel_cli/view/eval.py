"""An eval's result on the terminal: a table with a bar per system (its accuracy and 95%
interval, and its own theory line for simulated voters), the comparisons with the baseline in
plain words; and the wording the Markdown and HTML reports share with it
(`panel_cli.export.eval_markdown`, `panel_cli.export.eval_page`).

User and model text (names, questions, answers, the judge's reasons) is always `Text` here:
it never reads as markup."""

from __future__ import annotations

from collections.abc import Mapping

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from panel_cli.eval.grading import first_line
from panel_cli.eval.results import ANSWERING_IN_TURN, BASELINE, Departure, EvalResult, ItemResult, SystemScore
from panel_cli.eval.theory import VOTER_MODEL, Theory
from panel_cli.models.personas import PERSONAS
from panel_cli.models.routes import is_demo
from panel_cli.protocols import registry
from panel_cli.view import fmt
from panel_cli.view.eval_confidence import (
    calibration_fact,
    confidence_lines,
    optimum_sentence,
    provenance_facts,
    unkept_sentence,
)
from panel_cli.view.eval_stopping import stopping_lines

BAR_WIDTH = 20
LEGEND = "bar: █ up to the 95% interval, ▓ the interval below the accuracy, ░ above it"
SIMULATED_LEGEND = f"; cost {fmt.FREE}: simulated (demo members)"


def voice_personas(models: Mapping[str, str]) -> list[str]:
    """The members (name -> model) that are demo personas of a voice (`demo/sage`): they answer
    in character, never the question, so an eval grades them wrong nearly every time."""
    return [name for name, model in models.items() if is_demo(model) and model[len("demo/") :] in PERSONAS]


def voice_note(names: list[str]) -> str:
    """Why those members score near 0%, and which demo members an eval wants instead."""
    who = f"{', '.join(names)} {'is a demo persona' if len(names) == 1 else 'are demo personas'}"
    return (
        f"{who}: a persona answers in a voice of its own, never the question, so it scores near 0%."
        " Eval's simulated members are demo/oracle@p, each right with probability p (for instance model: demo/oracle@0.7)."
    )


def percent(share: float) -> str:
    return f"{share * 100:.1f}%"


def interval(score: SystemScore) -> str:
    return f"{score.ci_low * 100:.1f}–{score.ci_high * 100:.1f}%"


def system_label(result: EvalResult, score: SystemScore) -> str:
    return f"{BASELINE} ({result.baseline})" if score.system == BASELINE else score.system


def theory_label(result: EvalResult, score: SystemScore) -> str:
    """A system as its theory line names it: confer whose members answer in turn says so, since
    its voters then see the answers before their own (where herding starts a cascade)."""
    sequential = result.settings is not None and result.settings.answer_order == "sequential"
    label = system_label(result, score)
    return f"{label} ({ANSWERING_IN_TURN})" if sequential and score.protocol == "confer" else label


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


def cost(score: SystemScore, *, compact: bool = False) -> str:
    """A system's cost as every run's reads: `simulated, free` (`free` in the table's cell), `at
    least $X (no price: models)` when some of its runs called models of no price."""
    if score.simulated:
        return fmt.basis_cost(0.0, "simulated", compact=compact)
    return fmt.basis_cost(score.cost, score.cost_basis, score.unpriced_models, compact=compact)


THEORY_INTRO = f"Theory for simulated voters ({VOTER_MODEL}), │ on the bars:"
NOT_MEASURABLE = "not measurable with simulated voters"


ANSWER_ORDERS = {
    "parallel": "parallel (every member answers at once, alone)",
    "sequential": "sequential (members answer in turn, each shown the answers before it)",
}


def facts(result: EvalResult) -> list[tuple[str, str]]:
    """What a reader needs to cite the eval, as (name, value): the dataset and its hash, the
    grader, the method, tally, confer's answer order and weights, every model, the versions,
    the seed."""
    found = [
        ("eval", f"{result.eval_id} ({result.status})"),
        ("dataset", f"{result.dataset}, {result.questions} questions"),
    ]
    if result.dataset_sha256:
        found.append(("dataset sha256", result.dataset_sha256))
    found.append(("graded by", result.grader))
    if any(plan.name == BASELINE for plan in result.plan) or not result.plan:
        found.append(("baseline", f"{result.baseline} answering alone"))
    settings = result.settings
    if settings is not None:
        if settings.limit is not None:
            found.append(("questions", f"the first {settings.limit} of the dataset (--limit)"))
        voting = [
            name for name in settings.protocols if registry.is_protocol(name) and registry.spec(name).votes_on_options
        ]
        if voting:
            tie = f", tie_break {settings.tie_break}" if settings.tie_break else ""
            found.append(("method", f"{settings.method}{tie} ({', '.join(voting)})"))
        if "confer" in settings.protocols:
            found.append(("confer tally", settings.tally))
            found.append(("confer answer order", ANSWER_ORDERS.get(settings.answer_order, settings.answer_order)))
        if settings.weights and len(set(settings.weights.values())) > 1 or settings.weights_from:
            weights = ", ".join(f"{name} {weight:.4g}" for name, weight in settings.weights.items())
            source = f" (from {settings.weights_from})" if settings.weights_from else ""
            found.append(("weights", weights + source))
        found.append(("models", ", ".join(f"{name}: {model}" for name, model in settings.models.items())))
        found.append(("versions", f"panel {settings.panel_version}, litellm {settings.litellm_version}"))
        if settings.split is not None:
            found.append(
                ("split", f"{settings.split:g} of the questions calibrated on, the rest graded (seed {result.seed})")
            )
    calibrated = calibration_fact(result)
    if calibrated is not None:
        found.append(("calibration", calibrated))
    found.append(("seed", f"{result.seed} (simulated members), {result.concurrency} questions at a time"))
    return found + provenance_facts(result)


def per_correct(score: SystemScore) -> str:
    """`4.0 calls, $0.002` per correct answer; `–` with none right."""
    if score.calls_per_correct is None:
        return "–"
    money = fmt.FREE if score.simulated else fmt.basis_cost(score.cost_per_correct, score.cost_basis, compact=True)
    return f"{score.calls_per_correct:.1f} calls, {money}"


def departure_of(result: EvalResult, system: str) -> Departure | None:
    return next((found for found in result.departures if found.system == system), None)


def theory_sentence(label: str, theory: Theory) -> str:
    """`confer: 91.0%, exact — confer (confidence): the answer with …`; a simulated figure
    with its standard error; no figure, and why. Members answering in turn who herd add the
    figure with herding as simulated (`Theory.herding`)."""
    if theory.accuracy is None:
        return f"{label}: {theory.note or 'no closed form'}."
    if theory.way == "simulation":
        spread = f" ± {theory.standard_error * 100:.1f}" if theory.standard_error is not None else ""
        how = f"simulated over {theory.samples:,} questions" if theory.samples else "simulated"
        figure = f"{percent(theory.accuracy)}{spread} ({how}, one standard error)"
    else:
        figure = f"{percent(theory.accuracy)} exactly"
    herding = "" if theory.herding is None else f" With herding as simulated: {percent(theory.herding)} exactly."
    return f"{label}: {figure} — {theory.rule}.{herding}{optimum_sentence(theory)}"


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
    grid.add_column("calls/right", justify="right", no_wrap=True)
    grid.add_column("time", justify="right", no_wrap=True)
    for score in result.systems:
        if score.not_measurable is not None:
            accuracy = Text(NOT_MEASURABLE, style="yellow")
            interval_cell = Text("")
        else:
            accuracy = bar(score, theory_of(result, score))
            accuracy.append(f" {percent(score.accuracy):>6}")
            interval_cell = Text(f"{score.ci_low * 100:.0f}–{score.ci_high * 100:.0f}%")
        grid.add_row(
            Text(system_label(result, score)),
            accuracy,
            interval_cell,
            Text(f"{score.calls:,}"),
            Text(compact_tokens(score.tokens)),
            Text(cost(score, compact=True)),
            Text(f"{score.calls_per_correct:.1f}" if score.calls_per_correct is not None else "–"),
            Text(fmt.seconds(score.wall_time_s)),
        )
    simulated = any(score.simulated for score in result.systems)
    lines: list[RenderableType] = [
        title,
        grid,
        Text(LEGEND + (SIMULATED_LEGEND if simulated else ""), style="dim"),
        Text(""),
    ]
    if result.status != "finished":
        lines.append(
            Text(f"This eval is {result.status}: the figures are for the questions graded so far.", style="yellow")
        )
    for score in result.systems:
        if score.not_measurable is not None:
            lines.append(Text(f"{score.system}: {NOT_MEASURABLE}, not scored: {score.not_measurable}.", style="yellow"))
    voices = voice_personas(result.settings.models) if result.settings is not None else []
    if voices:
        lines.append(Text(voice_note(voices), style="yellow"))
    if result.theory:
        lines.append(Text(THEORY_INTRO))
        for score in result.systems:
            if score.system not in result.theory:
                continue
            lines.append(Text(f"  {theory_sentence(theory_label(result, score), result.theory[score.system])}"))
            found = departure_of(result, score.system)
            if found is not None:
                lines.append(Text(f"    {found.verdict}", style="bold yellow" if found.departs else "dim"))
    for comparison in result.comparisons:
        line = Text(f"{comparison.system}: ", style="bold")
        line.append(
            comparison.verdict,
            style="green" if comparison.significant and comparison.only_system > comparison.only_baseline else "",
        )
        lines.append(line)
    if len(result.pairs) > 1:
        lines.append(Text("Every pair (McNemar's exact test, Holm-adjusted; 95% CI of the difference, Newcombe):"))
        lines += [Text(f"  {pair.verdict}", style="green" if pair.significant else "") for pair in result.pairs]
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
        judges = {item.judge_call.model for item in result.items if item.judge_call is not None}
        spent = fmt.run_cost(sum(known) if known else None, judges)
        lines.append(Text(f"Grading by {result.grader}: {tokens:,} tokens, {spent} (not counted above)."))
    lines += confidence_lines(result)
    lines += stopping_lines(result)
    lines += [Text(note, style="yellow") for score in result.systems for note in [unkept_sentence(score)] if note]
    if result.calibration is not None:
        lines.append(
            Text(f"Calibrated: {calibration_fact(result)}.", style="yellow" if result.calibration.warning() else "")
        )
    lines.append(
        Text(
            f"Every run is stored, tagged eval {result.eval_id}; panel eval show {result.eval_id} shows this again.",
            style="dim",
        )
    )
    return Group(*lines)


def answer_read(item: ItemResult) -> str:
    """What a system answered, as the grade read it."""
    read = first_line(item.final_answer or "") if item.grade.method == "judge" else item.grade.predicted
    return read or ("failed" if item.error else "no answer" if item.final_answer is None else "unreadable")
