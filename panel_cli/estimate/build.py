"""Count, price and add up a run's plan into an `Estimate`, calling no model.

Prompts are counted with litellm's `token_counter` for each member's model, on the messages
the gateway would send (system prompt, attachments and JSON instructions included). Prices,
output limits and context windows come from litellm's table, by the same helpers the spending
cap uses (`panel_cli.llm.budget`), so an estimate's high and a cap's worst case agree. A
member's reply is bounded by its `max_tokens`; unset, by its model's `max_output_tokens` in
the table, else by `budget.FALLBACK_OUTPUT_TOKENS`, and the estimate says which.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from panel_cli.config import Member, Panel
from panel_cli.estimate.models import CallEstimate, Estimate, ModelEstimate, StageEstimate
from panel_cli.events import BaseEvent
from panel_cli.llm.budget import FALLBACK_OUTPUT_TOKENS, Price, known_price, model_info, output_bound, prompt_tokens
from panel_cli.llm.gateway import Gateway, load_litellm, table_price
from panel_cli.protocols.plans import Calls, StagePlan, plan_run
from panel_cli.tools.attachments import read_attachments, render_attachments

PER_MILLION = 1_000_000
BASIS = (
    "Low: the fewest calls (every call succeeds and the run ends as early as it can), each prompt with the texts "
    "it quotes left empty, and no reply counted. High: every call the protocol can make, every quoted text and "
    "every reply at its longest."
)


async def _ignore(event: BaseEvent) -> None:
    """The estimate's gateway builds messages and never calls, so it reports nothing."""


@dataclass(frozen=True)
class ModelFacts:
    """What litellm's table says of a model: its price per token (None: unknown), its entry."""

    price: Price | None
    info: Mapping[str, Any] | None

    @property
    def context(self) -> int | None:
        value = (self.info or {}).get("max_input_tokens")
        return value if isinstance(value, int) and value > 0 else None

    def output_limit(self) -> str:
        """Where a reply's bound comes from when the panel sets no `max_tokens`."""
        for key in ("max_output_tokens", "max_tokens"):
            value = (self.info or {}).get(key)
            if isinstance(value, int) and value > 0:
                return f"{value:,} (litellm's {key})"
        return f"{FALLBACK_OUTPUT_TOKENS:,} (assumed: not in litellm's table)"


class Counter:
    """Counts and prices calls for one panel, each model looked up once."""

    def __init__(self, panel: Panel, litellm: ModuleType, gateway: Gateway) -> None:
        self.panel = panel
        self.litellm = litellm
        self.gateway = gateway
        self._facts: dict[str, ModelFacts] = {}
        # Every member the plan asks, by name: roles and default workers included.
        self.asked: dict[str, Member] = {}

    def facts(self, model: str) -> ModelFacts:
        if model not in self._facts:
            price = known_price(model, lambda name: table_price(self.litellm, name))
            self._facts[model] = ModelFacts(price, model_info(self.litellm, model))
        return self._facts[model]

    def max_tokens(self, member: Member) -> int | None:
        return member.max_tokens or self.panel.defaults.max_tokens

    def bound(self, member: Member) -> int:
        """The longest reply `member` can write, in tokens."""
        return output_bound(self.max_tokens(member), self.facts(member.model).info)

    def uses_tools(self, member: Member) -> bool:
        return bool(member.tools and self.panel.tools and self.panel.defaults.tool_budget)

    def count(self, member: Member, messages: list[dict[str, str]], calls: Calls) -> int:
        full = self.gateway.messages_for(member, messages, calls.schema)
        return prompt_tokens(self.litellm, member.model, full)

    def line(self, calls: Calls) -> CallEstimate:
        member = calls.member
        self.asked[member.name] = member
        facts = self.facts(member.model)
        low = self.count(member, calls.prompt, calls)
        high: int | None = None
        if not (calls.tools and self.uses_tools(member)):
            longest = low if calls.longest is None else self.count(member, calls.longest, calls)
            high = longest + calls.quoted
            if facts.context is not None:
                high = min(high, facts.context)
        output = self.bound(member)
        price = facts.price
        cost_low = 0.0 if calls.low == 0 else None if price is None else calls.low * low * price[0]
        cost_high = None if price is None or high is None else calls.high * (high * price[0] + output * price[1])
        return CallEstimate(
            member=member.name,
            model=member.model,
            calls_low=calls.low,
            calls_high=calls.high,
            prompt_tokens_low=low,
            prompt_tokens_high=high,
            output_tokens_high=output,
            cost_low=cost_low,
            cost_high=cost_high,
        )


def _known(values: Iterable[float | None]) -> tuple[float | None, bool]:
    """The sum of the known values (None when none is), and whether every value was known."""
    given = list(values)
    known = [value for value in given if value is not None]
    return (sum(known) if known else None), len(known) == len(given)


