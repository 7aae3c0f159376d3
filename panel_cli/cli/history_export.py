"""`panel history export ID --format md|json|html [-o FILE] [--open]`.

cli/history.py registers `export_run` on `history_app`, so it starts as fast as every other
history command: the report builders, the event models and markdown-it are imported inside
the command, and nothing here imports litellm.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from panel_cli.cli.history_options import DbOption, RunIdArgument
from panel_cli.errors import UserError

if TYPE_CHECKING:
    from panel_cli.export.transcript import Transcript

ExportFormat = Literal["md", "json", "html"]
FORMAT_OF_SUFFIX: dict[str, ExportFormat] = {
    ".md": "md",
    ".markdown": "md",
    ".json": "json",
    ".html": "html",
    ".htm": "html",
}
STDOUT = "-"
# A file named after its run keeps this much of the id, in characters a file name can hold
# anywhere: an id from another file (`history import`) can be any length and hold anything.
NAME_ID_LENGTH = 40


def export_run(
    run_id: RunIdArgument,
    export_format: Annotated[
        ExportFormat | None,
        typer.Option(
            "--format",
            "-f",
            help="md: Markdown to paste into a ticket; json: the whole transcript; html: one self-contained page to share."
            " Default: from the -o file's extension (.md, .json, .html), else md.",
        ),
    ] = None,
    output: Annotated[
        str | None,
        typer.Option(
            "--output",
            "-o",
            metavar="FILE",
            help="Write here ('-' for stdout). Default: stdout for md and json; panel-ID.html for html.",
        ),
    ] = None,
    open_file: Annotated[
        bool, typer.Option("--open", help="Open the written file with the system's viewer, if there is one.")
    ] = False,
    db: DbOption = None,
) -> None:
    """Export one run as Markdown, JSON or a self-contained HTML page (charts, no script, nothing fetched)."""
    from panel_cli.export.transcript import Transcript
    from panel_cli.store.reader import TranscriptReader

    chosen = export_format or _format_of(output)
    with TranscriptReader.open(db) as reader:
        transcript = Transcript.load(reader, run_id)
    text = render(transcript, chosen)
    if output is None and (chosen == "html" or open_file):
        # A page on a terminal helps nobody, and a viewer needs a file: name it after the run.
        target = Path(f"panel-{file_name_id(transcript.run.id)}.{chosen}")
        _write(target, text)
        _say(f"Wrote {target} (no -o given, so named after the run).")
    elif output is None or output == STDOUT:
        if open_file:
            raise UserError("--open needs a file to open; give -o FILE instead of '-'.")
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    else:
        target = Path(output).expanduser()
        _write(target, text)
        _say(f"Wrote {target}.")
    if open_file:
        _open(target)


def render(transcript: Transcript, export_format: ExportFormat) -> str:
    if export_format == "json":
        import json

        return json.dumps(transcript_json(transcript), indent=2, ensure_ascii=False) + "\n"
    from panel_cli.export.report import build_report

    report = build_report(transcript)
    if export_format == "md":
        from panel_cli.export.markdown import render_markdown

        return render_markdown(report)
    from panel_cli.export.page import render_html

    return render_html(report)


def transcript_json(transcript: Transcript) -> dict[str, Any]:
    """The same object as `panel history show ID --json`: the result envelope, then the run,
    every call (full requests and responses) and every event."""
    from panel_cli.view.history_json import run_detail

    return run_detail(transcript.run, transcript.calls, transcript.events)


def _format_of(output: str | None) -> ExportFormat:
    """The format a file's extension names; Markdown for stdout. An extension that names
    none is refused rather than given Markdown it did not ask for."""
    if output is None or output == STDOUT:
        return "md"
    if Path(output).expanduser().is_dir():
        raise UserError(f"{Path(output).expanduser()} is a folder; give a file name with -o.")
    suffix = Path(output).suffix.lower()
    if suffix not in FORMAT_OF_SUFFIX:
        named = f"'{suffix}'" if suffix else "no extension"
        raise UserError(
            f"-o {output}: {named} names no export format; give --format md, json or html,"
            " or a file ending in .md, .json or .html."
        )
    return FORMAT_OF_SUFFIX[suffix]


def file_name_id(run_id: str) -> str:
    """The part of a run's id a file is named with: its letters, digits, `-` and `_`, at most
    NAME_ID_LENGTH of them."""
    kept = "".join(
        character for character in run_id if character.isascii() and (character.isalnum() or character in "-_")
    )
    return kept[:NAME_ID_LENGTH] or "run"


def _open(target: Path) -> None:
    """Opening is a convenience: the file is written either way, so no viewer is a notice,
    not a failure."""
    import webbrowser

    try:
        opened = webbrowser.open(target.resolve().as_uri())
    except Exception:  # a viewer that fails to start is the same as none
        opened = False
    if not opened:
        _say(f"No viewer could be started for {target}; open it yourself.")


def _write(target: Path, text: str) -> None:
    if target.is_dir():
        raise UserError(f"{target} is a folder; give a file name with -o.")
    try:
        target.write_text(text, encoding="utf-8")
    except (OSError, ValueError) as error:
        reason = getattr(error, "strerror", None) or error
        raise UserError(f"Cannot write {target}: {reason}.") from error


def _say(message: str) -> None:
    """Progress goes to stderr, so stdout stays the export alone."""
    typer.echo(message, err=True)
