"""`panel eval`: the panel's protocols and one member alone on the same questions with gold
answers, graded, with accuracy, cost, a paired test of every pair of systems and each system's
theory line; every eval kept in the store, listed, shown again and resumed.

`panel eval` is a group whose default command is `run`: `panel eval FILE --dataset …` runs an
eval as it always did (it is `panel eval run FILE --dataset …`), and `panel eval list` and
`panel eval show ID` read the kept ones. A group with a default reads best: the eval's own
commands sit under `eval`, and the command people type most keeps its short form (as
`git stash` is `git stash push`). A panel file called `list`, `show` or `run` is written
`./list`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from panel_cli.cli import completion, options
from panel_cli.cli.commands import PanelGroup

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import TaskID
    from typer import _click as click
    from typer._click.shell_completion import CompletionItem

    from panel_cli.eval.results import EvalResult, ItemResult
    from panel_cli.eval.runner import EvalPlan, Resumed

# The runner's default too (`panel_cli.eval.runner`), not imported here: `panel --help` stays light.
DEFAULT_CONCURRENCY = 4
# Bounds that keep a number within what SQLite stores (an eval's seed is kept with it).
MAX_COUNT = 1_000_000
MAX_SEED = 2**63 - 1
DEFAULT_COMMAND = "run"
HELP_FLAGS = ("--help", "-h")
EVAL_HELP = "Measure the panel against one member alone on questions with known answers, and keep every eval."


class EvalGroup(PanelGroup):
    """`eval`'s commands, `run` when the first word names none of them (`panel eval FILE …`)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # Completing `panel eval <TAB>` parses the words before it resiliently: with none, the
        # group itself completes (its commands and panel files), rather than `run` alone.
        completing_first_word = ctx.resilient_parsing and not args
        if not completing_first_word and (not args or (args[0] not in self.commands and args[0] not in HELP_FLAGS)):
            args = [DEFAULT_COMMAND, *args]
        return super().parse_args(ctx, args)

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        """The first word after `eval`: a command of the group, or a panel file (`run`'s)."""
        from typer._click.shell_completion import CompletionItem

        return [*super().shell_complete(ctx, incomplete), *map(CompletionItem, completion.panel_files(incomplete))]


eval_app = typer.Typer(
    cls=EvalGroup,
    help=f"{EVAL_HELP} `panel eval FILE --dataset …` is `panel eval run FILE --dataset …`.",
)


