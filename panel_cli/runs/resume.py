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
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from panel_cli.config import Panel
from panel_cli.errors import UserError
from panel_cli.llm.reuse import AnsweredCall
from panel_cli.protocols.gates import Gate
from panel_cli.protocols.registry import is_protocol, spec
from panel_cli.redact import REDACTED
from panel_cli.run_keys import FENCE_TAG_KEY, GATE_KEY, RUN_KEYS, TAGS_KEY
from panel_cli.runs.followup import stored_parent
from panel_cli.runs.panels import armed_gate
from panel_cli.runs.reach import beyond_the_providers
from panel_cli.store.claims import Claim, release_claims, take_claims
from panel_cli.store.paths import resolve_db_path
from panel_cli.store.reader import TranscriptReader
from panel_cli.store.records import CallRecord, RunRecord
from panel_cli.tasks import FENCE_TAG_PATTERN, fence_tag, render_labelled
from panel_cli.tools.attachments import NOUN, read_attachments, render_attachments


@dataclass(frozen=True)
class Continuation:
    """What a resumed run takes over from the run it continues: that run's id (recorded as
    `resumed_from`), its fence tag, so every prompt comes out byte for byte as it did then
    and hashes alike (None for a run stored before tags were recorded: a fresh one is drawn),
    and its answered calls by request hash, in the order they ended, which the gateway
    answers from, each once. `tags`: the run's own (a batch's id and question), kept by the
    run that resumes it, so a batch counts that run as its question's."""

    run_id: str
    fence_tag: str | None
    answered: Mapping[str, Sequence[AnsweredCall]]
    tags: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Resumption:
    """A stopped run, read back to be run again: its panel, question and `continuing`; the run
    it follows up (`parent_id`, None for none); its short id and what to tell the person; and
    the `claims` this process holds until the resume is over (`release` them then): on the run,
    and, when `--force` resumes it again, on the resume it abandons."""

    panel: Panel
    question: str
    continuing: Continuation
    parent_id: str | None
    short_id: str
    notices: list[str]
    claims: tuple[Claim, ...]
    imported_from: str | None = None
    """The file `panel history import` brought the run (or the run it resumes) from."""
    reach: tuple[str, ...] = ()
    """For an imported run, what its panel does besides calling the providers
    (`runs.reach`): what the person is shown, and asked about, before it starts."""
    gate: Gate | None = None
    """The gate the run was started with (`--gate`), armed again: the resumed run's exit code
    is its verdict, as the first run's would have been."""

    def release(self) -> None:
        release_claims(self.claims)


# A run resumed, whose resume was resumed, …: how far the chain is followed to its latest run.
CHAIN_LIMIT = 100
# What the run that took a run over may have come to for `--force` to resume that run again:
# its resume itself failed, crashed, or is no longer stored (None).
FORCEABLE = ("failed", "stale", "damaged", None)


def resumption(db: Path | str | None, run_id: str, *, force: bool = False) -> Resumption:
    """The run `run_id` (an id, a unique beginning of one, or `last`) read back for `panel
    resume`, claimed for this process first (`panel_cli.store.claims`), so that no other resume
    of it starts until this one is over. Raises UserError for a run that cannot be resumed,
    saying why: it finished, another run took it over (`force`: again, when that run failed,
    crashed or is gone), or another process holds the claim (`force`: one of another host)."""
    path = resolve_db_path(db)
    with TranscriptReader.open(path) as reader:
        found = reader.get_run(run_id).id
    claims = take_claims(path, [("run", found)], force=force)
    try:
        return _read_back(path, found, force, claims)
    except BaseException:
        release_claims(claims)
        raise


