"""`panel batch FILE --questions PATH`: the panel once per question, several runs at a time,
every run stored with the batch's id, every finished question a line of `--output`.

A batch is resumable: `--resume BATCH_ID` runs only the questions that have no finished run
in that batch yet, in the same batch, and writes the results file in full again; a question
whose run stopped before its end resumes that run, reusing the calls it got answered. `--shard I/N`
runs the I-th of N slices, so several machines split one batch, each into its own database
(`panel history import` brings them together); every slice of one batch gets the same id,
drawn from the panel file, the questions file and N.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from panel_cli.cli import options
from panel_cli.exit_status import ExitStatus

if TYPE_CHECKING:
    from panel_cli.batch.lines import BatchLine
    from panel_cli.batch.progress import BatchTotals
    from panel_cli.batch.questions import BatchQuestion
    from panel_cli.batch.resume import BatchStart
    from panel_cli.config import Panel
    from panel_cli.runs.loader import GatewayLoader

DEFAULT_OUTPUT = Path("results.jsonl")


def batch(
    panel_file: Path = options.panel_file_argument(),
    questions_file: Path = typer.Option(
        ...,
        "--questions",
        help='The questions: JSONL ({"id", "question", "options"} a line), CSV with a question column, or text, one a line.',
        metavar="PATH",
        dir_okay=False,
    ),
    concurrency: int = typer.Option(
        4, "--concurrency", min=1, max=64, help="How many runs at a time (the panel's per-endpoint limits still hold)."
    ),
    output: Path = typer.Option(
        DEFAULT_OUTPUT,
        "--output",
        "-o",
        help="Results, one JSON line per question (written as runs finish, in full at the end).",
        dir_okay=False,
    ),
    resume: str | None = typer.Option(
        None,
        "--resume",
        metavar="BATCH_ID",
        help="Continue this batch: questions with a finished run in it are skipped.",
    ),
    shard: str | None = typer.Option(
        None, "--shard", metavar="I/N", help="Run only the I-th of N slices of the questions (1/3, 2/3, 3/3)."
    ),
    json_mode: bool = typer.Option(False, "--json", help="Print only a summary of the batch as JSON on stdout."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress and no summary."),
    db: Path | None = options.DB,
    demo: bool = options.DEMO,
) -> None:
    """Run the panel once per question of a file, several at a time; resumable, and splittable across machines."""
    from panel_cli.batch.questions import parse_shard, read_questions
    from panel_cli.batch.questions import shard as slice_of
    from panel_cli.batch.resume import batch_start
    from panel_cli.cli.protocol_commands import gateway_loader
    from panel_cli.cli.signals import on_sigterm_exit
    from panel_cli.config import load_panel
    from panel_cli.store.paths import resolve_db_path
    from panel_cli.view.environment import Environment

    on_sigterm_exit()
    panel = load_panel(panel_file)
    panel = panel.as_demo() if demo else panel
    loader = gateway_loader(Environment(), shown=not quiet)
    loader.start(panel)
    questions = read_questions(questions_file)
    warnings = _checked(panel, panel_file, questions, questions_file)
    note = _options_note(panel, panel_file, questions)
    if note is not None and not quiet:
        _say(note)
    slices = parse_shard(shard) if shard is not None else None
    if slices is not None:
        questions = slice_of(questions, *slices)
    db_path = resolve_db_path(db)
    batch_id = resume or _new_batch_id(panel_file, questions_file, slices, demo)
    start = batch_start(db_path, batch_id, panel, questions, resuming=resume is not None, slices=slices)
    # The claims are held until the batch ends, however it ends; a process killed outright
    # leaves claims the next invocation takes over, its process being gone.
    try:
        _run_batch(
            start,
            panel,
            questions,
            loader=loader,
            warnings=warnings,
            batch_id=batch_id,
            db_path=db_path,
            output=output,
            concurrency=concurrency,
            slices=slices,
            again=_resume_command(panel_file, questions_file, batch_id, output=output, shard=shard, db=db, demo=demo),
            json_mode=json_mode,
            quiet=quiet,
        )
    finally:
        start.release()


def _run_batch(
    start: BatchStart,
    panel: Panel,
    questions: list[BatchQuestion],
    *,
    loader: GatewayLoader,
    warnings: list[str],
    batch_id: str,
    db_path: Path,
    output: Path,
    concurrency: int,
    slices: tuple[int, int] | None,
    again: str,
    json_mode: bool,
    quiet: bool,
) -> None:
    """The batch once it is claimed: every question without a finished run, the stopped ones
    resumed; the results file; the summary; the exit code."""
    import asyncio

    from panel_cli.batch.progress import BatchTotals, make_progress
    from panel_cli.batch.runner import BatchRunner, BatchSummary, ResultsFile
    from panel_cli.cli.signals import run_until_signal
    from panel_cli.protocols.base import engine_of
    from panel_cli.runs.prepare import ready_to_call, run_budget, run_secrets
    from panel_cli.view.environment import Environment

    lines = start.lines
    to_run = [question for question in questions if question.key not in lines]
    secrets = ready_to_call(loader, panel, notify=Environment().warn)
    # A resumed question runs on the panel its run ran: what that panel keeps secret is scrubbed too.
    secrets = list(
        dict.fromkeys([*secrets, *(s for taken in start.taken_over.values() for s in run_secrets(taken.panel))])
    )
    run_budget(panel, allow_flag=False)  # a cost cap over a member of unknown price stops the batch here, not each run
    results = ResultsFile(output)
    results.rewrite(_in_order(questions, lines))
    totals = BatchTotals(questions=len(questions), skipped=len(lines), done=len(lines))
    totals.failed = sum(not line.reached_answer for line in lines.values())
    if not quiet:
        _say(_starting(batch_id, totals, concurrency, output, slices, start))
    progress = make_progress(batch_id, totals, concurrency=concurrency, json_mode=json_mode, quiet=quiet)
    runner = BatchRunner(
        batch_id=batch_id,
        engine=engine_of(panel.protocol),
        panel=panel,
        questions=to_run,
        lines=lines,
        warnings=warnings,
        secrets=secrets,
        db_path=db_path,
        output=results,
        concurrency=concurrency,
        totals=totals,
        progress=progress,
        taken_over=start.taken_over,
    )

    async def run() -> None:
        try:
            await runner.run()
        except asyncio.CancelledError:
            # Said here, before the process may exit at once (`signals`), so the way on is always printed.
            progress.close()
            results.rewrite(_in_order(questions, lines))
            _say(
                f"batch {batch_id} stopped: {totals.done} of {totals.questions} questions have a finished run, kept with their results."
            )
            _say(f"continue it with: {again}")
            raise
        finally:
            progress.close()

    run_until_signal(run, "")
    results.rewrite(_in_order(questions, lines))
    answered = sum(line.reached_answer for line in lines.values())
    if json_mode:
        from panel_cli.runs.outcome import CallsByStatus, SpentAnew

        anew = totals.spent.anew
        summary = BatchSummary(
            batch_id=batch_id,
            questions=len(questions),
            skipped=totals.skipped,
            ran=len(to_run),
            answered=answered,
            no_answer=len(lines) - answered,
            calls=totals.calls,
            tokens=totals.tokens,
            cost=totals.cost,
            cost_basis=totals.spent.cost_basis,
            calls_by_status=CallsByStatus(**totals.spent.by_status()),
            spent_anew=SpentAnew(calls=anew.calls, tokens=anew.tokens, cost=anew.cost) if totals.spent.reused else None,
            output=str(output),
            db=str(db_path),
        )
        sys.stdout.write(json.dumps(summary.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n")
    elif not quiet:
        _summary(batch_id, totals, answered, output)
    if answered < len(lines):
        raise typer.Exit(ExitStatus.FAILURE)


def _checked(panel: Panel, panel_file: Path, questions: list[BatchQuestion], questions_file: Path) -> list[str]:
    """The panel's checks, as every run makes them, and the questions' options against its
    protocol: only a protocol that votes on fixed options (its spec says so) takes them, and
    such a panel with none of its own needs every question to bring them. Returns the
    warnings each run raises."""
    from panel_cli.batch.runner import question_panel
    from panel_cli.errors import ConfigError
    from panel_cli.protocols import registry
    from panel_cli.protocols.checks import check_panel
    from panel_cli.runs.panels import declared_protocol

    protocol = panel.protocol
    with_options = [question for question in questions if question.options]
    if not registry.spec(protocol).votes_on_options:
        if with_options:
            voting = " and ".join(spec.name for spec in registry.specs() if spec.votes_on_options)
            problem = f"only {voting} panels take a question's options; {panel_file} runs {protocol}"
            raise ConfigError(str(questions_file), with_options[0].line, "options", problem)
        return check_panel(panel, protocol, declared_protocol(panel))
    if not panel.settings_given.get("options"):
        bare = next((question for question in questions if not question.options), None)
        if bare is not None:
            problem = f"this question has no options, and {panel_file} gives none for its {protocol}; give every question its options"
            raise ConfigError(str(questions_file), bare.line, "options", problem)
    sample = question_panel(panel, with_options[0]) if with_options else panel
    return check_panel(sample, protocol, declared_protocol(panel))


def _options_note(panel: Panel, panel_file: Path, questions: list[BatchQuestion]) -> str | None:
    """A vote over a questions file: the questions that bring no options are voted on the
    panel's own, which a person may not expect, so it is said once at the start."""
    from panel_cli.protocols import registry

    bare = sum(not question.options for question in questions)
    given = panel.setting("options") if registry.spec(panel.protocol).votes_on_options else None
    if not bare or not given:
        return None
    options = f"{panel_file}'s options ({', '.join(given)})"
    if bare == len(questions):
        return f"no question gives options of its own: each is voted on {options}."
    return f"{bare} of {len(questions)} questions give no options of their own: they are voted on {options}."