def _stage(plan: StagePlan, lines: list[CallEstimate], price_of: Callable[[str], Price | None]) -> StageEstimate:
    if plan.pooled is None:
        calls_low, calls_high = sum(c.calls_low for c in lines), sum(c.calls_high for c in lines)
        prompt_low = sum(c.calls_low * c.prompt_tokens_low for c in lines)
        highs = [None if c.prompt_tokens_high is None else c.calls_high * c.prompt_tokens_high for c in lines]
        prompt_high = None if None in highs else sum(h for h in highs if h is not None)
        output = sum(c.calls_high * c.output_tokens_high for c in lines)
        cost_low, low_known = _known(c.cost_low for c in lines)
        cost_high, high_known = _known(c.cost_high for c in lines)
    else:
        # The run hands these calls out: at least the fewest, each on the cheapest member; at
        # most all of them, each on the dearest.
        calls_low, calls_high = plan.pooled
        prompt_low = calls_low * min(c.prompt_tokens_low for c in lines)
        peaks = [c.prompt_tokens_high for c in lines]
        prompt_high = None if None in peaks else calls_high * max(p for p in peaks if p is not None)
        output = calls_high * max(c.output_tokens_high for c in lines)
        prices = [price_of(c.model) for c in lines]
        each = [price[0] * c.prompt_tokens_low for c, price in zip(lines, prices, strict=True) if price is not None]
        cost_low = calls_low * min(each) if each else None
        low_known = len(each) == len(lines)
        dearest = [c.cost_high for c in lines if c.cost_high is not None]
        cost_high = max(dearest) if dearest else None
        high_known = len(dearest) == len(lines)
    return StageEstimate(
        stage=plan.name,
        rounds=plan.rounds,
        calls_low=calls_low,
        calls_high=calls_high,
        prompt_tokens_low=prompt_low,
        prompt_tokens_high=prompt_high,
        output_tokens_high=output,
        cost_low=cost_low,
        cost_high=cost_high,
        complete=low_known and high_known,
        calls=lines,
    )


def _models(stages: list[StageEstimate], counter: Counter) -> list[ModelEstimate]:
    """Each model's calls and cost over the run, in the order the run first asks it."""
    lines: dict[str, list[CallEstimate]] = {}
    for stage in stages:
        for line in stage.calls:
            lines.setdefault(line.model, []).append(line)
    models = []
    for model, own in lines.items():
        facts = counter.facts(model)
        price = facts.price
        highs = [line.cost_high for line in own]
        members = [member for member in counter.asked.values() if member.model == model]
        limits = {counter.max_tokens(member) for member in members}
        if None in limits or not limits:
            limit = facts.output_limit()
        else:
            limit = (
                ", ".join(f"{value:,}" for value in sorted(value for value in limits if value is not None))
                + " (max_tokens)"
            )
        models.append(
            ModelEstimate(
                model=model,
                calls_low=sum(line.calls_low for line in own),
                calls_high=sum(line.calls_high for line in own),
                input_per_million=None if price is None else price[0] * PER_MILLION,
                output_per_million=None if price is None else price[1] * PER_MILLION,
                cost_low=None if price is None else sum(line.cost_low or 0.0 for line in own),
                cost_high=None if price is None or None in highs else sum(high for high in highs if high is not None),
                output_limit=limit,
            )
        )
    return models


def _notes(counter: Counter, plan_notes: list[str], models: list[ModelEstimate]) -> list[str]:
    panel = counter.panel
    notes = [BASIS, *plan_notes]
    unset = [model.model for model in models if not model.output_limit.endswith("(max_tokens)")]
    if unset:
        notes.append(
            f"max_tokens is unset for {', '.join(unset)}: a reply is bounded by the model's max_output_tokens in litellm's "
            f"table, or {FALLBACK_OUTPUT_TOKENS:,} where the table has none (the output ≤ column of the model table)."
        )
    if any(member.model.startswith("demo/") for member in counter.asked.values()):
        notes.append("Demo personas are simulated and cost nothing.")
    tooled = [member.name for member in counter.asked.values() if counter.uses_tools(member)]
    if tooled:
        notes.append(
            f"{', '.join(tooled)} may use tools: the tool calls and results their calls add cannot be sized in advance, "
            "so those calls' high is unknown."
        )
    if panel.attach:
        notes.append("The attached files are counted in every prompt that carries them.")
    return notes


def estimate_run(panel: Panel, question: str, prior: Sequence[Mapping[str, Any]] = ()) -> Estimate:
    """The calls, tokens and cost of a run of `panel` on `question`; no model is called.
    `prior`: a follow-up's earlier turns, which every call carries and so every prompt counts."""
    litellm = load_litellm()
    gateway = Gateway(_ignore, defaults=panel.defaults)
    gateway.equip(attachments=render_attachments(read_attachments(panel)))
    gateway.follow(prior)
    counter = Counter(panel, litellm, gateway)
    plan = plan_run(panel, question, counter.bound)
    stages = [
        _stage(stage, [counter.line(calls) for calls in stage.calls], lambda model: counter.facts(model).price)
        for stage in plan.stages
    ]
    models = _models(stages, counter)
    cost_low, low_known = _known(stage.cost_low for stage in stages)
    cost_high, high_known = _known(stage.cost_high for stage in stages)
    highs = [stage.prompt_tokens_high for stage in stages]
    return Estimate(
        protocol=panel.protocol,
        panel=panel.name,
        members=len(panel.members),
        calls_low=sum(stage.calls_low for stage in stages),
        calls_high=sum(stage.calls_high for stage in stages),
        prompt_tokens_low=sum(stage.prompt_tokens_low for stage in stages),
        prompt_tokens_high=None if None in highs else sum(high for high in highs if high is not None),
        output_tokens_high=sum(stage.output_tokens_high for stage in stages),
        cost_low=cost_low,
        cost_high=cost_high,
        complete=low_known and high_known and all(stage.complete for stage in stages),
        unpriced=[model.model for model in models if model.input_per_million is None],
        stages=stages,
        models=models,
        notes=_notes(counter, plan.notes, models),
    )
