"""One wording of cost and counts on every surface (`panel_cli.view.fmt`): a cost whose priced
part came to nothing is unknown, not `at least $0.0000`; a call the budget refused is told
beside the calls made, not among them; an estimate's tiny low end reads as one figure; a demo
judge's grading and a demo system's cost cell read `simulated, free` and `free`."""

from __future__ import annotations

import asyncio
from io import StringIO
from pathlib import Path

from rich.console import Console

from panel_cli.estimate.models import Estimate, ModelEstimate, StageEstimate
from panel_cli.events import CallFailed, RunFinished
from panel_cli.totals import RunTotals
from panel_cli.view import fmt
from panel_cli.view.estimate import print_estimate
from tests.helpers import cli, cli_ok
from tests.store.sample_runs import answer_calls, record, run_started


def test_a_partial_cost_whose_priced_calls_came_to_nothing_is_unknown() -> None:
    assert fmt.basis_cost(0.0, "partial", ["openai/house-model"]) == "unknown (no price: openai/house-model)"
    assert (
        fmt.basis_cost(0.0123, "partial", ["openai/house-model"]) == "at least $0.0123 (no price: openai/house-model)"
    )
    assert fmt.basis_cost(0.0, "simulated") == "simulated, free"
    assert fmt.basis_cost(0.0, "simulated", compact=True) == "free"


def test_a_refused_call_is_told_beside_the_calls_made() -> None:
    totals = RunTotals(calls=8, answered=7, failed=1, refused=1)
    assert fmt.calls_count(totals.calls, totals.by_status()) == "8 (1 failed) + 1 refused by the budget"
    assert fmt.calls_count(4, RunTotals(calls=4, answered=4).by_status()) == "4"
    resumed = RunTotals(calls=3, reused=2, answered=1, refused=2).by_status()
    assert fmt.calls_count(3, resumed) == "3 (2 reused) + 2 refused by the budget"
    assert fmt.calls_count(1, {"answered": 1}, noun=True) == "1 call"
    assert fmt.calls_count(3, resumed, noun=True) == "3 calls (2 reused) + 2 refused by the budget"


def test_spent_anew_is_said_only_for_a_run_that_reused_calls() -> None:
    fresh = RunTotals(calls=2, answered=2, real_calls=2, tokens=30, cost=0.002)
    assert fmt.spent_anew(fresh) is None
    resumed = RunTotals(calls=3, answered=1, reused=2, real_calls=3, tokens=60, cost=0.006)
    resumed.anew.calls, resumed.anew.tokens, resumed.anew.cost = 1, 20, 0.002
    assert fmt.spent_anew(resumed) == "1 call · 20 tokens · $0.0020"


def test_an_estimates_tiny_low_end_is_one_figure() -> None:
    assert fmt.cost_span(0.000031, 0.1738) == "$0.000031–$0.1738"
    assert fmt.cost_span(0.000031, 0.1738, complete=False) == "at least $0.000031–$0.1738"
    assert fmt.cost_span(0.0012, 0.045) == "$0.0012–$0.0450"
    assert fmt.cost_span(0.0, 0.0) == "free"
    assert fmt.cost_span(None, None) == fmt.UNKNOWN


def test_the_estimate_table_never_stacks_two_bounds() -> None:
    stage = StageEstimate(
        stage="answer",
        rounds=None,
        calls_low=2,
        calls_high=6,
        prompt_tokens_low=40,
        prompt_tokens_high=4000,
        output_tokens_high=1024,
        cost_low=0.000031,
        cost_high=0.1738,
        complete=False,
        calls=[],
    )
    model = ModelEstimate(
        model="openai/gpt-4o-mini",
        calls_low=2,
        calls_high=6,
        input_per_million=0.15,
        output_per_million=0.6,
        cost_low=0.000031,
        cost_high=0.1738,
        output_limit="16,384 (litellm's table)",
    )
    estimate = Estimate(
        protocol="confer",
        panel="p",
        members=2,
        calls_low=2,
        calls_high=6,
        prompt_tokens_low=40,
        prompt_tokens_high=4000,
        output_tokens_high=1024,
        cost_low=0.000031,
        cost_high=0.1738,
        complete=False,
        unpriced=["openai/house-model"],
        stages=[stage],
        models=[model],
    )
    console = Console(file=StringIO(), width=200)
    print_estimate(console, estimate)
    drawn = console.file.getvalue()
    assert "≥ $0.000031–$0.1738" in drawn and "at least $0.000031–$0.1738" in drawn
    assert "≥ <" not in drawn and "<$0.0001–" not in drawn


def test_an_eval_of_demo_personas_with_a_demo_judge_reads_simulated_and_free(tmp_path: Path) -> None:
    outcome = cli(
        "eval",
        "configs/vote.yaml",
        "--dataset",
        "builtin:general",
        "--limit",
        "1",
        "--protocols",
        "vote",
        "--grader",
        "judge:sage",
        "--db",
        str(tmp_path / "runs.db"),
        columns=200,
    )
    assert outcome.exit_code == 0, outcome.output
    grading = next(line for line in outcome.stdout.splitlines() if line.startswith("Grading by judge:sage"))
    assert grading.endswith(" tokens, simulated, free (not counted above).")
    rows = [line for line in outcome.stdout.splitlines() if line.startswith(("baseline (sage) ", "vote "))]
    assert len(rows) == 2 and all(" free " in row and " demo " not in row for row in rows)
    assert "$0.0000" not in outcome.stdout


def test_show_and_the_summary_count_a_refused_call_beside_the_calls_made(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    refused = CallFailed(
        call_id="r-3",
        member="gpt",
        model="openai/gpt-4o",
        stage="vote",
        round=1,
        kind="budget",
        message="the call could cost up to $0.0100 and $0.0010 of the $0.05 cap is left",
        latency=0.0,
    )
    events = [run_started(), *answer_calls("r"), refused, RunFinished(final_answer="PostgreSQL.", result={})]
    asyncio.run(record(db, "r", events))
    shown = cli_ok("history", "show", "r", "--db", str(db))
    assert "Totals    2 calls + 1 refused by the budget · 240 tokens · " in shown
    assert "calls 2 + 1 refused by the budget" in shown and "(budget))" not in shown
