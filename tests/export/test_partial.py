"""Runs that did not finish export too: an interrupted council (a member timed out, one never
answered), a run that crashed mid-stage (no ending at all), a run that failed before any call.
Everything is built from the events that were stored, as the live view would have drawn them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from panel_cli.events import (
    BaseEvent,
    CallFailed,
    CallFinished,
    CallStarted,
    EventBus,
    MemberInfo,
    RunFailed,
    RunInterrupted,
    RunStarted,
    StageStarted,
    WarningRaised,
)
from panel_cli.store.subscriber import TranscriptStore
from tests.export.conftest import HostileRuns, export
from tests.export.dom import parse

MEMBERS = [
    MemberInfo(name="ann", model="openai/gpt-4o"),
    MemberInfo(name="bob", model="anthropic/claude"),
    MemberInfo(name="cy", model="ollama/llama3.1"),
]


async def record(path: Path, run_id: str, events: list[BaseEvent]) -> None:
    async with await TranscriptStore.open(path) as store:
        bus = EventBus(run_id, [store])
        for event in events:
            await bus.emit(event)


def started(protocol: str = "council") -> RunStarted:
    return RunStarted(
        protocol=protocol, panel="auth", question="How should we do auth?", members=MEMBERS, config={"chairman": "ann"}
    )


def answers(run_id: str) -> list[BaseEvent]:
    return [
        StageStarted(stage="answer", members=["ann", "bob", "cy"]),
        CallStarted(call_id=f"{run_id}-c1", member="ann", model="openai/gpt-4o", stage="answer"),
        CallStarted(call_id=f"{run_id}-c2", member="bob", model="anthropic/claude", stage="answer"),
        CallFinished(
            call_id=f"{run_id}-c1",
            member="ann",
            model="openai/gpt-4o",
            stage="answer",
            text="Use **OIDC** with short sessions.",
            messages=[{"role": "user", "content": "How should we do auth?"}],
            tokens_in=50,
            tokens_out=20,
            cost=0.0012,
            latency=1.2,
        ),
        CallFailed(
            call_id=f"{run_id}-c2",
            member="bob",
            model="anthropic/claude",
            stage="answer",
            kind="timeout",
            message="timed out after 120s",
            detail="raw provider text",
            latency=120.0,
        ),
        WarningRaised(message="no answer within 120s", member="bob"),
    ]


@pytest.fixture
async def db(tmp_path: Path) -> Path:
    path = tmp_path / "runs.db"
    await record(path, "interrupted-1", [started(), *answers("interrupted-1"), RunInterrupted()])
    await record(path, "crashed-2", [started(), *answers("crashed-2")])
    await record(
        path,
        "failed-3",
        [
            started("orchestrate"),
            StageStarted(stage="plan", round=1, members=["ann"]),
            RunFailed(message="Plan rejected 3 times: a cycle."),
        ],
    )
    return path


def test_an_interrupted_run_exports_what_happened(db: Path) -> None:
    page = parse(export(db, "interrupted-1", "-f", "html", "-o", "-"))
    assert page.one(".masthead .badge").text == "interrupted"
    assert page.one("#final-answer h2").text == "No answer was reached"
    rows = page.one("#stage-1").select("tbody tr")
    assert [[cell.text.strip() for cell in row.select("td")][:2] for row in rows] == [
        ["ann", "answered"],
        ["bob", "timed out"],
        ["cy", "waiting"],
    ]
    assert "timeout: timed out after 120s" in rows[1].text and "raw provider text" not in page.text
    assert [row.one("td.note").text for row in page.select("#calls tbody tr")] == ["", "timeout: timed out after 120s"]
    assert [node.text for node in page.select(".warnings li")] == ["⚠ bob: no answer within 120s"]
    markdown = export(db, "interrupted-1", "-f", "md")
    assert "- **status:** interrupted" in markdown and "_No answer was reached._" in markdown
    assert "| bob | timed out | timeout: timed out after 120s | 120.00s |  |" in markdown
    assert (
        "| 2 | bob | `anthropic/claude` | answer |  | 120.00s | — | — | — | timeout: timed out after 120s |" in markdown
    )


def test_a_crashed_run_exports_as_still_running(db: Path) -> None:
    markdown = export(db, "crashed-2", "-f", "md")
    assert "· not finished" in markdown and "## Final answer\n\n_No answer was reached._" in markdown
    page = parse(export(db, "crashed-2", "-f", "html", "-o", "-"))
    assert page.one(".masthead .badge").text in ("running", "stale")
    assert "not finished" in page.one(".masthead").text
    assert json.loads(export(db, "crashed-2", "-f", "json"))["finished_at"] is None


def test_a_run_that_failed_before_any_call(db: Path) -> None:
    page = parse(export(db, "failed-3", "-f", "html", "-o", "-"))
    assert page.one("#final-answer p").text == "Plan rejected 3 times: a cycle."
    assert page.one("#calls p").text == "No model was called."
    assert page.one("#outcome").text.startswith("Outcome") and "Plan rejected 3 times" in page.one("#outcome").text
    assert "_No model was called._" in export(db, "failed-3", "-f", "md")


def test_failed_members_and_fallback_votes(hostile_runs: HostileRuns) -> None:
    """A confer run where m1 was refused (then skipped) and no vote was structured."""
    markdown = export(hostile_runs.db, hostile_runs.ids["confer"], "-f", "md")
    vote_round = markdown[markdown.index("### Round 1 · vote") : markdown.index("## Calls")]
    assert re.search(r"^\| \*\*A\*\* m0 \| answered \| A · m0 \(kept own\) \| 50 \|", vote_round, re.M)
    assert re.search(r"^\| m1 \| skipped \| ", vote_round, re.M)
    assert re.search(r"^\| m1 \| failed \| auth: ", markdown, re.M)
    assert "> ⚠ m1: failed for good (auth: the provider rejected the key (401)" in markdown
    assert "> ⚠ every vote in round 1 was a fallback" in vote_round and "- **warnings:** 4" in markdown
    page = parse(export(hostile_runs.db, hostile_runs.ids["confer"], "-f", "html", "-o", "-"))
    statuses = [badge.text for badge in page.select(".stage-table .badge")]
    assert statuses.count("failed") == 1 and statuses.count("skipped") == 1
    assert [node.text for node in page.select("#stage-2 td .how")] == ["kept own", "kept own"]
    assert len(page.select("#stage-1 .warnings li")) == 1 and len(page.select("#stage-2 .warnings li")) == 3
    assert not page.select("#warnings"), "each warning is shown once, in its stage"
