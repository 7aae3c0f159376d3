"""Each format for each protocol, from runs made with the demo provider.

What each export must show is read from the run's own stored result (`history show --json`),
so the checks follow the run rather than the demo's wording: every round's tally, the
rankings, the runoff, the Delphi rounds, the verdicts, the task graph, the final answer and
one row per call.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from panel_cli.view import fmt
from tests.export.conftest import PROTOCOLS, DemoRuns, export, show_json
from tests.export.dom import Node, parse

Stored = dict[str, Any]


def words(text: str) -> str:
    return " ".join(text.split())


def answer_opening(stored: Stored) -> str:
    """The final answer's first words, which every format shows as they are."""
    return words(stored["final_answer"]).split(". ")[0][:50]


# Markdown ---------------------------------------------------------------------------------------


def md_rows(markdown: str, first_cell: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith(f"| {first_cell}")]


def md_confer(markdown: str, stored: Stored) -> None:
    result = stored["result"]
    assert markdown.count("**Tally**") == len(result["rounds"])
    for entry in result["rounds"]:
        assert f"### Round {entry['index']} · vote" in markdown
        assert f"_winner: {entry['winner']}_" in markdown
        winner_label = entry["winner_label"]
        assert re.search(
            rf"^\| {winner_label} · {entry['winner']} \| `█+` \| {fmt.number(entry['scores'][winner_label])} \| ★ \|$",
            markdown,
            re.M,
        )
    assert f"- **winner:** {result['winner']}" in markdown


def md_council(markdown: str, stored: Stored) -> None:
    result = stored["result"]
    aggregate = markdown[markdown.index("**Aggregate ranking**") :]
    places = [aggregate.index(f"| {entry['label']} · {entry['name']} |") for entry in result["aggregate_ranking"]]
    assert places == sorted(places), "best first"
    assert "| own answer ranked first | `" in markdown and fmt.percent(result["bias"]["own_first_share"]) in markdown
    for review in result["stage2_reviews"]:
        assert ", ".join(review["ranking"]) in markdown


def md_ensemble(markdown: str, stored: Stored) -> None:
    result = stored["result"]
    assert "**Scores**" in markdown
    assert re.search(
        rf"^\| {result['chosen']} \| `█+` \| {fmt.number(result['scores'][result['chosen']])} \| ★ \|$", markdown, re.M
    )


def md_vote(markdown: str, stored: Stored) -> None:
    result = stored["result"]
    assert "**Instant runoff**" in markdown
    assert "| option | " + " | ".join(f"round {entry['index']}" for entry in result["rounds"]) + " |" in markdown
    assert (
        f"**winner: {result['winner']} — {result['winner_votes']} of {result['total_votes']} votes, ranked choice**"
        in markdown
    )
    for ballot in result["ballots"]:
        row = next(line for line in md_rows(markdown, ballot["voter"]) if "answered" in line)
        assert (", ".join(ballot["ranking"]) if len(ballot["ranking"]) > 1 else ballot["choice"]) in row


def md_decide(markdown: str, stored: Stored) -> None:
    result = stored["result"]
    assert result["leader_override"] is True
    assert (
        f"**leader {result['leader']} chose {result['winner']} — the leader's choice decides (leader override)**"
        in markdown
    )
    assert "**no winner: the votes are split" in markdown


def md_delphi(markdown: str, stored: Stored) -> None:
    result = stored["result"]
    assert "| expert | " + " | ".join(f"round {entry['index']}" for entry in result["rounds"]) + " |" in markdown
    for expert in result["experts"]:
        assert re.search(rf"^\| \*\*[A-Z]\*\* {expert} \| first \| changed \|", markdown, re.M)


def md_supervise(markdown: str, stored: Stored) -> None:
    result = stored["result"]
    (rejected,) = result["rounds"][0]["review"]["rejected"]
    assert "| worker | round 1 | round 2 |" in markdown
    assert f"| {rejected} | ✗ rejected | ✓ approved |" in markdown
    assert "**Verdict of reviewer:** REJECTED" in markdown


