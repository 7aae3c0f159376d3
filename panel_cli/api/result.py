"""What `panel_cli.run` returns: a run's result, typed, the same object `--json` prints."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from panel_cli.runs.outcome import RunEnvelope


class RunResult(RunEnvelope):
    """A run's result (docs/result.md): the envelope every protocol shares, as typed attributes
    (`run_id`, `final_answer`, `reached_answer`, `cost`, `gate`, …), and the protocol's own
    fields in `details` (a vote's `winner` and `vote_counts`, confer's `rounds`, …), beginning
    with `failure_reason`. `to_dict()` is exactly what `panel … --json` prints for the run.
    Every text is scrubbed of the run's secrets, as the command line prints it."""

    details: dict[str, Any] = Field(default_factory=dict)

    @property
    def failure_reason(self) -> str | None:
        """Why the run reached no answer (None with an answer)."""
        reason = self.details.get("failure_reason")
        return reason if isinstance(reason, str) else None

    def to_dict(self) -> dict[str, Any]:
        """The result as `--json` prints it: the envelope, then the protocol's own fields."""
        return {**self.model_dump(mode="json", exclude={"details"}), **self.details}

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> RunResult:
        """A result from its JSON (`--json`, the store's `result_json`)."""
        shared = RunEnvelope.model_fields
        return cls(
            **{key: value for key, value in payload.items() if key in shared},
            details={key: value for key, value in payload.items() if key not in shared},
        )