def _read_back(path: Path, run_id: str, force: bool, claims: list[Claim]) -> Resumption:
    """Read once the claim is held: a resume that ended meanwhile has marked the run `resumed`.
    A resume `force` abandons is claimed too (added to `claims`), so it is not resumed
    meanwhile; the new run's start takes it over (`panel_cli.store.writer`)."""
    with TranscriptReader.open(path) as reader:
        record = reader.get_run(run_id)
        short = reader.short_id(record.id)
        if record.status == "resumed":
            abandoned = refuse_taken_over(reader, record, short, force=force)
            if abandoned is not None:
                claims += take_claims(path, [("run", abandoned)], force=force)
        else:
            refuse_finished(record, short)
        parent_id = stored_parent(record, short)
        answered = reader.answered_calls(record.id)
        imported_from = imported_origin(reader, record)
    panel = stored_panel(record, short)
    # The files it attaches are read here, from this machine, and sent: the other file chose them.
    attached = [f"sends the file {path} to every member" for path in panel.attach]
    reach = (*beyond_the_providers(panel), *attached) if imported_from is not None else ()
    continuing = continuation(record, answered)
    changed = changed_attachments(panel, continuing.fence_tag, [call for calls in answered.values() for call in calls])
    notices = [resume_notice(short, panel.protocol, continuing, changed)]
    if continuing.fence_tag is None:
        notices.append(
            f"run {short} was stored before panel recorded fence tags; calls that quote other answers are made again."
        )
    return Resumption(
        panel=panel,
        question=record.question,
        continuing=continuing,
        parent_id=parent_id,
        short_id=short,
        notices=notices,
        claims=tuple(claims),
        imported_from=imported_from,
        reach=reach,
        gate=stored_gate(record, panel),
    )


def stored_gate(record: RunRecord, panel: Panel) -> Gate | None:
    """The gate a run was started with, armed again on its panel; None for a run without one
    (or one whose stored outcome no longer names an outcome of its panel: it resumes ungated)."""
    outcome = record.config.get(GATE_KEY)
    if not isinstance(outcome, str) or not is_protocol(record.protocol):
        return None
    try:
        return armed_gate(
            spec(record.protocol), panel, {option.name: outcome for option in spec(record.protocol).options}
        )
    except UserError:
        return None


def imported_origin(reader: TranscriptReader, record: RunRecord) -> str | None:
    """The file `panel history import` brought this run from, or the run it resumes (and so
    on up the chain): its panel is that file's, whoever resumed it since. None for a run made
    here from a panel file someone here ran."""
    seen: set[str] = set()
    current: RunRecord | None = record
    while current is not None and current.id not in seen and len(seen) <= CHAIN_LIMIT:
        if current.imported_from is not None:
            return current.imported_from
        seen.add(current.id)
        current = _stored(reader, current.resumed_from)
    return None


def continuation(record: RunRecord, answered: Mapping[str, Sequence[CallRecord]]) -> Continuation:
    """What a run resuming `record` takes over: its id, its fence tag, and its `answered` calls
    (`TranscriptReader.answered_calls`)."""
    tag = record.config.get(FENCE_TAG_KEY)
    fence = tag if isinstance(tag, str) and re.fullmatch(FENCE_TAG_PATTERN, tag) else None
    stored = record.config.get(TAGS_KEY)
    tags = {k: v for k, v in stored.items() if isinstance(v, str)} if isinstance(stored, dict) else {}
    return Continuation(run_id=record.id, fence_tag=fence, answered=answered, tags=tags)


@dataclass(frozen=True)
class TakenOver:
    """A stopped run of a batch, read back for its question to go on from it: the panel it ran
    (its drawn seeds included, so its prompts come out as before) and what it hands over."""

    panel: Panel
    continuing: Continuation


def take_over(reader: TranscriptReader, run_id: str) -> TakenOver | None:
    """The stopped run `run_id` of a batch, to resume its question from (`panel batch
    --resume`, holding the claim on it). None when it cannot be: another run took it over
    meanwhile, or it ended, or its stored panel cannot be rebuilt (then the question is asked
    afresh, as before resuming reused anything)."""
    record = _stored(reader, run_id)
    if record is None or record.status not in ("interrupted", "failed", "stale"):
        return None
    if imported_origin(reader, record) is not None:
        # Its panel is another file's: asked afresh, the question runs the batch's own panel.
        return None
    try:
        panel = stored_panel(record, reader.short_id(record.id))
    except UserError:
        return None
    return TakenOver(panel=panel, continuing=continuation(record, reader.answered_calls(record.id)))


def answered_count(continuing: Continuation) -> int:
    return sum(len(replies) for replies in continuing.answered.values())


