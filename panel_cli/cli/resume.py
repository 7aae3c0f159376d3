"""`panel resume ID`: continue an interrupted or crashed run as a new run, paying only for what
the old one left unanswered.

The new run is the old one again from the start: the same protocol, panel and question, the
same fence tag and drawn seeds, so every prompt comes out byte for byte as before. Each request
the old run got answered (matched on its hash) is answered from the store without a call; the
first request that differs, and everything after it, is made as usual. The new run's config
names the old one (`resumed_from`), and its own events and calls are complete, so history
shows, replays and exports it like any other run. A follow-up (`--continue`) keeps its earlier
turns: they are read again from the store through its `parent_id`, as the old run read them.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from panel_cli.cli import completion, options

if TYPE_CHECKING:
    from panel_cli.config import Panel, Protocol
    from panel_cli.protocols.base import Engine
    from panel_cli.store.records import RunRecord

# Each protocol's engine, as `module:function`, imported only for the protocol resumed. This is
# `panel run`'s dispatch one level down: `run` hands a file to the protocol's command, which
# builds the panel from the file and its options; a resumed run has its panel already, as
# stored, so it goes straight to the engine.
ENGINES: dict[Protocol, str] = {
    "confer": "panel_cli.protocols.confer.engine:confer",
    "council": "panel_cli.protocols.council.engine:council",
    "ensemble": "panel_cli.protocols.ensemble.engine:ensemble",
    "vote": "panel_cli.protocols.vote.engine:vote",
    "decide": "panel_cli.protocols.vote.engine:decide",
    "delphi": "panel_cli.protocols.delphi.engine:delphi",
    "supervise": "panel_cli.protocols.supervise.engine:supervise",
    "orchestrate": "panel_cli.protocols.orchestrate.engine:orchestrate",
}


def resume(
    run_id: str = typer.Argument(
        ...,
        metavar="ID",
        help="The run to continue: its id, or any unique beginning of one.",
        autocompletion=completion.run_ids,
    ),
    json_mode: bool = options.JSON,
    quiet: bool = options.QUIET,
    db: Path | None = options.DB,
) -> None:
    """Continue an interrupted or crashed run: answered calls come from the store, the rest are made."""
    from panel_cli.cli.running import begin_run, execute

    loader = begin_run()
    from panel_cli.followup import stored_parent
    from panel_cli.protocols.base import FENCE_TAG_KEY, Continuation
    from panel_cli.store.reader import TranscriptReader
    from panel_cli.tasks import FENCE_TAG_PATTERN

    with TranscriptReader.open(db) as reader:
        record = reader.get_run(run_id)
        short = reader.short_id(record.id)
        refuse_finished(record, short)
        parent_id = stored_parent(record, short)
        answered = reader.answered_calls(record.id)
    panel = stored_panel(record, short)
    engine = engine_for(panel.protocol)
    tag = record.config.get(FENCE_TAG_KEY)
    fence = tag if isinstance(tag, str) and re.fullmatch(FENCE_TAG_PATTERN, tag) else None
    if not quiet:
        count = sum(len(replies) for replies in answered.values())
        calls = f"{count} answered call{'' if count == 1 else 's'}"
        sys.stderr.write(
            f"panel: resuming run {short} ({panel.protocol}): {calls} taken from the store, the rest made as usual.\n"
        )
        if fence is None:
            sys.stderr.write(
                f"panel: run {short} was stored before panel recorded fence tags; calls that quote other answers are made again.\n"
            )
    continuing = Continuation(run_id=record.id, fence_tag=fence, answered=answered)
    # A follow-up gets its earlier turns again, read from the store as they were, so its requests hash alike.
    controls = options.RunControls(follow_up=parent_id)
    execute(
        loader,
        engine,
        panel,
        record.question,
        warnings=[],
        json_mode=json_mode,
        quiet=quiet,
        db=db,
        continuing=continuing,
        controls=controls,
    )


def refuse_finished(record: RunRecord, short: str) -> None:
    """Only a run that stopped before its end can be resumed: interrupted, crashed (stale) or
    failed. One still running elsewhere would have its in-flight calls paid twice."""
    from panel_cli.errors import UserError

    match record.status:
        case "finished":
            raise UserError(f"Run {short} has already finished; only an interrupted or crashed run can be resumed.")
        case "no_answer":
            raise UserError(
                f"Run {short} has already finished, without an answer; only an interrupted or crashed run can be resumed."
            )
        case "running":
            raise UserError(
                f"Run {short} is still running in another panel process; resume it once that process has stopped."
            )


def stored_panel(record: RunRecord, short: str) -> Panel:
    """The panel the run ran, rebuilt from its config. A config or question the store had to
    redact (a secret, a `${VAR}` the panel file expanded) cannot be rebuilt faithfully: its
    prompts would differ and the models would see `[redacted]`, so it is refused."""
    from pydantic import ValidationError

    from panel_cli.config import Panel
    from panel_cli.errors import UserError
    from panel_cli.protocols.base import RUN_KEYS
    from panel_cli.redact import REDACTED

    fields = {key: value for key, value in record.config.items() if key not in RUN_KEYS}
    if REDACTED in json.dumps(fields, ensure_ascii=False) or REDACTED in record.question:
        raise UserError(
            f"Run {short} cannot be resumed: its panel or question held a secret the store keeps only as {REDACTED};"
            " run its panel file again instead."
        )
    try:
        return Panel.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "panel"
        raise UserError(
            f"Run {short} cannot be resumed: its stored panel is not valid for this version of panel ({where}: {first['msg']});"
            " run its panel file again instead."
        ) from None


def engine_for(protocol: Protocol) -> Engine:
    module_name, _, function = ENGINES[protocol].partition(":")
    engine: Engine = getattr(importlib.import_module(module_name), function)
    return engine
