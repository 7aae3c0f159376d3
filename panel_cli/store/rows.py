"""How an event and the row that records the same facts share them, so neither is stored twice.

A call's events, a run's start and end and a decision each have a row (`calls`, `runs`,
`decisions`) holding the same fields. The row names the event it records (its `seq`
column: `calls.seq` and `calls.started_seq`, `runs.started_seq` and `runs.ended_seq`,
`decisions.seq`), and that event keeps only what its row does not give back exactly: usually
nothing, so its `payload_json` is NULL. Any other event keeps its whole payload.

The writer checks each field against the row as stored before leaving it out, so a field an
engine adds later, or a value the row cannot hold exactly, stays in the event.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from panel_cli.run_keys import BATCH_TAG, PARENT_ID_KEY, RESUMED_FROM_KEY, TAGS_KEY
from panel_cli.store.row_like import RowLike
from panel_cli.store.texts import TextLookup, decode, dumps
from panel_cli.store.times import optional_epoch

ABSENT = "$absent"  # the fields a row gives that this event did not have

# The fields of each event type in the order the event model declares them, and which of
# them the claiming row gives back.
FIELD_ORDER: dict[str, tuple[str, ...]] = {
    "run_started": ("protocol", "panel", "question", "members", "config"),
    "call_started": ("call_id", "member", "model", "stage", "round", "about"),
    "call_finished": (
        "call_id",
        "member",
        "model",
        "stage",
        "round",
        "about",
        "text",
        "truncated",
        "request_hash",
        "reused",
        "late",
        "tokens_in",
        "tokens_out",
        "cost",
        "latency",
        "attempts",
    ),
    "call_failed": (
        "call_id",
        "member",
        "model",
        "stage",
        "round",
        "about",
        "kind",
        "message",
        "detail",
        "latency",
        "attempts",
    ),
    "run_finished": ("final_answer", "reached_answer", "result"),
    "run_failed": ("message",),
    "decision_recorded": (
        "topic",
        "winner",
        "vote_counts",
        "method",
        "total_votes",
        "ballots_cast",
        "leader",
        "leader_override",
        "consensus_reached",
    ),
}
DERIVED: dict[str, frozenset[str]] = {
    **{kind: frozenset(fields) for kind, fields in FIELD_ORDER.items()},
    "run_started": frozenset({"protocol", "panel", "question", "config"}),
}
ENVELOPE = ("run_id", "seq", "ts", "type")
# A run's batch id (`panel batch`) and the run a follow-up continues, kept in RunStarted's
# config (`panel_cli.run_keys`), also go to columns of their own (`runs.batch_id`,
# `runs.parent_id`), to find a batch's runs and walk a thread.


def run_fields(row: RowLike, texts: TextLookup, kind: str) -> dict[str, Any]:
    """The fields a run row gives to its `run_started`, `run_finished` or `run_failed` event."""
    if kind == "run_started":
        config = texts.optional(row["config_text"])
        return {
            "protocol": row["protocol"],
            "panel": row["panel"],
            "question": texts.optional(row["question_text"]),
            "config": json.loads(config) if config is not None else None,
        }
    if kind == "run_finished":
        return {
            "final_answer": texts.optional(row["final_answer_text"]),
            "reached_answer": row["status"] == "finished",
            "result": decode(json.loads(row["result_json"]), texts) if row["result_json"] is not None else None,
        }
    return {"message": row["error"]}


def batch_of(config: Any) -> str | None:
    """The batch a run belongs to, from the tags in its config; None for a run of no batch."""
    tags = config.get(TAGS_KEY) if isinstance(config, dict) else None
    batch = tags.get(BATCH_TAG) if isinstance(tags, dict) else None
    return batch if isinstance(batch, str) else None


def parent_of(config: Any) -> str | None:
    """The run a follow-up continues, from its config; None for a run that continues none."""
    parent = config.get(PARENT_ID_KEY) if isinstance(config, dict) else None
    return parent if isinstance(parent, str) else None


def resumed_source(config: Any) -> str | None:
    """The run a resumed run takes over, from its config; None for a run that resumes none."""
    source = config.get(RESUMED_FROM_KEY) if isinstance(config, dict) else None
    return source if isinstance(source, str) else None


def call_fields(row: RowLike, texts: TextLookup) -> dict[str, Any]:
    """Every field a call row gives to the events of its call. `late` only when the row says:
    a call stored before migration 10 has none, and its event is read back as it was."""
    fields = {
        "call_id": row["id"],
        "member": row["member"],
        "model": row["model"],
        "stage": row["stage"],
        "round": row["round"],
        "about": row["about"],
        "text": texts.optional(row["response_text"]),
        "truncated": None if row["truncated"] is None else bool(row["truncated"]),
        "request_hash": row["request_hash"],
        "reused": None if row["reused"] is None else bool(row["reused"]),
        "tokens_in": row["tokens_in"],
        "tokens_out": row["tokens_out"],
        "cost": row["cost"],
        "latency": row["latency"],
        "attempts": row["attempts"],
        "kind": row["error_kind"],
        "message": row["error"],
        "detail": row["detail"],
    }
    if row["late"] is not None:
        fields["late"] = bool(row["late"])
    return fields


def decision_fields(row: RowLike) -> dict[str, Any]:
    return {
        "topic": row["topic"],
        "winner": row["winner"],
        "vote_counts": json.loads(row["vote_counts_json"]) if row["vote_counts_json"] is not None else None,
        "method": row["method"],
        "total_votes": row["total_votes"],
        "ballots_cast": row["ballots_cast"],
        "leader": row["leader"],
        "leader_override": None if row["leader_override"] is None else bool(row["leader_override"]),
        "consensus_reached": None if row["consensus_reached"] is None else bool(row["consensus_reached"]),
    }


def same(a: Any, b: Any) -> bool:
    """Equal and of the same JSON types, in the same order: `1` is not `1.0` nor `True`.
    Texts and whole numbers of one type are compared as they are (the store asks this of every
    field of every event, and a prompt's JSON is long); anything else by its JSON."""
    if a is b:
        return True
    if type(a) is type(b) and type(a) in _PLAIN:
        return bool(a == b)
    return dumps(a) == dumps(b)


# JSON types whose equality in Python is their JSON's (a float is not: NaN is not NaN).
_PLAIN = (str, int, bool, type(None))


def leftover(
    payload: Mapping[str, Any], columns: Mapping[str, Any], given: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """What the `payload_json` of an event keeps: the payload less its envelope (the event
    row's own `columns`) and less what the row claiming it gives back (`given`, None for an
    event no row claims). A field the event did not have is listed under `$absent`, so that
    reading it back does not add it."""
    kind = columns["type"]
    derived = DERIVED.get(kind, frozenset()) if given is not None else frozenset()
    kept: dict[str, Any] = {}
    absent = [key for key in ENVELOPE if key not in payload]
    for key, value in payload.items():
        if key in ENVELOPE:
            if not same(value, columns[key]):
                kept[key] = value
        elif key not in derived or given is None or key not in given or not same(value, given[key]):
            kept[key] = value
    absent += [
        key for key in FIELD_ORDER.get(kind, ()) if key in derived and key not in payload and key in (given or {})
    ]
    if absent:
        kept[ABSENT] = absent
    return kept


def restore(
    columns: Mapping[str, Any], kept: Mapping[str, Any], given: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The inverse of `leftover`: the payload as the bus emitted it, its envelope first and
    then its fields in the event model's order."""
    kind = columns["type"]
    absent = set(kept.get(ABSENT, ()))
    payload = {key: kept.get(key, columns[key]) for key in ENVELOPE if key not in absent}
    if given is not None:
        for key in FIELD_ORDER.get(kind, ()):
            if key in kept:
                payload[key] = kept[key]
            elif key in DERIVED[kind] and key not in absent and key in given:
                payload[key] = given[key]
    payload.update((key, value) for key, value in kept.items() if key not in payload and key != ABSENT)
    return payload


def envelope(row: RowLike, run_id: str) -> dict[str, Any]:
    """An event row's own columns, as the payload names them."""
    return {"run_id": run_id, "seq": row["seq"], "ts": optional_epoch(row["ts"]), "type": row["type"]}
