"""The spend keeper's arithmetic (panel_cli.llm.budget): worst cases, reservations, settling."""

from __future__ import annotations

import pytest

from panel_cli.config import Member
from panel_cli.errors import UserError
from panel_cli.llm.budget import (
    FALLBACK_OUTPUT_TOKENS,
    Budget,
    Hold,
    known_price,
    output_bound,
    unpriced,
    unpriced_refusal,
    worst_case,
)
from panel_cli.llm.run_budget import run_budget


def test_worst_case_is_the_prompt_at_the_input_price_plus_the_output_bound_at_the_output_price() -> None:
    assert worst_case(1000, 500, (1e-6, 4e-6)) == pytest.approx(0.001 + 0.002)
    assert worst_case(0, 0, (1.0, 1.0)) == 0.0


def test_output_bound_prefers_max_tokens_then_the_table_then_the_fallback() -> None:
    assert output_bound(256, {"max_output_tokens": 16384}) == 256
    assert output_bound(None, {"max_output_tokens": 16384, "max_tokens": 99}) == 16384
    assert output_bound(None, {"max_output_tokens": None, "max_tokens": 8192}) == 8192
    assert output_bound(None, {}) == FALLBACK_OUTPUT_TOKENS
    assert output_bound(None, None) == FALLBACK_OUTPUT_TOKENS


def test_calls_reserve_in_turn_so_concurrent_calls_cannot_overshoot() -> None:
    budget = Budget(max_cost=0.35)
    holds = [budget.reserve(0.10) for _ in range(4)]
    assert [isinstance(hold, Hold) for hold in holds] == [True, True, True, False]
    assert holds[3] == "it could cost up to $0.1000 and $0.0500 of the $0.35 cap is left"
    assert budget.calls == 3 and budget.refused == 1 and budget.exhausted


def test_settling_frees_the_unused_part_of_a_reservation() -> None:
    budget = Budget(max_cost=0.35)
    first = budget.reserve(0.10)
    assert isinstance(first, Hold)
    budget.settle(first, 0.02)
    budget.settle(first, 0.02)  # settled once only
    assert budget.spent == pytest.approx(0.02) and budget.reserved == pytest.approx(0.0)
    assert all(isinstance(budget.reserve(0.10), Hold) for _ in range(3))
    assert budget.reserve(0.04) == "it could cost up to $0.0400 and $0.0300 of the $0.35 cap is left"


def test_an_unknown_cost_settles_as_free_and_an_exact_fit_fits() -> None:
    budget = Budget(max_cost=0.3)
    hold = budget.reserve(0.1)
    assert isinstance(hold, Hold)
    budget.settle(hold, None)
    assert budget.spent == 0.0
    # 0.1 + 0.2 is 0.30000000000000004 in floats: still a fit.
    assert isinstance(budget.reserve(0.1), Hold) and isinstance(budget.reserve(0.2), Hold)
    assert not budget.exhausted


def test_a_tool_loop_extends_its_reservation_or_is_refused() -> None:
    budget = Budget(max_cost=0.25)
    hold = budget.reserve(0.10)
    assert isinstance(hold, Hold)
    assert budget.extend(hold, 0.10) is None and hold.amount == pytest.approx(0.20)
    assert budget.extend(hold, 0.10) == "its next request could cost up to $0.1000 and $0.0500 of the $0.25 cap is left"
    assert budget.calls == 1
    budget.settle(hold, 0.05)
    assert budget.reserved == pytest.approx(0.0) and budget.spent == pytest.approx(0.05)


def test_max_calls_counts_calls_made_and_in_flight() -> None:
    budget = Budget(max_calls=2)
    assert isinstance(budget.reserve(5.0), Hold) and isinstance(budget.reserve(5.0), Hold)
    assert budget.reserve(0.0) == "the run has made its 2 calls (--max-calls)"
    assert Budget(max_calls=1).refusal(0.0) is None
    assert budget.report().model_dump() == {"max_cost": None, "max_calls": 2, "spent": 0.0, "calls": 2, "refused": 1}


def test_demo_personas_are_free_and_unpriced_models_are_named() -> None:
    table = {"openai/gpt-4o-mini": (1.5e-07, 6e-07)}
    members = [
        Member(name="sage", model="demo/sage"),
        Member(name="mini", model="openai/gpt-4o-mini"),
        Member(name="local", model="openai/my-local", api_base="http://localhost:1"),
    ]
    assert known_price("demo/sage", table.get) == (0.0, 0.0)
    assert [member.name for member in unpriced(members, table.get)] == ["local"]
    assert unpriced_refusal(unpriced(members, table.get)) == (
        "--max-cost cannot bound this run: 1 member has no known price ('local' (openai/my-local)); "
        "add --allow-unknown-prices to run them as if they were free."
    )


def test_run_budget_is_none_without_a_cap_and_refuses_unknown_prices() -> None:
    local = [Member(name="local", model="openai/my-local-model", api_base="http://localhost:1")]
    assert run_budget(local, max_cost=None, max_calls=None, allow_unknown_prices=False) is None
    with pytest.raises(UserError, match="1 member has no known price"):
        run_budget(local, max_cost=1.0, max_calls=None, allow_unknown_prices=False)
    allowed = run_budget(local, max_cost=1.0, max_calls=3, allow_unknown_prices=True)
    assert allowed is not None and (allowed.max_cost, allowed.max_calls) == (1.0, 3)
    assert run_budget(local, max_cost=None, max_calls=3, allow_unknown_prices=False) is not None