def md_orchestrate(markdown: str, stored: Stored) -> None:
    result = stored["result"]
    assert f"**Task graph** · planned by {result['planner']} ({len(result['plan'])} subtasks)" in markdown
    for task in result["plan"]:
        assert re.search(
            rf"^\| (    )*(└ )?`{task['task_id']}` \| {task['worker']} \|.*\| succeeded \|", markdown, re.M
        )


MARKDOWN: dict[str, Callable[[str, Stored], None]] = {
    "confer": md_confer,
    "council": md_council,
    "ensemble": md_ensemble,
    "vote": md_vote,
    "decide": md_decide,
    "delphi": md_delphi,
    "supervise": md_supervise,
    "orchestrate": md_orchestrate,
}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_markdown(protocol: str, demo_runs: DemoRuns) -> None:
    run_id = demo_runs.ids[protocol]
    stored = show_json(demo_runs.db, run_id)
    markdown = export(demo_runs.db, run_id, "--format", "md")
    assert markdown.startswith(f"# panel {protocol} · {stored['panel']}\n\n> ")
    assert "## Final answer" in markdown and answer_opening(stored) in words(markdown)
    for member in stored["members"]:
        assert re.search(rf"\| {member['name']} \| `{member['model']}` \|", markdown)
    assert (
        f"- **totals:** {stored['calls']} calls · {fmt.tokens(stored['tokens'])} tokens · simulated, free" in markdown
    )
    calls = [line for line in markdown[markdown.index("## Calls") :].splitlines() if re.match(r"^\| \d+ \|", line)]
    assert len(calls) == len(stored["call_records"]) == stored["calls"]
    MARKDOWN[protocol](markdown, stored)


# HTML -------------------------------------------------------------------------------------------


def html_confer(page: Node, stored: Stored) -> None:
    tallies = page.select("figure.tally")
    assert len(tallies) == len(stored["result"]["rounds"])
    for chart, entry in zip(tallies, stored["result"]["rounds"], strict=True):
        assert len(chart.select("svg.bar")) == len(entry["scores"])
        assert entry["winner"] in chart.one("tr.winner").text


def html_council(page: Node, stored: Stored) -> None:
    result = stored["result"]
    rows = page.one("figure.aggregate").select("tr")
    assert [row.one("th .label").text for row in rows] == [entry["label"] for entry in result["aggregate_ranking"]]
    assert all(entry["name"] in row.text for row, entry in zip(rows, result["aggregate_ranking"], strict=True))
    bias = page.one("figure.bias")
    assert len(bias.select("svg.bar")) == 2 and len(bias.select("line.marker")) == 2
    assert fmt.percent(result["bias"]["own_first_share"]) in bias.text
    assert len(page.select("ol.ranking")) == len(result["stage2_reviews"])


def html_ensemble(page: Node, stored: Stored) -> None:
    chart = page.one("figure.tally")
    assert len(chart.select("svg.bar")) == len(stored["result"]["scores"])
    assert stored["result"]["chosen"] in chart.one("tr.winner").text


def html_vote(page: Node, stored: Stored) -> None:
    result = stored["result"]
    assert result["winner"] in page.one("figure.tally").one("tr.winner").text
    runoff = page.one("figure.runoff")
    assert [cell.text.split(" ·")[0] for cell in runoff.select("thead th")[1:]] == [
        f"round {entry['index']}" for entry in result["rounds"]
    ]
    assert len(runoff.select("td.dropped")) == sum(entry["eliminated"] is not None for entry in result["rounds"])
    assert result["winner"] in page.one("p.outcome-line").text


def html_decide(page: Node, stored: Stored) -> None:
    outcomes = [node.text for node in page.select("p.outcome-line")]
    assert any(text.startswith("no winner:") for text in outcomes)
    assert f"leader {stored['result']['leader']} chose {stored['result']['winner']}" in " ".join(outcomes)