def resume_notice(short: str, protocol: str, continuing: Continuation, changed: Sequence[str]) -> str:
    """What is said before a resumed run's first call. The answered calls are reused only where
    a request comes out as it did; an attached file that changed changes every request, so
    none is, and that is said instead of a count that would not come true."""
    count = answered_count(continuing)
    calls = f"{count} answered call{'' if count == 1 else 's'}"
    if count and changed:
        files = ", ".join(changed)
        noun = "file" if len(changed) == 1 else "files"
        verb = "has" if len(changed) == 1 else "have"
        return (
            f"resuming run {short} ({protocol}): none of its {calls} can be reused, since the attached {noun} {files}"
            f" {verb} changed since the run; every call is made again."
        )
    if not count:
        return f"resuming run {short} ({protocol}): it has no answered call to reuse; every call is made again."
    return (
        f"resuming run {short} ({protocol}): {calls} in the store, each reused where its request comes out as it"
        " did; the rest are made as usual."
    )


def changed_attachments(panel: Panel, fence: str | None, calls: Sequence[CallRecord]) -> list[str]:
    """The attached files whose text is not what the prompts of the run's `calls` carried (each
    prompt holds every attached file, fenced with the run's tag): empty when nothing changed, and when
    it cannot be told (no tag, no call, a prompt the store kept redacted). Raises what reading
    the attachments raises (a file gone or refused), as the run would."""
    if not panel.attach or fence is None:
        return []
    prompts = [
        message["content"]
        for call in calls
        for message in call.messages
        if message.get("role") == "user" and isinstance(message.get("content"), str)
    ]
    if not prompts or any(REDACTED in prompt for prompt in prompts):
        return []
    with fence_tag(fence):
        attachments = read_attachments(panel)
        block = render_attachments(attachments)
        if any(block in prompt for prompt in prompts):
            return []
        # Each file's fenced part alone: `render_labelled` puts its one-line note first.
        parts = {each.path: render_labelled({each.name: each.text}, NOUN).partition("\n\n")[2] for each in attachments}
    changed = [path for path, part in parts.items() if not any(part in prompt for prompt in prompts)]
    return changed or list(parts)


def refuse_taken_over(reader: TranscriptReader, record: RunRecord, short: str, *, force: bool) -> str | None:
    """A run another run took over is resumed again only with `force`, and only when the latest
    run of that chain failed, crashed or is gone: one sentence naming that run otherwise. Returns
    the run that `force` abandons (the latest, None when it is gone)."""
    successor = record.resumed_by
    latest = _stored(reader, successor) if successor is not None else None
    seen = {record.id}
    while latest is not None and latest.status == "resumed" and latest.resumed_by and latest.id not in seen:
        if len(seen) > CHAIN_LIMIT:
            break
        seen.add(latest.id)
        successor = latest.resumed_by
        latest = _stored(reader, successor)
    status = latest.status if latest is not None else None
    if force and status in FORCEABLE:
        return latest.id if latest is not None else None
    named = reader.short_id(record.resumed_by or "")
    last = reader.short_id(latest.id if latest is not None else successor or "")
    taken = f"Run {short} was already resumed, by run {named}"
    if last != named:
        taken += f" (and resumed again since: the latest is run {last})"
    match status:
        case "finished" | "no_answer":
            raise UserError(f"{taken}, which has finished; `panel history show {last}` shows it.")
        case "running":
            raise UserError(f"{taken}, which is still running; let it finish.")
        case "interrupted":
            raise UserError(f"{taken}, which was interrupted; continue that one instead: `panel resume {last}`.")
        case "failed" | "stale" | "damaged":
            ended = {"failed": "failed", "stale": "crashed", "damaged": "is damaged"}[status]
            raise UserError(
                f"{taken}, which {ended}; continue that one (`panel resume {last}`), or give --force to resume {short} again."
            )
        case _:
            raise UserError(f"{taken}, which is no longer stored; give --force to resume {short} again.")


def _stored(reader: TranscriptReader, run_id: str | None) -> RunRecord | None:
    """The run with exactly this id, or None when it is no longer stored."""
    if run_id is None:
        return None
    try:
        record = reader.get_run(run_id)
    except UserError:
        return None
    return record if record.id == run_id else None


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
