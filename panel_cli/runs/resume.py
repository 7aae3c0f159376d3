"""A run continued from where it stopped, as a new run that pays only for what the old one
left unanswered.

The new run is the old one again from the start: the same protocol, panel and question, the
same fence tag and drawn seeds, so every prompt comes out byte for byte as before. Each request
the old run got answered (matched on its hash) is answered from the store without a call; the
first request that differs, and everything after it, is made as usual. The new run's config
names the old one (`resumed_from`), and its own events and calls are complete, so history
shows, replays and exports it like any other run. A follow-up (`--continue`) keeps its earlier
turns: they are read again from the store through its `parent_id`, as the old run read them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from panel_cli.config import Panel
from panel_cli.errors import UserError
from panel_cli.llm.gateway import AnsweredCall
from panel_cli.redact import REDACTED
from panel_cli.run_keys import FENCE_TAG_KEY, RUN_KEYS
from panel_cli.runs.followup import stored_parent
from panel_cli.store.reader import TranscriptReader
from panel_cli.store.records import RunRecord
from panel_cli.tasks import FENCE_TAG_PATTERN


@dataclass(frozen=True)
class Continuation:
    """What a resumed run takes over from the run it continues: that run's id (recorded as
    `resumed_from`), its fence tag, so every prompt comes out byte for byte as it did then
    and hashes alike (None for a run stored before tags were recorded: a fresh one is drawn),
    and its answered calls by request hash, in the order they ended, which the gateway
    answers from, each once."""

    run_id: str
    fence_tag: str | None
    answered: Mapping[str, Sequence[AnsweredCall]]


@dataclass(frozen=True)
class Resumption:
    """A stopped run, read back to be run again: its panel, question and `continuing`; the run
    it follows up (`parent_id`, None for none); its short id and what to tell the person."""

    panel: Panel
    question: str
    continuing: Continuation
    parent_id: str | None
    short_id: str
    notices: list[str]


def resumption(db: Path | str | None, run_id: str) -> Resumption:
    """The run `run_id` (an id or a unique beginning of one) read back for `panel resume`.
    Raises UserError for a run that cannot be resumed, saying why."""
    with TranscriptReader.open(db) as reader:
        record = reader.get_run(run_id)
        short = reader.short_id(record.id)
        refuse_finished(record, short)
        parent_id = stored_parent(record, short)
        answered = reader.answered_calls(record.id)
    panel = stored_panel(record, short)
    tag = record.config.get(FENCE_TAG_KEY)
    fence = tag if isinstance(tag, str) and re.fullmatch(FENCE_TAG_PATTERN, tag) else None
    count = sum(len(replies) for replies in answered.values())
    calls = f"{count} answered call{'' if count == 1 else 's'}"
    notices = [f"resuming run {short} ({panel.protocol}): {calls} taken from the store, the rest made as usual."]
    if fence is None:
        notices.append(
            f"run {short} was stored before panel recorded fence tags; calls that quote other answers are made again."
        )
    return Resumption(
        panel=panel,
        question=record.question,
        continuing=Continuation(run_id=record.id, fence_tag=fence, answered=answered),
        parent_id=parent_id,
        short_id=short,
        notices=notices,
    )


def refuse_finished(record: RunRecord, short: str) -> None:
    """Only a run that stopped before its end can be resumed: interrupted, crashed (stale) or
    failed. One still running elsewhere would have its in-flight calls paid twice."""
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
