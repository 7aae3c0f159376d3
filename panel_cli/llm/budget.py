"""The run's spending cap: `--max-cost USD` (or `defaults.max_cost`) and `--max-calls N`.

A cap is only worth having if no call can pass it, and the members of a stage call at once.
So the gateway *reserves* a call's worst case before its request and *settles* it to the
real cost once the reply is in: the reservations of calls in flight count against the cap,
and parallel calls cannot overshoot it together. A call whose worst case does not fit is
not made (the gateway records it with kind `budget`); the protocol then ends with what it
has.

The worst case of a request is its prompt, counted with litellm's `token_counter`, at the
model's input price, plus its output bound at the output price. The output bound is the
request's `max_tokens`; unset, the model's `max_output_tokens` from litellm's table (else
its `max_tokens` there); when litellm knows neither, `FALLBACK_OUTPUT_TOKENS`, so a reply
longer than that could take the spend past the cap by that one call (the spend itself stays
exact: it is settled from the tokens the provider reports). Demo personas are free; a model
with no known price counts as free too, which is why a run with one refuses to start under a
cost cap unless `--allow-unknown-prices` says so.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from panel_cli.config import Member
from panel_cli.models.routes import is_demo
from panel_cli.wording import dollars

# The output bound of a request when neither the panel nor litellm's table gives one:
# OpenAI's long-standing default completion limit.
FALLBACK_OUTPUT_TOKENS = 4096
FREE: tuple[float, float] = (0.0, 0.0)
# Sums of float prices drift by a few ulps; a call that fits to within this fits.
ROUNDING = 1e-12

Price = tuple[float, float]


def worst_case(prompt_tokens: int, output_tokens: int, price: Price) -> float:
    """The most a request can cost: every prompt token at the input price, and the longest
    reply it allows at the output price."""
    return prompt_tokens * price[0] + output_tokens * price[1]


def output_bound(max_tokens: int | None, info: Mapping[str, Any] | None) -> int:
    """The longest reply a request allows: its `max_tokens`, else what litellm's table says
    the model can write, else `FALLBACK_OUTPUT_TOKENS`."""
    if max_tokens is not None:
        return max_tokens
    for key in ("max_output_tokens", "max_tokens"):
        value = (info or {}).get(key)
        if isinstance(value, int) and value > 0:
            return value
    return FALLBACK_OUTPUT_TOKENS


def prompt_tokens(
    litellm: ModuleType, model: str, messages: Sequence[Mapping[str, Any]], tools: Sequence[Any] | None = None
) -> int:
    """A request's prompt as litellm counts it for the model; the tools offered are sent too,
    so their specs are counted as text."""
    counted = int(litellm.token_counter(model=model, messages=list(messages)))
    if tools:
        counted += int(litellm.token_counter(model=model, text=json.dumps(list(tools))))
    return counted


def model_info(litellm: ModuleType, model: str) -> Mapping[str, Any] | None:
    """litellm's table entry for a model, or None when it has none."""
    try:
        return litellm.get_model_info(model)
    except Exception:
        return None


def known_price(model: str, table_price: Callable[[str], Price | None]) -> Price | None:
    """A model's (input, output) price per token: demo personas are free, the rest come from
    litellm's table (`table_price`); None when it has none."""
    return FREE if is_demo(model) else table_price(model)


def unpriced(members: Iterable[Member], table_price: Callable[[str], Price | None]) -> list[Member]:
    """The members whose calls a cost cap cannot bound, each model once per member."""
    return [member for member in members if known_price(member.model, table_price) is None]


ALLOW_ADVICE = "add --allow-unknown-prices to run them as if they were free"


def unpriced_refusal(members: Sequence[Member], cap: str = "--max-cost", advice: str = ALLOW_ADVICE) -> str:
    """The one sentence a run under a cost cap stops with when some member's price is unknown:
    the cap as the person set it (`--max-cost`, `defaults.max_cost`) and what they can do."""
    named = ", ".join(f"'{member.name}' ({member.model})" for member in members)
    noun = "member has" if len(members) == 1 else "members have"
    return f"{cap} cannot bound this run: {len(members)} {noun} no known price ({named}); {advice}."


class BudgetReport(BaseModel):
    """What the result envelope says of a capped run: the caps, what was spent (in US dollars,
    unknown prices counted as free), the calls made, and the calls refused."""

    max_cost: float | None
    max_calls: int | None
    spent: float
    calls: int
    refused: int


@dataclass
class Hold:
    """One call's reservation: what it may still cost, until it is settled."""

    amount: float
    settled: bool = False


class Budget:
    """The spend keeper of one run. `reserve` and `settle` never await, so in one event loop
    a stage's concurrent calls reserve one after another and cannot all fit at once."""

    def __init__(self, max_cost: float | None = None, max_calls: int | None = None) -> None:
        self.max_cost = max_cost
        self.max_calls = max_calls
        self.spent = 0.0
        self.reserved = 0.0
        self.calls = 0
        self.refused = 0

    @property
    def exhausted(self) -> bool:
        """Whether a call of the run has been refused: the protocol should end with what it has."""
        return self.refused > 0

    @property
    def prices_matter(self) -> bool:
        """Whether calls need their worst case worked out (counting a prompt is not free)."""
        return self.max_cost is not None

    def refusal(self, cost: float) -> str | None:
        """Why a call whose worst case is `cost` may not be made now, or None when it fits."""
        if self.max_calls is not None and self.calls >= self.max_calls:
            return f"the run has made its {self.max_calls} call{'s' if self.max_calls != 1 else ''} (--max-calls)"
        return self._over("it", cost)

    def _over(self, what: str, cost: float) -> str | None:
        """Why `cost` more would pass the cost cap, or None when it fits (to a rounding error)."""
        if self.max_cost is None:
            return None
        left = self.max_cost - self.spent - self.reserved
        if cost <= left + ROUNDING:
            return None
        return f"{what} could cost up to {dollars(cost)} and {dollars(max(left, 0.0))} of the ${self.max_cost:g} cap is left"

    def reserve(self, cost: float) -> Hold | str:
        """Hold `cost` against the cap and count the call, or say why it does not fit."""
        reason = self.refusal(cost)
        if reason is not None:
            self.refused += 1
            return reason
        self.calls += 1
        self.reserved += cost
        return Hold(cost)

    def extend(self, hold: Hold, cost: float) -> str | None:
        """Hold `cost` more for a further request of the same call (a tool loop), or say why
        it does not fit; the call is still one call."""
        reason = self._over("its next request", cost)
        if reason is not None:
            self.refused += 1
            return reason
        hold.amount += cost
        self.reserved += cost
        return None

    def settle(self, hold: Hold, cost: float | None) -> None:
        """Replace a call's reservation by what it really cost (None: unknown, counted as free)."""
        if hold.settled:
            return
        hold.settled = True
        self.reserved -= hold.amount
        self.spent += cost or 0.0

    def report(self) -> BudgetReport:
        return BudgetReport(
            max_cost=self.max_cost, max_calls=self.max_calls, spent=self.spent, calls=self.calls, refused=self.refused
        )
