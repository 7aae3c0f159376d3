"""An eval of confer whose members answer in turn: herding simulated voters cascade below the
independent line, and every form of the report names the answer order, so a reader sees why."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from panel_cli.config import Panel
from panel_cli.eval.datasets import Dataset, EvalItem
from panel_cli.eval.results import EvalResult
from panel_cli.eval.runner import eval_settings, plan_eval, run_eval
from panel_cli.export.eval_markdown import markdown
from panel_cli.export.eval_page import render_eval_html
from panel_cli.view.eval import facts, render

OPTIONS = ["alpha", "bravo", "charlie", "delta"]
ITEMS = [EvalItem(id=f"q{i}", question=f"Question {i}?", answer=OPTIONS[i % 4], options=OPTIONS) for i in range(40)]
IN_TURN = "answering in turn, each shown the answers before it"


async def evaluated(answer_order: str, knobs: str = "?herd=1") -> EvalResult:
    members = [{"name": f"v{i}", "model": f"demo/oracle@0.7{knobs}"} for i in range(1, 6)]
    panel = Panel.model_validate({"name": "jury", "members": members, "answer_order": answer_order})
    plan = plan_eval(panel, Dataset(source="t", items=ITEMS), protocols="confer", baseline=None, grader=None)
    settings = eval_settings(plan, [])
    return await run_eval(plan, store=None, secrets=[], eval_id="cascade", seed=3, concurrency=4, settings=settings)


def accuracy(result: EvalResult) -> float:
    return next(score.accuracy for score in result.systems if score.system == "confer")


async def test_herders_answering_in_turn_fall_below_parallel_confer_and_the_eval_says_cascade():
    sequential, parallel = await evaluated("sequential"), await evaluated("parallel")
    assert accuracy(sequential) < accuracy(parallel)
    assert sequential.theory["confer"].accuracy == parallel.theory["confer"].accuracy, "the independent line"
    (departure,) = [found for found in sequential.departures if found.system == "confer"]
    assert departure.departs and departure.standard_errors < -2
    assert departure.verdict.endswith("— the cascade.")
    assert f"herd=1 (v1, v2, v3, v4, v5); {IN_TURN})" in departure.verdict
    # Sure herders all follow the first answer: with herding as simulated, the first voter alone.
    assert sequential.theory["confer"].herding == pytest.approx(0.7) and parallel.theory["confer"].herding is None


async def test_every_form_of_the_report_names_confers_answer_order():
    result = await evaluated("sequential")
    order = "sequential (members answer in turn, each shown the answers before it)"
    assert ("confer answer order", order) in facts(result)
    assert json.loads(result.model_dump_json())["settings"]["answer_order"] == "sequential"
    console = Console(width=200, record=True)
    console.print(render(result))
    terminal = console.export_text()
    assert f"confer ({IN_TURN}): 91.0% exactly" in terminal
    assert "With herding as simulated: 70.0% exactly." in terminal
    assert json.loads(result.model_dump_json())["theory"]["confer"]["herding"] == pytest.approx(0.7)
    page = markdown(result)
    assert f"- Confer answer order: {order}" in page and f"confer ({IN_TURN}): 91.0%" in page
    html = render_eval_html(result)
    assert "confer answer order" in html and f"confer ({IN_TURN}): 91.0%" in html
    assert "With herding as simulated: 70.0% exactly." in page and "With herding as simulated: 70.0%" in html

    parallel = await evaluated("parallel", knobs="")
    assert ("confer answer order", "parallel (every member answers at once, alone)") in facts(parallel)
    console = Console(width=200, record=True)
    console.print(render(parallel))
    assert IN_TURN not in console.export_text()