# A batch's id is as long as a run's (12 characters): `b` and 11 hex digits. Ids of batches
# started before (`b` and 10) are still found by `--resume`, which looks an id up as it is given.
BATCH_ID_DIGITS = 11


def _new_batch_id(panel_file: Path, questions_file: Path, slices: tuple[int, int] | None, demo: bool) -> str:
    """`b` and 11 hex digits: random for a whole batch; for a slice, drawn from what defines
    the batch (the two files, the number of slices, --demo), so that every machine running a
    slice of it gives its runs the same batch id."""
    import hashlib
    import secrets

    if slices is None:
        return "b" + secrets.token_hex(BATCH_ID_DIGITS // 2 + 1)[:BATCH_ID_DIGITS]
    digest = hashlib.sha256()
    for part in (panel_file.read_bytes(), questions_file.read_bytes(), f"{slices[1]} {demo}".encode()):
        digest.update(len(part).to_bytes(8, "big") + part)
    return "b" + digest.hexdigest()[:BATCH_ID_DIGITS]


def _in_order(questions: list[BatchQuestion], lines: dict[str, BatchLine]) -> list[BatchLine]:
    return [lines[question.key] for question in questions if question.key in lines]


def _resume_command(
    panel_file: Path,
    questions_file: Path,
    batch_id: str,
    *,
    output: Path,
    shard: str | None,
    db: Path | None,
    demo: bool,
) -> str:
    """The command that continues this batch, as the person would type it."""
    words = ["panel", "batch", str(panel_file), "--questions", str(questions_file), "--resume", batch_id]
    if shard is not None:
        words += ["--shard", shard.replace(" ", "")]
    if output != DEFAULT_OUTPUT:
        words += ["--output", str(output)]
    if db is not None:
        words += ["--db", str(db)]
    if demo:
        words.append("--demo")
    return shlex.join(words)


def _starting(
    batch_id: str,
    totals: BatchTotals,
    concurrency: int,
    output: Path,
    slices: tuple[int, int] | None,
    start: BatchStart,
) -> str:
    count = f"{totals.questions} question{'' if totals.questions == 1 else 's'}"
    part = f" (slice {slices[0]} of {slices[1]})" if slices else ""
    earlier = f", {totals.skipped} already finished" if totals.skipped else ""
    resumed = ""
    if start.taken_over:
        stopped, calls = len(start.taken_over), start.answered
        resumed = (
            f", {stopped} resumed from {'its' if stopped == 1 else 'their'} stopped run{'' if stopped == 1 else 's'}"
            f" ({calls} answered call{'' if calls == 1 else 's'} stored, reused where a request comes out as it did)"
        )
    return f"batch {batch_id}: {count}{part}{earlier}{resumed}, {concurrency} at a time, results to {output}."


def _summary(batch_id: str, totals: BatchTotals, answered: int, output: Path) -> None:
    missing = totals.done - answered
    without = f", {missing} without an answer" if missing else ""
    from panel_cli.view import fmt

    spent = f"calls {fmt.calls_count(totals.calls, totals.spent.by_status())} · {totals.usage}"
    if (anew := fmt.spent_anew(totals.spent)) is not None:
        spent += f"; spent anew {anew}"
    _say(
        f"batch {batch_id}: {answered} of {totals.questions} answered{without}; this time {spent}; results in {output}."
    )


def _say(message: str) -> None:
    """Progress notes go to stderr, like every `panel:` line: stdout is for `--json`."""
    sys.stderr.write(f"panel: {message}\n")
    sys.stderr.flush()
