"""A call's hold on the run's budget (`panel_cli.llm.budget`): its worst case reserved before
its first request, more reserved before each further request (a tool loop, a structured reply
asked for once more), and settled to what it cost once it ends."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from panel_cli.llm.budget import Budget, Hold, known_price, output_bound, prompt_tokens, worst_case
from panel_cli.llm.errors import Failure
from panel_cli.llm.exchange import Exchange, Reply
from panel_cli.llm.prices import Prices


class CallHolds:
    """The gateway's side of a run's budget; with no budget, every call fits and costs nothing
    to check."""

    def __init__(self, budget: Budget | None, prices: Prices, litellm: Callable[[], ModuleType]) -> None:
        self.budget = budget
        self._prices = prices
        self._litellm = litellm

    def worst_case(self, model: str, request: dict[str, Any]) -> float:
        """The most this request can cost; a model of unknown price counts as free (a capped
        run with one starts only with --allow-unknown-prices)."""
        if self.budget is None or not self.budget.prices_matter:
            return 0.0
        price = known_price(model, self._prices.price)
        if price is None or price == (0.0, 0.0):
            return 0.0
        tokens = prompt_tokens(self._litellm(), model, request["messages"], request.get("tools"))
        return worst_case(tokens, output_bound(request.get("max_tokens"), self._prices.info(model)), price)

    def reserve(self, model: str, request: dict[str, Any]) -> Hold | str | None:
        """The call's reservation, the reason it does not fit, or None when the run has no budget."""
        if self.budget is None:
            return None
        return self.budget.reserve(self.worst_case(model, request))

    def extend(self, exchange: Exchange, model: str, request: dict[str, Any]) -> Reply | None:
        """Before a further request of a call: reserve its worst case too, or the reply that
        ends the call as refused by the budget."""
        if self.budget is None or exchange.hold is None:
            return None
        reason = self.budget.extend(exchange.hold, self.worst_case(model, request))
        return None if reason is None else Reply(failure=Failure(kind="budget", message=f"not made: {reason}"))

    def settle(self, exchange: Exchange, model: str) -> None:
        """Settle the call's hold to what it cost: its price from the counts its provider
        reported, else, when a reply came without counts that can be used, its worst case (what
        it held; 0 for a model of unknown price); a call that got no reply at all cost nothing."""
        hold = exchange.hold
        if hold is None or self.budget is None:
            return
        cost = self._prices.cost(model, *exchange.tokens)
        self.budget.settle(hold, hold.amount if cost is None and exchange.replied else cost)

    @property
    def exhausted(self) -> bool:
        return self.budget is not None and self.budget.exhausted
