"""An estimate as `panel estimate --json` prints it and the table shows it.

Every figure is a range, low to high (`panel_cli.protocols.plans` says what each end
assumes). Costs are US dollars. A cost is None when it cannot be known: the model has no
price in litellm's table, or a member may use tools, whose results nobody can size in
advance. A sum over parts some of which are unknown keeps the known parts and says it is
incomplete (`complete: false`): the real figure is then at least that.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class CallEstimate(BaseModel):
    """One member's calls in one stage. Tokens are per call: the prompt as counted (quoted
    texts empty) and at its longest, and the longest reply."""

    member: str
    model: str
    calls_low: int
    calls_high: int
    prompt_tokens_low: int
    prompt_tokens_high: int | None
    output_tokens_high: int
    cost_low: float | None
    cost_high: float | None


class StageEstimate(BaseModel):
    """A stage's calls in all; tokens and costs summed over its calls."""

    stage: str
    rounds: str | None
    calls_low: int
    calls_high: int
    prompt_tokens_low: int
    prompt_tokens_high: int | None
    output_tokens_high: int
    cost_low: float | None
    cost_high: float | None
    complete: bool
    calls: list[CallEstimate]


class ModelEstimate(BaseModel):
    """What a model is asked over the run, and its price per million tokens as litellm's table
    gives it (None: unknown). `output_limit`: where its replies' bound comes from."""

    model: str
    calls_low: int
    calls_high: int
    input_per_million: float | None
    output_per_million: float | None
    cost_low: float | None
    cost_high: float | None
    output_limit: str


class Estimate(BaseModel):
    """The whole run. `cost_low` and `cost_high` sum what is known; with `complete` false
    some part is unknown (`unpriced` names the models without a price), so the run costs at
    least that. No model was called to make it."""

    protocol: str
    panel: str
    members: int
    calls_low: int
    calls_high: int
    prompt_tokens_low: int
    prompt_tokens_high: int | None
    output_tokens_high: int
    cost_low: float | None
    cost_high: float | None
    complete: bool
    unpriced: list[str]
    stages: list[StageEstimate]
    models: list[ModelEstimate]
    notes: list[str] = Field(default_factory=list)
