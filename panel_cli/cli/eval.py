"""`panel eval FILE --dataset PATH`: the panel's protocols and one member alone on the same
questions with gold answers, graded, with accuracy, cost and a paired test of each protocol
against the member alone. Every question of every system is a real run, stored and tagged."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from panel_cli.cli import completion, options

if TYPE_CHECKING:
    from rich.console import Console

    from panel_cli.eval.results import EvalResult, ItemResult

# The runner's default too (`panel_cli.eval.runner`), not imported here: `panel --help` stays light.
DEFAULT_CONCURRENCY = 4


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
        None, "--limit", min=1, metavar="N", help="Only the first N questions of the dataset."
    ),
    seed: int = typer.Option(0, "--seed", metavar="N", help="Seed of the simulated demo/oracle@p members."),
    report: Path | None = typer.Option(
        None, "--report", metavar="PATH", help="Also write a Markdown report there.", dir_okay=False
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

    if panel_file is None:
        raise UserError("Give a panel file: panel eval FILE --dataset builtin:general.")
    if dataset is None:
        raise UserError(
            "--dataset is needed: a JSONL file of questions with answers, or builtin:general (panel eval --list-datasets)."
        )
    on_sigterm_exit()
    import asyncio
    import json
    import secrets as random_ids

    from panel_cli.cli.signals import run_until_signal
    from panel_cli.config import load_panel
    from panel_cli.eval.datasets import load_dataset
    from panel_cli.eval.report import markdown, render
    from panel_cli.eval.runner import plan_eval, run_eval
    from panel_cli.redact import redact_obj
    from panel_cli.runs.loader import GatewayLoader
    from panel_cli.runs.prepare import ready_to_call, run_budget
    from panel_cli.store.paths import resolve_db_path
    from panel_cli.store.subscriber import TranscriptStore
    from panel_cli.view.output import output_console

    panel = load_panel(panel_file)
    loader = GatewayLoader()
    data = load_dataset(dataset)
    if limit is not None:
        data = data.model_copy(update={"items": data.items[:limit]})
    plan = plan_eval(panel, data, protocols=protocols, baseline=baseline, grader=grader)
    if report is not None and not report.parent.is_dir():
        raise UserError(f"--report: the folder {report.parent} does not exist.")
    console = output_console()
    progress_console = Console(stderr=True) if json_mode else console
    secrets = ready_to_call(loader, plan.called, console=progress_console, show_progress=progress_console.is_terminal)
    run_budget(
        plan.called, allow_flag=False
    )  # a cost cap over a member of unknown price stops the eval here, not each run
    db_path = resolve_db_path(db)
    eval_id = "e" + random_ids.token_hex(5)
    progress = EvalBar(progress_console) if progress_console.is_terminal else PlainProgress()
    _say(
        f"eval {eval_id}: {len(data.items)} questions × {len(plan.systems)} systems ({', '.join(s.name for s in plan.systems)}), {concurrency} at a time."
    )

    async def run() -> EvalResult:
        store = await TranscriptStore.open(db_path)
        try:
            return await run_eval(
                plan,
                store=store,
                secrets=secrets,
                eval_id=eval_id,
                seed=seed,
                concurrency=concurrency,
                progress=progress,
            )
        except asyncio.CancelledError:
            progress.close()
            _say(f"eval {eval_id} stopped; the runs that finished are stored, tagged eval {eval_id}.")
            raise
        finally:
            progress.close()
            await store.close()

    result = run_until_signal(run, "")
    if report is not None:
        try:
            report.write_text(markdown(result), encoding="utf-8")
        except OSError as exc:
            raise UserError(f"--report: {report}: cannot be written ({exc.strerror}).") from None
    if json_mode:
        sys.stdout.write(
            json.dumps(redact_obj(result.model_dump(mode="json"), secrets), indent=2, ensure_ascii=False) + "\n"
        )
    else:
        console.print(render(result))
    if report is not None:
        _say(f"report written to {report}.")


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
        self._tasks: dict[str, int] = {}
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
