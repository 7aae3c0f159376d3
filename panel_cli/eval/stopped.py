"""How a system asked under a stopping rule did (`stop:`, docs/protocols.md#stopping-early):
its calls per question beside the exact theory's expected calls (`eval.stopping`), and how
often the answers it stopped on before asking everyone were right, against the target of
`stop: confident(x)`. Pure: tested by hand.

Which protocols an eval's systems run with the panel's rule: vote and decide take either rule,
confer and ensemble's `majority` take `decided`; every other system (the baseline, council, a
member alone) asks everyone, as it would anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from panel_cli.config import Panel, StopRule, read_stop
from panel_cli.eval.stats import wilson_interval
from panel_cli.eval.stopping import Stop, StoppingTheory
from panel_cli.protocols.confer.settings import ConferSettings
from panel_cli.protocols.ensemble.settings import EnsembleSettings

if TYPE_CHECKING:
    from panel_cli.eval.results import ItemResult

# The protocols that read each kind of rule.
DECIDED = frozenset({"vote", "decide", "confer", "ensemble"})
CONFIDENT = frozenset({"vote", "decide"})


def stop_for(protocol: str, panel: Panel) -> str | None:
    """The rule a system of `protocol` runs under: the panel's, when the protocol reads it
    (ensemble only in `majority`), else None (it asks everyone)."""
    rule = panel.stop_rule
    if rule is None:
        return None
    if protocol == "ensemble" and EnsembleSettings.of(panel).mode != "majority":
        return None
    readers = CONFIDENT if rule.kind == "confident" else DECIDED
    return str(rule) if protocol in readers else None


def theory_stop(rule: StopRule, protocol: str, panel: Panel) -> Stop:
    """The rule as the theory models the engine: vote in waves (`next_wave`), one at a time
    under `confident` (what the engine does); confer's answers in waves, then its vote rounds:
    one, which moves no simulated voter's answer and so ends the rounds, or every round without
    `until_convergence`."""
    if rule.kind == "confident":
        return Stop("confident", "one at a time", rule.at_least or 0.95)
    if protocol == "confer":
        settings = ConferSettings.of(panel)
        return Stop("decided", "waves", vote_rounds=1 if settings.until_convergence else settings.max_rounds)
    return Stop("decided", "waves")


class StopScore(BaseModel):
    """A system under a stopping rule, measured: calls per question beside the theory's
    expected calls; the questions it stopped on before asking every member (`stopped`: fewer
    calls than members), how many of those it got right, with the Wilson interval; and under
    `confident(x)`, the target x and whether the stopped answers' accuracy reaches it within
    its interval (`holds`: the interval's top is at least x)."""

    rule: str
    questions: int
    calls_per_question: float
    expected_calls: float | None = Field(default=None, description="the exact theory's expected calls per question")
    expected_accuracy: float | None = Field(default=None, description="the theory's accuracy under the rule")
    stopped: int | None = Field(description="questions stopped on before asking everyone; None when calls do not tell")
    stopped_correct: int | None
    stopped_accuracy: float | None
    ci_low: float | None
    ci_high: float | None
    target: float | None = None
    holds: bool | None = None


def stop_score(
    rule: str, protocol: str, members: int, items: Sequence[ItemResult], line: StoppingTheory | None
) -> StopScore:
    """How a system asked under `rule` did, over its graded items. Which runs stopped early is
    read from their calls, fewer than the members, for vote and decide (one call per member
    asked, and decide's leader only after everyone); confer's and ensemble's calls do not tell."""
    counted = protocol in CONFIDENT
    stopped = [item for item in items if counted and item.error is None and item.calls < members]
    right = sum(item.correct for item in stopped)
    low, high = wilson_interval(right, len(stopped)) if stopped else (None, None)
    found = read_stop(rule)
    target = found.at_least if found is not None and found.kind == "confident" else None
    return StopScore(
        rule=rule,
        questions=len(items),
        calls_per_question=sum(item.calls for item in items) / len(items) if items else 0.0,
        expected_calls=line.calls if line is not None else None,
        expected_accuracy=line.accuracy if line is not None else None,
        stopped=len(stopped) if counted else None,
        stopped_correct=right if counted else None,
        stopped_accuracy=right / len(stopped) if stopped else None,
        ci_low=low,
        ci_high=high,
        target=target,
        holds=None if target is None or high is None else high >= target,
    )
