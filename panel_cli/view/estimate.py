"""The estimate as tables: calls, tokens and cost by stage, then by model, then the notes.

Member and model names are the user's text, so every cell is a `Text`, never markup.
"""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from panel_cli.estimate.models import Estimate
from panel_cli.view import fmt

UNKNOWN = "unknown"


def span(low: int, high: int | None) -> str:
    """`12`, or `12–16`; an unknown high reads `12–unknown`."""
    if high is None:
        return f"{low:,}–{UNKNOWN}"
    return f"{low:,}" if low == high else f"{low:,}–{high:,}"


def cost_span(low: float | None, high: float | None, *, complete: bool = True) -> str:
    """`$0.0012–$0.0450`, as every surface words a cost (`fmt.cost_span`)."""
    return fmt.cost_span(low, high, complete=complete, unknown=UNKNOWN)


def price(value: float | None) -> str:
    return UNKNOWN if value is None else f"${value:,.2f}"


def render_estimate(estimate: Estimate) -> RenderableType:
    """The stage table's rows say `≥` where a member's price is unknown, and its total `at
    least`; the model table gives each output limit as a number, and the notes say where the
    limits that no `max_tokens` sets come from."""
    title = Text(f"Estimate: {estimate.protocol}, panel {estimate.panel}, {estimate.members} members (no model called)")
    stages = Table(show_edge=False)
    rounds = any(stage.rounds for stage in estimate.stages)
    for column in ("stage", "round", "calls", "prompt tokens", "output ≤", "cost"):
        if column != "round" or rounds:
            stages.add_column(column, justify="left" if column in ("stage", "round") else "right", no_wrap=True)

    def row(*cells: Text) -> None:
        stages.add_row(*(cells if rounds else cells[:1] + cells[2:]))

    for stage in estimate.stages:
        cost = cost_span(stage.cost_low, stage.cost_high, complete=stage.complete).replace("at least ", "≥ ")
        row(
            Text(stage.stage),
            Text(stage.rounds or ""),
            Text(span(stage.calls_low, stage.calls_high)),
            Text(span(stage.prompt_tokens_low, stage.prompt_tokens_high)),
            Text(f"{stage.output_tokens_high:,}"),
            Text(cost),
        )
    stages.add_section()
    row(
        Text("total", style="bold"),
        Text(""),
        Text(span(estimate.calls_low, estimate.calls_high)),
        Text(span(estimate.prompt_tokens_low, estimate.prompt_tokens_high)),
        Text(f"{estimate.output_tokens_high:,}"),
        Text(cost_span(estimate.cost_low, estimate.cost_high, complete=estimate.complete), style="bold"),
    )
    models = Table(show_edge=False)
    for column in ("model", "calls", "$/M in / out", "cost", "output ≤"):
        models.add_column(column, justify="left" if column == "model" else "right", no_wrap=True)
    for model in estimate.models:
        models.add_row(
            Text(model.model),
            Text(span(model.calls_low, model.calls_high)),
            Text(f"{price(model.input_per_million)} / {price(model.output_per_million)}"),
            Text(cost_span(model.cost_low, model.cost_high)),
            Text(model.output_limit.split(" (")[0]),
        )
    parts: list[RenderableType] = [title, stages, Text(""), models, Text("")]
    if estimate.unpriced:
        parts.append(
            Text(f"No price in litellm's table for {', '.join(estimate.unpriced)}: the total leaves them out.")
        )
    parts += [Text(f"- {note}", style="dim") for note in estimate.notes]
    return Group(*parts)


def print_estimate(console: Console, estimate: Estimate) -> None:
    console.print(render_estimate(estimate))