@eval_app.command("run")
def eval_command(
    panel_file: Path | None = options.panel_file_argument(required=False),
    dataset: str | None = typer.Option(
        None,
        "--dataset",
        metavar="PATH",
        help="Questions with gold answers: a JSONL file, or builtin:general (see --list-datasets).",
    ),
    baseline: str | None = typer.Option(
        None,
        "--baseline",
        metavar="MEMBER",
        help="The member who answers alone, to compare with (default: the first member).",
        autocompletion=completion.member_names,
    ),
    protocols: str | None = typer.Option(
        None,
        "--protocols",
        metavar="LIST",
        help="Protocols to evaluate, comma-separated (default confer,council,vote; vote only when every question has options).",
    ),
    grader: str | None = typer.Option(
        None,
        "--grader",
        metavar="GRADER",
        help="auto (option match, or normalised exact match for short answers), or judge:<member or model> (default auto).",
    ),
    concurrency: int = typer.Option(
        DEFAULT_CONCURRENCY, "--concurrency", min=1, max=64, metavar="N", help="How many questions run at a time."
    ),
    limit: int | None = typer.Option(
        None, "--limit", min=1, max=MAX_COUNT, metavar="N", help="Only the first N questions of the dataset."
    ),
    seed: int = typer.Option(
        0,
        "--seed",
        min=0,
        max=MAX_SEED,
        metavar="N",
        help="Seed of the simulated demo/oracle@p members and of --split.",
    ),
    calibrate: str | None = typer.Option(
        None,
        "--calibrate",
        metavar="PATH",
        help="Measure each member alone and write its weight log((K-1)p/(1-p)) to PATH (- prints the YAML), for weights: from PATH.",
    ),
    split: float | None = typer.Option(
        None,
        "--split",
        metavar="SHARE",
        help="With --calibrate: calibrate on this share of the questions (e.g. 0.5), and grade the protocols on the rest.",
    ),
    resume: str | None = typer.Option(
        None,
        "--resume",
        metavar="EVAL_ID",
        help="Go on with a stopped eval (its id, any unique beginning of one, or last): only its questions without a grade run.",
    ),
    report: Path | None = typer.Option(
        None,
        "--report",
        metavar="PATH",
        help="Also write a report there: an HTML page for .html, else Markdown.",
        dir_okay=False,
    ),
    json_mode: bool = options.JSON,
    db: Path | None = options.DB,
    list_datasets: bool = typer.Option(False, "--list-datasets", help="List the built-in datasets and exit."),
) -> None:
    """Measure the panel against one member alone on questions with known answers: accuracy, cost, and whether the difference is chance."""
    from rich.console import Console

    if list_datasets:
        _list_datasets(Console(), json_mode)
        return
    from panel_cli.cli.signals import on_sigterm_exit
    from panel_cli.errors import UserError

    if resume is not None:
        given = [
            name
            for name, value in _fixed_by_the_eval(
                panel_file, dataset, baseline, protocols, grader, limit, seed, calibrate, split
            )
            if value
        ]
        if given:
            raise UserError(f"--resume goes on with the eval as it was; leave out {', '.join(given)}.")
    else:
        if panel_file is None:
            raise UserError("Give a panel file: panel eval FILE --dataset builtin:general.")
        if dataset is None:
            raise UserError(
                "--dataset is needed: a JSONL file of questions with answers, or builtin:general (panel eval --list-datasets)."
            )
    if calibrate == "-" and json_mode:
        raise UserError("--calibrate - prints the weights on stdout, and so does --json; write the weights to a file.")
    if report is not None and not report.parent.is_dir():
        raise UserError(f"--report: the folder {report.parent} does not exist.")
    on_sigterm_exit()
    import secrets as random_ids

    from panel_cli.store.paths import resolve_db_path

    db_path = resolve_db_path(db)
    resumed = None
    if resume is not None:
        plan, eval_id, seed, done, calibration, settings, resumed = _resumed(db_path, resume)
        calibrate = settings.calibrate
    else:
        plan, eval_id, settings = _planned(
            panel_file, dataset, baseline, protocols, grader, limit, seed, calibrate, split, random_ids.token_hex(5)
        )
        done, calibration = [], None
    _warn_of_voice_personas(plan)
    result = _run(
        plan, eval_id, seed, concurrency, done, calibration, settings, resumed, db_path, json_mode, calibrate == "-"
    )
    _deliver(result, json_mode=json_mode, report=report, weights_to=calibrate)


def _warn_of_voice_personas(plan: EvalPlan) -> None:
    """A member that is a demo persona of a voice scores near 0%: said before the first run, not
    left for the table to show."""
    from panel_cli.view.eval import voice_note, voice_personas

    voices = voice_personas({member.name: member.model for member in plan.panel.members})
    if voices:
        _say(f"warning: {voice_note(voices)}")


def _fixed_by_the_eval(*values: Any) -> list[tuple[str, Any]]:
    names = (
        "FILE",
        "--dataset",
        "--baseline",
        "--protocols",
        "--grader",
        "--limit",
        "--seed",
        "--calibrate",
        "--split",
    )
    return [(name, value if name != "--seed" else value != 0) for name, value in zip(names, values, strict=True)]


def _planned(
    panel_file: Path | None,
    dataset: str | None,
    baseline: str | None,
    protocols: str | None,
    grader: str | None,
    limit: int | None,
    seed: int,
    calibrate: str | None,
    split: float | None,
    token: str,
) -> tuple[EvalPlan, str, Any]:
    from panel_cli.config import load_panel
    from panel_cli.eval.datasets import load_dataset
    from panel_cli.eval.runner import plan_eval

    assert panel_file is not None and dataset is not None
    panel = load_panel(panel_file)
    data = load_dataset(dataset, limit)
    plan = plan_eval(
        panel,
        data,
        protocols=protocols,
        baseline=baseline,
        grader=grader,
        calibrate=calibrate is not None,
        split=split,
        seed=seed,
    )
    eval_id = "e" + token
    return plan, eval_id, _settings(plan, limit=limit, calibrate=calibrate, grader=grader)


