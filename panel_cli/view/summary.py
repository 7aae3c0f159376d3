"""The summary of a run, from totals counted on its events, so a replay sums up exactly like
the live run and like the result envelope."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from panel_cli.totals import RunTotals
from panel_cli.view import fmt
from panel_cli.wording import plural

if TYPE_CHECKING:
    from panel_cli.events import RunFinished


# The run's totals as the result envelope counts them: the views count alike.
ViewTotals = RunTotals


def _confer_fields(result: dict[str, Any]) -> list[tuple[str, str]]:
    """The rules a confer ran by, which decide its winner: how the votes counted, how the
    members answered (a run stored before the result kept its answer order says only the first)."""
    return [(name, str(result[name])) for name in ("tally", "answer_order") if name in result]


def _council_fields(result: dict[str, Any]) -> list[tuple[str, str]]:
    fields: list[tuple[str, str]] = []
    synthesis = result.get("stage3_synthesis")
    if isinstance(synthesis, dict) and synthesis.get("chairman"):
        fields.append(("chairman", str(synthesis["chairman"])))
    if result.get("top_ranked"):
        fields.append(("top ranked", str(result["top_ranked"])))
    return fields


def bias_note(result: dict[str, Any]) -> str | None:
    """council's bias report in words, each count beside what chance alone would give: `bias:
    in 2 of 4 reviews the reviewer ranked its own answer first (chance alone: 1 in 4); in 0 of
    4 reviews the answer shown first was ranked first (chance alone: 1 in 4)`. A reviewer shown n
    answers puts any one of them first by chance 1 time in n; it is shown every answer, or
    every other answer when it does not review its own. None when no review ranked anything."""
    bias = result.get("bias")
    if not isinstance(bias, dict):
        return None
    answers = _count(result.get("successful_responses"))
    shown = answers if result.get("self_review", True) else answers - 1
    parts = []
    own_reviews, ranked_reviews = _count(bias.get("own_reviews")), _count(bias.get("ranked_reviews"))
    if own_reviews:
        parts.append(
            f"in {_count(bias.get('own_first'))} of {plural(own_reviews, 'review')} the reviewer ranked its own "
            f"answer first{_chance(answers)}"
        )
    if ranked_reviews:
        parts.append(
            f"in {_count(bias.get('shown_first'))} of {plural(ranked_reviews, 'review')} the answer shown first "
            f"was ranked first"
            f"{_chance(shown)}"
        )
    return "bias: " + "; ".join(parts) if parts else None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _chance(shown: int) -> str:
    return f" (chance alone: 1 in {shown})" if shown > 1 else ""


def _ensemble_fields(result: dict[str, Any]) -> list[tuple[str, str]]:
    if "mode" not in result:
        return []
    fields = [("mode", str(result["mode"]))]
    if result.get("chosen"):
        fields.append(("chosen", str(result["chosen"])))
    if result.get("reason"):
        fields.append(("why", str(result["reason"])))
    return fields


def _orchestrate_fields(result: dict[str, Any]) -> list[tuple[str, str]]:
    """The summary's orchestrate facts: the plan, how its subtasks ended, who wrote the answer."""
    attempts = result.get("plan_attempts")
    if not isinstance(attempts, list):
        return []
    plan = result.get("plan")
    tried = f" after {len(attempts)} attempts" if len(attempts) > 1 else ""
    fields = [("plan", f"{len(plan)} subtasks{tried}" if isinstance(plan, list) else f"none valid{tried}")]
    if isinstance(plan, list):
        counts = ", ".join(f"{result.get(status, 0)} {status}" for status in ("succeeded", "failed", "skipped"))
        fields.append(("subtasks", counts))
    if result.get("chairman"):
        fields.append(("chairman", str(result["chairman"])))
    return fields


def _delphi_fields(result: dict[str, Any]) -> list[tuple[str, str]]:
    """Who synthesised, and whether the experts stopped changing before the last round."""
    if "experts" not in result or "stopped_early" not in result:
        return []
    fields: list[tuple[str, str]] = []
    synthesis = result.get("synthesis")
    if isinstance(synthesis, dict) and synthesis.get("chairman"):
        fields.append(("chairman", str(synthesis["chairman"])))
    if result.get("stopped_early"):
        fields.append(("stopped early", "yes"))
    return fields


def _supervise_fields(result: dict[str, Any]) -> list[tuple[str, str]]:
    if "loop_end" not in result:
        return []
    fields = [
        ("approved", "yes" if result.get("approved") else "no"),
        ("corrections", str(result.get("correction_rounds", 0))),
    ]
    synthesis = result.get("synthesis")
    if isinstance(synthesis, dict) and synthesis.get("chairman"):
        fields.append(("chairman", str(synthesis["chairman"])))
    return fields


def _vote_fields(result: dict[str, Any]) -> list[tuple[str, str]]:
    """The summary's vote facts (the winner is already there): method, votes, quorum, and
    who abstained, was late or was overridden by the leader."""
    if "vote_counts" not in result:
        return []
    fields: list[tuple[str, str]] = [("method", str(result.get("method")))]
    if result.get("winner") is not None and not result.get("leader_override"):
        fields.append(("votes", f"{result.get('winner_votes')} of {result.get('total_votes')}"))
    fields.append(("quorum", "met" if result.get("quorum_met") else "not met"))
    for key in ("abstained", "late", "failed"):
        if result.get(key):
            fields.append((key, str(len(result[key]))))
    if result.get("leader_override"):
        fields.append(("leader override", str(result.get("leader"))))
    return fields


def confidence_fields(result: dict[str, Any], answer: str | None) -> list[tuple[str, str]]:
    """The answer's confidence, the probability it is right, with what it rests on (`0.962
    (the members' weights, …)`); a result whose protocol reports none says so, and why, when
    it has an answer. (confer's `confidence_score` is another figure, shown under its name.)"""
    fields: list[tuple[str, str]] = []
    if "confidence_basis" in result and answer is not None:
        figure = result.get("confidence")
        basis = str(result.get("confidence_basis") or "")
        if isinstance(figure, int | float) and not isinstance(figure, bool):
            fields.append(("confidence", f"{float(figure):.3f} ({basis})" if basis else f"{float(figure):.3f}"))
        else:
            fields.append(("confidence", f"none ({basis})" if basis else "none"))
    return fields


def stop_fields(result: dict[str, Any]) -> list[tuple[str, str]]:
    """What a stopping rule saved: `decided: 2 calls saved (delta wins whatever …)`."""
    stopping = result.get("stopping")
    if not isinstance(stopping, dict):
        return []
    saved = _count(stopping.get("saved_calls"))
    stages = [stage for stage in stopping.get("stages") or [] if isinstance(stage, dict)]
    why = str(stages[-1].get("reason") or "") if stages else "every member was asked"
    return [("stop", f"{stopping.get('rule')}: {plural(saved, 'call')} saved ({why})")]


def stop_note(event: Any) -> str:
    """An `AskingStopped` in words: `asking stopped (decided): v4, v5 not asked; delta wins …`."""
    names = ", ".join(event.not_asked)
    return f"asking stopped ({event.rule}): {names} not asked; {event.reason}"


def summary_fields(event: RunFinished, totals: ViewTotals | None) -> list[tuple[str, str]]:
    """The summary of a finished run as (name, value) pairs, for the live and the plain view.

    The protocol's own facts come from `event.result`, and only those it has: confer has a
    winner and a confidence, council has neither, and a missing one is simply left out."""
    result = event.result
    fields: list[tuple[str, str]] = []
    if result.get("winner") is not None:
        fields.append(("winner", str(result["winner"])))
    if result.get("confidence_score") is not None:
        fields.append(("confidence score", fmt.percent(float(result["confidence_score"]))))
    if result.get("converged") is not None:
        fields.append(("converged", "yes" if result["converged"] else "no"))
    if isinstance(result.get("rounds"), list):
        fields.append(("rounds", str(len(result["rounds"]))))
    fields += _confer_fields(result)
    fields += _council_fields(result) + _ensemble_fields(result)
    fields += _orchestrate_fields(result)
    fields += _delphi_fields(result) + _supervise_fields(result)
    fields += _vote_fields(result)
    fields += confidence_fields(result, event.final_answer) + stop_fields(result)
    if totals is not None:
        fields.append(("calls", fmt.calls_count(totals.calls, totals.by_status())))
        if totals.skipped:
            fields.append(("skipped", f"{totals.skipped} call{'' if totals.skipped == 1 else 's'}"))
        cost = fmt.basis_cost(totals.run_cost, totals.cost_basis, totals.unpriced)
        fields += [("tokens", fmt.tokens(totals.tokens)), ("cost", cost)]
        if (spent := fmt.spent_anew(totals)) is not None:
            fields.append(("spent anew", spent))
        if totals.wall_time is not None:
            fields.append(("time", f"{totals.wall_time:.1f}s"))
    fields.append(("run", event.run_id or fmt.UNKNOWN))
    return fields