def html_delphi(page: Node, stored: Stored) -> None:
    grid = page.one("figure.delphi")
    assert len(grid.select("tbody tr")) == len(stored["result"]["experts"])
    assert len(grid.select("svg.dot")) == len(stored["result"]["experts"]) * len(stored["result"]["rounds"])


def html_supervise(page: Node, stored: Stored) -> None:
    grid = page.one("figure.verdicts")
    (rejected,) = stored["result"]["rounds"][0]["review"]["rejected"]
    row = next(row for row in grid.select("tbody tr") if row.one("th").text == rejected)
    assert [cell.text.strip() for cell in row.select("td")] == ["✗ rejected", "✓ approved"]
    assert [dot.classes for dot in row.select("svg.dot")] == [{"dot", "rejected"}, {"dot", "approved"}]


def html_orchestrate(page: Node, stored: Stored) -> None:
    plan = stored["result"]["plan"]
    assert sorted(node.text for node in page.select(".tree .task-head code")) == sorted(
        task["task_id"] for task in plan
    )
    assert len(page.select("figure.timeline svg.bar rect.span")) == len(plan)
    nested = [task for task in plan if task["depends_on"]]
    assert len(page.select(".tree ul li")) == len(nested), "a subtask hangs under a dependency"


HTML: dict[str, Callable[[Node, Stored], None]] = {
    "confer": html_confer,
    "council": html_council,
    "ensemble": html_ensemble,
    "vote": html_vote,
    "decide": html_decide,
    "delphi": html_delphi,
    "supervise": html_supervise,
    "orchestrate": html_orchestrate,
}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_html(protocol: str, demo_runs: DemoRuns) -> None:
    run_id = demo_runs.ids[protocol]
    stored = show_json(demo_runs.db, run_id)
    text = export(demo_runs.db, run_id, "--format", "html", "-o", "-")
    page = parse(text)
    assert page.one("h1.question").text == stored["question"]
    assert answer_opening(stored) in words(page.one("#final-answer").text)
    panel = page.one("#panel").text
    assert all(member["name"] in panel and member["model"] in panel for member in stored["members"])
    assert len(page.select("#calls tbody tr")) == len(stored["call_records"]) == stored["calls"]
    assert len(page.select(".stage")) == sum(event["type"] == "stage_started" for event in stored["events"])
    HTML[protocol](page, stored)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_html_is_self_contained(protocol: str, demo_runs: DemoRuns) -> None:
    """Inline CSS and SVG only: no script, no stylesheet or image to fetch, no URL at all."""
    text = export(demo_runs.db, demo_runs.ids[protocol], "-f", "html", "-o", "-")
    page = parse(text)
    assert (
        not page.select("script") and not page.select("link") and not page.select("img") and not page.select("iframe")
    )
    assert not re.search(r"https?:|//[a-z]|url\(|@import|\ssrc=", text, re.I)
    assert page.select("meta")[0].attrs == {"charset": "utf-8"}
    policy = next(node for node in page.select("meta") if node.attrs.get("http-equiv") == "Content-Security-Policy")
    assert policy.attrs["content"].startswith("default-src 'none'")
    assert len(page.select("style")) == 1 and page.select("svg")


# JSON -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_json_is_history_show_json(protocol: str, demo_runs: DemoRuns) -> None:
    """The whole transcript, exactly as `history show --json` gives it: run, events, calls
    with their full requests and responses."""
    import json

    run_id = demo_runs.ids[protocol]
    exported = json.loads(export(demo_runs.db, run_id, "--format", "json"))
    stored = show_json(demo_runs.db, run_id)
    assert exported == stored
    assert exported["run_id"] == run_id and exported["protocol"] == protocol
    assert len(exported["call_records"]) == exported["calls"] > 0
    assert all(call["messages"] and call["messages"][-1]["content"] for call in exported["call_records"])
    assert [event["seq"] for event in exported["events"]] == list(range(1, len(exported["events"]) + 1))
