"""Follow-ups: `--continue ID|last` runs a new deliberation on top of an earlier one.

The members of the new run see the earlier run as a conversation they already had: its
question as the user's turn, its final answer as the assistant's, before the new question.
An earlier run that was itself a follow-up brings its own thread along, oldest first, so a
chain of follow-ups reads as one conversation. The thread is read from the store, never
from the command line, so `panel resume` of a follow-up rebuilds the very same turns and
its requests hash as before.

The thread is capped, nearest runs first: at most MAX_TURNS runs, and no more than
MAX_THREAD_CHARS characters of their questions and answers; the run continued is always
kept whole, however long (its answer is bounded by `max_response_chars` already).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from panel_cli.errors import UserError
from panel_cli.run_keys import PARENT_ID_KEY
from panel_cli.store.reader import TranscriptReader
from panel_cli.store.records import RunRecord

LATEST = "last"
MAX_TURNS = 8
MAX_THREAD_CHARS = 100_000


@dataclass(frozen=True)
class FollowUp:
    """The run a follow-up continues (recorded as `parent_id`), and the turns every call of
    the new run gets first: user and assistant messages, oldest first."""

    parent_id: str
    turns: tuple[dict[str, str], ...]


def resolve_follow_up(db: Path | str | None, given: str) -> FollowUp:
    """The follow-up `--continue given` asks for: `last` is the latest run stored, anything else
    a run id or a unique beginning of one, as `panel history show` takes it. A run with no
    final answer has nothing to follow up, and is refused (exit 2) like an unknown id."""
    with TranscriptReader.open(db) as reader:
        if given.strip().lower() == LATEST:
            latest = reader.list_runs(1)
            if not latest:
                raise UserError(f"--continue last found no run to continue in {reader.path}.")
            given = latest[0].id
        record = reader.get_run(given)
        if record.final_answer is None:
            raise UserError(_no_answer(record, reader.short_id(record.id)))
        thread = _thread(reader, record)
    return FollowUp(parent_id=record.id, turns=prior_turns(thread))


def stored_parent(record: RunRecord, short: str) -> str | None:
    """The run a stored run follows up (None: it follows up none), for `panel resume`, which
    rebuilds the follow-up's turns from the store through it. A parent deleted since cannot
    give them back, so the run could not be replayed as it was, and is refused."""
    parent_id = record.config.get(PARENT_ID_KEY)
    if not isinstance(parent_id, str):
        return None
    ancestors = record.thread.ancestors
    if not ancestors or ancestors[-1].run_id != parent_id:
        raise UserError(
            f"Run {short} cannot be resumed: the run it follows up ({parent_id}) is no longer in the store;"
            " ask the follow-up again with --continue."
        )
    return parent_id


def _no_answer(record: RunRecord, short: str) -> str:
    if record.resumed_by is not None:
        return f"Run {short} has no final answer of its own: run {record.resumed_by} resumed it; continue that one."
    if record.status in ("running", "stale"):
        state = "is still running" if record.status == "running" else "never ended"
        return f"Run {short} {state}, so it has no final answer to follow up; continue a run that reached one."
    return f"Run {short} reached no final answer ({record.status}), so there is nothing to follow up; continue a run that reached one."


def _thread(reader: TranscriptReader, record: RunRecord) -> list[RunRecord]:
    """The run and the runs it follows up, oldest first: the nearest MAX_TURNS of them, up to
    the first one no longer stored (the reader's ancestors stop there)."""
    nearest = [run.run_id for run in record.thread.ancestors][-(MAX_TURNS - 1) :] if MAX_TURNS > 1 else []
    return [*(reader.get_run(run_id) for run_id in nearest), record]


def prior_turns(thread: Sequence[RunRecord]) -> tuple[dict[str, str], ...]:
    """Each run's question and final answer as a user and an assistant turn, oldest first,
    within MAX_THREAD_CHARS: the nearest runs are kept, the last run always (see the module)."""
    kept: list[RunRecord] = []
    size = 0
    for run in reversed(thread):
        if run.final_answer is None:
            continue
        length = len(run.question) + len(run.final_answer)
        if kept and size + length > MAX_THREAD_CHARS:
            break
        kept.append(run)
        size += length
    return tuple(
        turn
        for run in reversed(kept)
        for turn in (
            {"role": "user", "content": run.question},
            {"role": "assistant", "content": run.final_answer or ""},
        )
    )
