"""What a tool call returns: a run's result, or one sentence saying why there is none.

A run's `structuredContent` is its `--json` result (docs/result.md): the envelope every protocol
shares, then the protocol's own fields. Its text is the final answer and one line saying who
answered, what it cost and which run it was. A run that reaches no answer is a result too, with
`isError` set and the reason; so is every refusal. Nothing a tool returns carries a secret: it
is scrubbed as the CLI scrubs its `--json`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mcp_types as types

from panel_cli.config import Panel
from panel_cli.mcp_server.run import FinishedRun
from panel_cli.redact import redact, redact_obj, secret_values
from panel_cli.runs.outcome import RunEnvelope
from panel_cli.view import fmt
from panel_cli.wording import plural


def envelope_schema() -> dict[str, Any]:
    """The output schema of every protocol tool: the envelope's fields, the protocol's own beside them."""
    return RunEnvelope.model_json_schema()


def refusal(message: str, secrets: Sequence[str] = ()) -> types.CallToolResult:
    """A tool call that started nothing, or a run that ended without a result: one sentence,
    scrubbed of every key the environment holds (an error may quote one)."""
    return types.CallToolResult(content=[_text(redact(message, [*secret_values(), *secrets]))], is_error=True)


def data(payload: dict[str, Any], text: str, secrets: Sequence[str] = ()) -> types.CallToolResult:
    """A result of `list_panels` or `history`: the data, and the same as lines for a person."""
    return types.CallToolResult(
        content=[_text(redact(text, secrets))], structured_content=redact_obj(payload, list(secrets))
    )


def run_result(finished: FinishedRun, panel: Panel, secrets: Sequence[str] = ()) -> types.CallToolResult:
    """A finished run: its answer (or why it has none), who answered, what it cost, its id."""
    hidden = [*finished.secrets, *secrets]
    outcome = finished.outcome
    envelope = outcome.envelope
    footer = answer_line(envelope, panel)
    if outcome.result.reached_answer and outcome.result.final_answer is not None:
        text = f"{outcome.result.final_answer.rstrip()}\n\n{footer}"
    else:
        reason = outcome.result.failure_reason or "the panel reached no answer"
        text = f"No answer: {reason} (run {envelope.run_id}).\n\n{footer}"
    if finished.store_failure is not None:
        text += f"\n\n{finished.store_failure}"
    return types.CallToolResult(
        content=[_text(redact(text, hidden))],
        structured_content=redact_obj(outcome.payload(), hidden),
        is_error=not envelope.reached_answer or finished.store_failure is not None,
    )


def answer_line(envelope: RunEnvelope, panel: Panel) -> str:
    """`— panel demo (confer: sage, skeptic, engineer) · 8 calls · simulated, free · run 3f9a2c1b0d4e`"""
    cost = fmt.basis_cost(envelope.cost, envelope.cost_basis, envelope.unpriced_models)
    members = ", ".join(panel.member_names)
    return (
        f"— panel {panel.name} ({envelope.protocol}: {members}) · {plural(envelope.calls, 'call')} · {cost}"
        f" · run {envelope.run_id}"
    )


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)
