"""What a call gives the engine that made it (`CallResult`), and what a reply's text holds when
a structured object was asked for."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from panel_cli.events import ErrorKind, WarningRaised
from panel_cli.llm.structured import parse_structured


class CallResult(BaseModel):
    """What one call produced. `ok` is False when the call itself failed; a reply that is
    not the structured object asked for is still `ok`, with `parse_error` set. `truncated`:
    the reply was longer than `max_response_chars` and `text` is its beginning. `skipped`:
    no request was made because the member failed for good earlier in the run. `reused`: no
    request was made because the run this one resumes got this very request answered. `late`:
    the reply came after the call's race was won (`Gateway.call`'s `race`): not to be used."""

    call_id: str
    member: str
    model: str
    ok: bool
    text: str = ""
    parsed: dict[str, Any] | None = None
    parse_error: str | None = None
    error_kind: ErrorKind | None = None
    error: str | None = None
    truncated: bool = False
    skipped: bool = False
    reused: bool = False
    late: bool = False
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None
    latency: float = 0.0
    attempts: int = 0


def parse_reply(text: str, schema: type[BaseModel] | None) -> tuple[dict[str, Any] | None, str | None]:
    """The structured object a reply holds, or why it holds none; (None, None) without a schema."""
    if schema is None:
        return None, None
    found = parse_structured(text, schema)
    return (found.value.model_dump() if found.value is not None else None), found.problem


def cut_warning(member: str, cap: int) -> WarningRaised:
    """What a run says of a reply cut at `max_response_chars`."""
    return WarningRaised(member=member, message=f"its reply was cut at {cap:,} characters")