def _settings(plan: EvalPlan, *, limit: int | None, calibrate: str | None, grader: str | None) -> Any:
    from panel_cli.eval.provenance import command_line
    from panel_cli.eval.runner import eval_settings
    from panel_cli.redact import secret_values

    secrets = [*secret_values(), *plan.panel.expanded_values]
    command = command_line(sys.argv)
    return eval_settings(plan, secrets, limit=limit, calibrate=calibrate, grader=grader, command=command)


def _resumed(db_path: Path, prefix: str) -> tuple[EvalPlan, str, int, list[ItemResult], Any, Any, Resumed]:
    """The stored eval's plan, rebuilt from what it kept, and the items it already has (an
    item whose run failed outright is run again)."""
    import json

    from pydantic import ValidationError

    from panel_cli.config import Panel
    from panel_cli.errors import UserError
    from panel_cli.eval.datasets import Dataset
    from panel_cli.eval.runner import plan_eval, resumption
    from panel_cli.eval.storage import stored_result
    from panel_cli.redact import REDACTED
    from panel_cli.store.evals import EvalReader

    with EvalReader.open(db_path) as reader:
        stored = reader.get(prefix)
    if stored.summary.get("imported_from"):
        raise UserError(
            f"Eval {stored.row.id} came from {stored.summary['imported_from']} (panel history import), and its panel"
            " is that file's, not yours to run: resume it where it ran, or run your panel file again."
        )
    result = stored_result(stored)
    eval_id = result.eval_id
    if result.status == "finished":
        raise UserError(f"Eval {eval_id} is finished; panel eval show {eval_id} shows it.")
    if result.status == "running":
        raise UserError(f"Eval {eval_id} is still running in another panel process; resume it once that has stopped.")
    settings = result.settings
    if settings is None or REDACTED in json.dumps(settings.panel_config, ensure_ascii=False):
        raise UserError(
            f"Eval {eval_id} cannot be resumed: its panel held a secret the store keeps only as {REDACTED}; run it again."
        )
    try:
        panel = Panel.model_validate(settings.panel_config)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UserError(
            f"Eval {eval_id} cannot be resumed: its stored panel is not valid for this version of panel "
            f"({'.'.join(str(part) for part in first['loc'])}: {first['msg']}); run it again."
        ) from None
    data = Dataset(source=result.dataset, items=result.asked, sha256=result.dataset_sha256)
    plan = plan_eval(
        panel,
        data,
        protocols=",".join(settings.protocols) if settings.protocols else None,
        baseline=result.baseline,
        grader=settings.grader,
        calibrate=settings.calibrate is not None,
        split=settings.split,
        seed=result.seed,
    )
    done, resumed = resumption(result)
    _say(f"eval {eval_id}: resuming; {len(done)} graded item{'s' if len(done) != 1 else ''} kept.")
    return plan, eval_id, result.seed, done, result.calibration, settings, resumed


