"""A reply's token counts as its provider reported them (`panel_cli/llm/usage.py`), by hand."""

from __future__ import annotations

import pytest

from panel_cli.llm.usage import MAX_TOKENS, Usage, reported_usage


@pytest.mark.parametrize(("tokens_in", "tokens_out"), [(10, 20), (0, 0), (MAX_TOKENS, None), (None, None), (None, 5)])
def test_counts_in_range_are_kept(tokens_in, tokens_out):
    assert reported_usage(tokens_in, tokens_out) == Usage(tokens_in, tokens_out)


@pytest.mark.parametrize(
    ("tokens_in", "tokens_out", "named"),
    [
        (10**30, 5, "prompt_tokens a 31-digit number"),
        (-1, 5, "prompt_tokens -1"),
        (5, MAX_TOKENS + 1, "completion_tokens 1000000001"),
        (True, 5, "prompt_tokens True"),
        ("10", 5.0, "prompt_tokens '10', completion_tokens 5.0"),
    ],
)
def test_a_count_outside_its_range_makes_the_usage_unknown(tokens_in, tokens_out, named):
    usage = reported_usage(tokens_in, tokens_out)
    assert (usage.tokens_in, usage.tokens_out) == (None, None)
    assert usage.problem == (
        f"its provider reported usage outside 0 to 1,000,000,000 tokens ({named}); its tokens and cost are unknown"
    )
