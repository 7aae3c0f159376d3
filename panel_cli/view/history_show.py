"""`panel history show`: a stored run drawn once, as it was drawn live, then every reply whole.

The header, the run's thread, every stage as the protocol's own tables, the final answer and
its summary (as the live view drew them), then each member's reply in full (a table cell
shows only its first words), then a row per call. On a terminal a long reply is folded to its
first lines unless `--full`; off a terminal every reply is printed whole.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.padding import Padding
from rich.text import Text

from panel_cli.store.records import CallRecord, RunRecord
from panel_cli.untrusted import without_controls
from panel_cli.view import fmt
from panel_cli.view import history as view

# A folded reply shows this many lines (as written, before wrapping) and says how many more.
FOLD_LINES = 12
INDENT = 2


def show(
    console: Console,
    run: RunRecord,
    calls: Sequence[CallRecord],
    payloads: Sequence[dict[str, Any]],
    short_ids: Mapping[str, str],
    *,
    fold: bool = True,
) -> None:
    """The run as the protocol's tables, then every reply whole (folded on a terminal if `fold`)."""
    from panel_cli.view.history_stages import draw_stages

    _head(console, run, short_ids)
    draw_stages(console, payloads, stopped=run.status != "running")
    _tail(console, run, calls, fold=fold and console.is_terminal)


def show_plain(
    console: Console,
    run: RunRecord,
    calls: Sequence[CallRecord],
    payloads: Sequence[dict[str, Any]],
    short_ids: Mapping[str, str],
) -> None:
    """The run as the plain lines a run off a terminal writes, then every reply whole."""
    from panel_cli.view.replay import draw_plain, stored_events

    _head(console, run, short_ids)
    draw_plain(console.file, stored_events(payloads))
    view.print_plain_answer(console, list(payloads))
    _tail(console, run, calls, fold=False)


def _head(console: Console, run: RunRecord, short_ids: Mapping[str, str]) -> None:
    console.print(view.run_header(run))
    console.print()
    if run.parent_id is not None or run.thread.follow_ups:
        console.print(view.thread_table(run, short_ids, expand=view.table_width(console) is not None))
        console.print()


def _tail(console: Console, run: RunRecord, calls: Sequence[CallRecord], *, fold: bool) -> None:
    if run.status in ("running", "stale"):
        console.print(view.unfinished(run))
    answered = in_member_order(run, [call for call in calls if call.response])
    if answered:
        console.print()
        console.print(Text("Replies", style="bold"))
        for call in answered:
            print_reply(console, call, fold=fold)
    if calls:
        console.print()
        console.print(view.calls_table(list(calls)))


def in_member_order(run: RunRecord, calls: Sequence[CallRecord]) -> list[CallRecord]:
    """The calls stage by stage, as the stages came, and within a stage in member order (then
    the member each call was about, in member order too), as the stage's table lists them,
    rather than in the order the replies happened to finish. A member the run did not list
    (an inline chairman, a critic) comes after those it did, in the order its calls came."""
    stages: dict[tuple[int | None, str], int] = {}
    for call in calls:
        stages.setdefault((call.round, call.stage), len(stages))
    place = {member.name: index for index, member in enumerate(run.members)}
    last = len(place)

    def key(indexed: tuple[int, CallRecord]) -> tuple[int, int, int, int]:
        order, call = indexed
        about = place.get(call.about, last) if call.about is not None else -1
        return (stages[(call.round, call.stage)], place.get(call.member, last), about, order)

    return [call for _, call in sorted(enumerate(calls), key=key)]


def reply_heading(call: CallRecord) -> Text:
    """`round 1 · vote · sage (openai/gpt-4o)`: where the reply belongs and whose it is."""
    where = call.stage if call.round is None else f"round {call.round} · {call.stage}"
    heading = Text.assemble((f"{where} · ", "dim"), (fmt.who(call.member, call.about), "bold"))
    heading.append(f" ({call.model})", style="dim")
    if call.truncated:
        heading.append(" reply truncated", style="yellow")
    return heading


def print_reply(console: Console, call: CallRecord, *, fold: bool) -> None:
    """A member's reply as written, indented under its heading; folded to FOLD_LINES lines
    when `fold`, with how many more there are."""
    text = without_controls(call.response or "").rstrip()
    lines = text.splitlines()
    console.print()
    console.print(reply_heading(call))
    if fold and len(lines) > FOLD_LINES:
        shown = "\n".join(lines[:FOLD_LINES])
        more = len(lines) - FOLD_LINES
        console.print(Padding(Text(shown), (0, 0, 0, INDENT), expand=False))
        console.print(
            Padding(
                Text(f"… {more} more line{'' if more == 1 else 's'} (--full shows them)", style="dim"),
                (0, 0, 0, INDENT),
                expand=False,
            )
        )
    else:
        console.print(Padding(Text(text), (0, 0, 0, INDENT), expand=False))
