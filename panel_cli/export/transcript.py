"""A stored run read back whole, with every secret the environment knows scrubbed once more.

The store already redacts what it writes; scrubbing again at export costs nothing and covers a
run written by an older panel or with a key set since, because an export is made to leave
the machine. Every text is cleaned once more too (`clean_strings`): a run stored before
terminal controls were taken out on the way in is exported without them."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from pydantic import BaseModel

from panel_cli.redact import redact_obj, secret_values
from panel_cli.store.reader import TranscriptReader
from panel_cli.store.records import CallRecord, RunRecord
from panel_cli.untrusted import clean_strings


class Transcript(BaseModel):
    run: RunRecord
    events: list[dict[str, Any]]
    calls: list[CallRecord]

    @classmethod
    def load(cls, reader: TranscriptReader, id_or_prefix: str) -> Transcript:
        run = reader.get_run(id_or_prefix)
        raw = {
            "run": asdict(run),
            "events": reader.run_events(run.id),
            "calls": [asdict(call) for call in reader.run_calls(run.id)],
        }
        return cls.model_validate(clean_strings(redact_obj(raw, secret_values())))
