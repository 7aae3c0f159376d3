"""What a call costs: a model's price per token from litellm's table, and the cost of a call
from the tokens its provider reported. A demo persona's calls are simulated: it has no price,
and its calls cost nothing, which the views say rather than show money."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from panel_cli.llm.budget import Price
from panel_cli.models.routes import is_demo


def table_price(litellm: ModuleType, model: str) -> Price | None:
    """A model's (input, output) price per token in litellm's table, under its id or its id
    without the provider; None when the table has no price for it."""
    table = litellm.model_cost
    for key in (model, model.split("/", 1)[-1]):
        info = table.get(key)
        if info and info.get("input_cost_per_token") is not None and info.get("output_cost_per_token") is not None:
            return float(info["input_cost_per_token"]), float(info["output_cost_per_token"])
    return None


class Prices:
    """A run's prices and model-table entries, each model looked up once (`price_of`, `info_of`:
    the lookups in litellm's table, made only when a call needs them)."""

    def __init__(
        self,
        price_of: Callable[[str], Price | None],
        info_of: Callable[[str], Mapping[str, Any] | None],
    ) -> None:
        self._price_of = price_of
        self._info_of = info_of
        self._prices: dict[str, Price | None] = {}
        self._infos: dict[str, Mapping[str, Any] | None] = {}

    def price(self, model: str) -> Price | None:
        """A model's price per token; a demo persona has none."""
        if is_demo(model):
            return None
        if model not in self._prices:
            self._prices[model] = self._price_of(model)
        return self._prices[model]

    def info(self, model: str) -> Mapping[str, Any] | None:
        """litellm's table entry for a model (its output limit)."""
        if model not in self._infos:
            self._infos[model] = self._info_of(model)
        return self._infos[model]

    def cost(self, model: str, tokens_in: int | None, tokens_out: int | None) -> float | None:
        """A call's cost from its provider's counts; a demo persona's is nothing (simulated);
        None when the price or the counts are unknown, never 0."""
        if is_demo(model):
            return 0.0
        price = self.price(model)
        if price is None or tokens_in is None or tokens_out is None:
            return None
        return tokens_in * price[0] + tokens_out * price[1]