def _run(
    plan: EvalPlan,
    eval_id: str,
    seed: int,
    concurrency: int,
    done: list[ItemResult],
    calibration: Any,
    settings: Any,
    resumed: Resumed | None,
    db_path: Path,
    json_mode: bool,
    weights_on_stdout: bool,
) -> EvalResult:
    import asyncio

    from rich.console import Console

    from panel_cli.cli.protocol_commands import gateway_loader
    from panel_cli.cli.signals import run_until_signal
    from panel_cli.eval.runner import run_eval
    from panel_cli.eval.storage import EvalRecording
    from panel_cli.runs.prepare import ready_to_call, run_budget
    from panel_cli.store.evals import EvalWriter
    from panel_cli.store.subscriber import TranscriptStore
    from panel_cli.view.environment import Environment

    progress_console = Console(stderr=True) if json_mode or weights_on_stdout else Console()
    env = Environment()
    loader = gateway_loader(env)
    secrets = ready_to_call(loader, plan.called, notify=env.warn)
    # A cost cap over a member of unknown price stops the eval here, not each run.
    run_budget(plan.called, allow_flag=False)
    progress = EvalBar(progress_console) if progress_console.is_terminal else PlainProgress()
    systems = [*(plan.calibration.systems if plan.calibration is not None else []), *plan.systems]
    _say(
        f"eval {eval_id}: {len(plan.dataset.items)} questions × {len(systems)} systems "
        f"({', '.join(system.name for system in systems)}), {concurrency} at a time."
    )

    async def run() -> EvalResult:
        store = await TranscriptStore.open(db_path)
        writer = EvalWriter.open(db_path, eval_id)
        try:
            return await run_eval(
                plan,
                store=store,
                secrets=secrets,
                eval_id=eval_id,
                seed=seed,
                concurrency=concurrency,
                progress=progress,
                recorder=EvalRecording(writer),
                done=done,
                calibration=calibration,
                settings=settings,
                resumed=resumed,
            )
        except asyncio.CancelledError:
            progress.close()
            _say(f"eval {eval_id} stopped; what was graded is kept: panel eval --resume {eval_id} goes on.")
            raise
        finally:
            progress.close()
            writer.close()
            await store.close()

    return run_until_signal(run, "")


def _deliver(result: EvalResult, *, json_mode: bool, report: Path | None, weights_to: str | None) -> None:
    """The weights file, the report file, then the table (or JSON) on stdout."""
    import json

    from rich.console import Console

    from panel_cli.errors import UserError
    from panel_cli.eval.calibration import weights_yaml
    from panel_cli.redact import redact_obj, secret_values
    from panel_cli.view.eval import render
    from panel_cli.view.output import output_console

    weights_text = weights_yaml(result.calibration) if result.calibration is not None else None
    if weights_to is not None and weights_to != "-" and weights_text is not None:
        try:
            Path(weights_to).write_text(weights_text, encoding="utf-8")
        except OSError as exc:
            raise UserError(f"--calibrate: {weights_to}: cannot be written ({exc.strerror}).") from None
    if report is not None:
        _write_report(result, report)
    if json_mode:
        sys.stdout.write(
            json.dumps(redact_obj(result.model_dump(mode="json"), secret_values()), indent=2, ensure_ascii=False) + "\n"
        )
    elif weights_to == "-":
        Console(stderr=True).print(render(result))
        if weights_text is not None:
            sys.stdout.write(weights_text)
    else:
        output_console().print(render(result))
    if weights_to is not None and weights_to != "-" and weights_text is not None:
        _say(f"weights written to {weights_to}; name it in a panel with weights: from {weights_to}.")
    warning = result.calibration.warning() if result.calibration is not None else None
    if warning:
        _say(f"warning: {warning}.")
    if report is not None:
        _say(f"report written to {report}.")


def _write_report(result: EvalResult, report: Path) -> None:
    from panel_cli.errors import UserError
    from panel_cli.export.eval_markdown import markdown

    if report.suffix.lower() in (".html", ".htm"):
        from panel_cli.export.eval_page import render_eval_html

        text = render_eval_html(result)
    else:
        text = markdown(result)
    try:
        report.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"--report: {report}: cannot be written ({exc.strerror}).") from None


