"""The budget a run starts with: its caps, checked against litellm's prices before the first
call. Apart from `budget`, whose arithmetic the gateway keeps during the run, since this
check loads litellm's table through the gateway (`load_litellm`) and the gateway imports
`budget`: one direction, no circle."""

from __future__ import annotations

from collections.abc import Sequence

from panel_cli.config import Member
from panel_cli.errors import BudgetError
from panel_cli.llm.budget import ALLOW_ADVICE, Budget, unpriced, unpriced_refusal
from panel_cli.models.routes import needs_litellm


def run_budget(
    members: Sequence[Member],
    *,
    max_cost: float | None,
    max_calls: int | None,
    allow_unknown_prices: bool,
    cap: str = "--max-cost",
    advice: str = ALLOW_ADVICE,
) -> Budget | None:
    """The budget a run starts with, or None when it has no cap. Under a cost cap, a member
    whose price litellm does not know stops the run before it starts (BudgetError, exit 2,
    naming the `cap` and giving the `advice`), unless `allow_unknown_prices`: its calls then
    count as free. Prices come from litellm's table, imported here unless every member is a
    demo persona (free, and priced without it)."""
    if max_cost is None and max_calls is None:
        return None
    if max_cost is not None and not allow_unknown_prices and needs_litellm(members):
        from panel_cli.llm import gateway

        litellm = gateway.load_litellm()
        missing = unpriced(members, lambda model: gateway.table_price(litellm, model))
        if missing:
            raise BudgetError(unpriced_refusal(missing, cap, advice))
    return Budget(max_cost=max_cost, max_calls=max_calls)