@eval_app.command("list")
def list_command(
    limit: int = typer.Option(
        20, "--limit", "-n", min=1, max=MAX_COUNT, metavar="N", help="How many evals, the latest first."
    ),
    json_mode: bool = typer.Option(False, "--json", help="Print JSON on stdout instead of a table."),
    db: Path | None = options.DB,
) -> None:
    """List the kept evals, the latest first: status, dataset, questions graded and accuracy so far."""
    import json

    from rich.table import Table
    from rich.text import Text

    from panel_cli.store.evals import EvalReader
    from panel_cli.store.paths import resolve_db_path
    from panel_cli.untrusted import clean_record
    from panel_cli.view.output import output_console

    with EvalReader.open(resolve_db_path(db)) as reader:
        rows = [clean_record(row) for row in reader.list_evals(limit)]
    if json_mode:
        sys.stdout.write(json.dumps([row.model_dump(mode="json") for row in rows], indent=2, ensure_ascii=False) + "\n")
        return
    console = output_console()
    if not rows:
        console.print("No evals yet: panel eval FILE --dataset builtin:general runs one.")
        return
    table = Table(box=None, padding=(0, 1), pad_edge=False, header_style="bold")
    for column, right in (
        ("eval", False),
        ("status", False),
        ("started", False),
        ("panel", False),
        ("dataset", False),
        ("graded", True),
        ("right", True),
    ):
        table.add_column(column, justify="right" if right else "left", no_wrap=column != "dataset")
    for row in rows:
        table.add_row(
            Text(row.id),
            Text(row.status),
            Text(_when(row.started_at)),
            Text(row.panel),
            Text(row.dataset),
            Text(f"{row.items:,}"),
            Text(f"{row.correct / row.items * 100:.1f}%" if row.items else "–"),
        )
    console.print(table)


def _when(epoch: float) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch))


@eval_app.command("show")
def show_command(
    eval_id: str = typer.Argument(..., metavar="ID", help="An eval id, any unique beginning of one, or last."),
    json_mode: bool = options.JSON,
    report: Path | None = typer.Option(
        None,
        "--report",
        metavar="PATH",
        help="Also write a report there: an HTML page for .html, else Markdown.",
        dir_okay=False,
    ),
    db: Path | None = options.DB,
) -> None:
    """Show a kept eval as it was reported (an unfinished one as far as it got)."""
    from panel_cli.errors import UserError
    from panel_cli.eval.storage import stored_result
    from panel_cli.store.evals import EvalReader
    from panel_cli.store.paths import resolve_db_path

    if report is not None and not report.parent.is_dir():
        raise UserError(f"--report: the folder {report.parent} does not exist.")
    with EvalReader.open(resolve_db_path(db)) as reader:
        result = stored_result(reader.get(eval_id))
    _deliver(result, json_mode=json_mode, report=report, weights_to=None)


class EvalBar:
    """A Rich progress bar per system on a terminal: questions done, how many right so far."""

    def __init__(self, console: Console) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[right]} right"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self._tasks: dict[str, TaskID] = {}
        self._right: dict[str, int] = {}
        self._progress.start()

    def start(self, system: str, total: int) -> None:
        self._right[system] = 0
        self._tasks[system] = self._progress.add_task(system, total=total, right=0)

    def advance(self, result: ItemResult) -> None:
        self._right[result.system] += result.correct
        self._progress.update(self._tasks[result.system], advance=1, right=self._right[result.system])

    def close(self) -> None:
        self._progress.stop()


class PlainProgress:
    """On a pipe, one line per system as it finishes."""

    def __init__(self) -> None:
        self._counts: dict[str, list[int]] = {}

    def start(self, system: str, total: int) -> None:
        self._counts[system] = [0, 0, total]

    def advance(self, result: ItemResult) -> None:
        counts = self._counts[result.system]
        counts[0] += 1
        counts[1] += result.correct
        if counts[0] == counts[2]:
            _say(f"{result.system}: {counts[1]} of {counts[2]} right.")

    def close(self) -> None:
        return None


def _list_datasets(console: Console, json_mode: bool) -> None:
    import json

    from rich.table import Table
    from rich.text import Text

    from panel_cli.eval.datasets import list_builtin

    datasets = list_builtin()
    if json_mode:
        sys.stdout.write(json.dumps([dataset.model_dump() for dataset in datasets], indent=2) + "\n")
        return
    table = Table(title="Built-in datasets (--dataset NAME)", title_justify="left")
    table.add_column("name")
    table.add_column("questions", justify="right")
    table.add_column("what it holds")
    for dataset in datasets:
        table.add_row(Text(dataset.name), Text(str(dataset.size)), Text(dataset.description))
    console.print(table)


def _say(message: str) -> None:
    """Notes go to stderr, like every `panel:` line: stdout is for the table or `--json`."""
    sys.stderr.write(f"panel: {message}\n")
    sys.stderr.flush()
