"""Counting ballots (docs/protocols.md#vote-and-decide): seven methods, the quorum, and a real instant runoff.

Pure functions with no I/O and no model, so the rules are tested by hand and by property,
and a vote counted live, recounted by `panel history retally` or counted in a test gives
the same result. Nothing here imports the event models or the model gateway: `panel
history` recounts a stored vote from its stored events alone, without loading either.

Two families of rules. `majority`, `supermajority`, `unanimous` and `weighted` need an
option to clear a share (more than half of the votes, more than the threshold, all of them,
more than half of the total weight: seed 001's rules). `plurality` and `weighted_plurality`
need only the most votes, or the most weight: the rule that reaches the Nitzan–Paroush
optimum when each voter's weight is log((K−1)p/(1−p)). Under those two a tie at the top is
no winner, unless `tie_break` says otherwise: `first` gives it to the tied option listed
first; `leader` (a decision's) leaves it to the leader, as when no option wins; `none`
leaves it undecided.

Abstentions are reported apart in every method: a ballot that names no option counts
towards the quorum (the voter took part) but not among the votes an option needs a share
of. A late ballot counts nowhere.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field, ValidationError

# The methods, the tie rules and their families live apart, so a view and the panel's settings
# read them without these models; named here too.
from panel_cli.protocols.vote.methods import METHODS as METHODS
from panel_cli.protocols.vote.methods import PLURALITY_METHODS
from panel_cli.protocols.vote.methods import TIE_BREAKS as TIE_BREAKS
from panel_cli.protocols.vote.methods import WEIGHTED_METHODS as WEIGHTED_METHODS
from panel_cli.protocols.vote.methods import Method as Method
from panel_cli.protocols.vote.methods import TieBreak as TieBreak
from panel_cli.thresholds import DEFAULT_THRESHOLD as DEFAULT_THRESHOLD
from panel_cli.thresholds import THRESHOLD_RANGE, as_percent, threshold_problem

Name = TypeVar("Name", bound=str)


# How a ballot's choice was read: the structured ballot's own field, the text matched
# against the options, the first option for a ballot that named none (`no_match: first`),
# or not at all (an abstention, or a late ballot).
MatchedBy = Literal["structured", "text", "first", "none"]
# `weighted` asks for more than half of the total weight, which a negative weight makes no sense of.
NEGATIVE_WEIGHTED = (
    "a vote of negative weight cannot count towards a share of the total weight (weighted_plurality counts it)"
)
# Summed weights this close (relatively) are a tie: sums of floats are exact only up to rounding.
TIE_TOLERANCE = 1e-9


class Ballot(BaseModel):
    """One voter's ballot as counted. `choice` is one of the options, or None for an
    abstention; `ranking` holds real options only, each once, the choice first (empty for
    an abstention). A `late` ballot arrived after collection closed and is never counted."""

    voter: str
    choice: str | None = None
    ranking: list[str] = Field(default_factory=list)
    confidence: float | None = None
    reason: str = ""
    matched_by: MatchedBy = "none"
    weight: float = 1.0
    late: bool = False


class RunoffRound(BaseModel):
    """One round of an instant runoff: the first preferences among the options still in
    (in the order they were listed), then either the winner or the option dropped and where
    its ballots went. `tied` lists the options that shared the fewest first preferences when
    the listing order had to choose which one goes."""

    index: int
    counts: dict[str, int]
    live: int = Field(description="ballots still in the count")
    exhausted: int = Field(description="ballots out of the count before this round: none of their options is left")
    winner: str | None = None
    eliminated: str | None = None
    tied: list[str] = Field(default_factory=list)
    transfers: dict[str, int] = Field(
        default_factory=dict, description="option -> ballots of the dropped option that went to it"
    )
    exhausted_now: int = Field(default=0, description="ballots of the dropped option that had no option left")


class Tally(BaseModel):
    """The count of one vote. `vote_counts` and `weights` cover every option (0 included), in
    the order listed. `total_votes` are the ballots that named an option; `ballots_cast` adds
    the abstentions (the quorum counts these). `winner_votes` is the winner's count (for a
    runoff, in its last round). `reason` says exactly why there is no winner."""

    method: Method
    options: list[str]
    winner: str | None
    vote_counts: dict[str, int]
    weights: dict[str, float]
    total_votes: int
    total_weight: float
    ballots_cast: int
    abstentions: int
    quorum: int
    quorum_met: bool
    threshold: float | None = Field(description="supermajority: the share an option must exceed")
    tie_break: TieBreak | None = Field(
        default=None, description="plurality and weighted_plurality: what settles a tie at the top"
    )
    tied: list[str] = Field(
        default_factory=list,
        description="plurality and weighted_plurality: the options that tied at the top, in the order listed "
        "(the winner, if any, is the one `tie_break: first` chose)",
    )
    unanimous: bool
    winner_votes: int
    rounds: list[RunoffRound] | None = Field(
        description="ranked_choice: the runoff's rounds; None for the other methods"
    )
    reason: str | None = None


def parse_choice(value: str, choices: Sequence[Name]) -> Name | None:
    """The choice `value` names, in any case and with spaces or hyphens for underscores
    (`Weighted-Plurality` is `weighted_plurality`), or None."""
    wanted = "_".join(value.strip().casefold().replace("-", " ").split())
    return next((choice for choice in choices if choice == wanted), None)


def parse_method(value: str, option: str = "--method") -> Method:
    """A counting method named in any case (`Plurality`, `weighted-plurality`); UserError naming
    the methods otherwise."""
    from panel_cli.errors import UserError

    method = parse_choice(value, METHODS)
    if method is None:
        raise UserError(f"{option}: '{value}' is not a method; choose {', '.join(METHODS[:-1])} or {METHODS[-1]}.")
    return method


def effective_threshold(value: float) -> tuple[float, str | None]:
    """A supermajority threshold (`panel_cli.thresholds`), else the default and the warning that
    says so: only a stored vote can hold another (a run stored when 1 was allowed, a damaged one)."""
    if threshold_problem(value) is not None:
        return (
            DEFAULT_THRESHOLD,
            f"the threshold {value:g} is not {THRESHOLD_RANGE}; the default {DEFAULT_THRESHOLD} is used",
        )
    return value, None


def tally(
    ballots: Sequence[Ballot],
    options: Sequence[str],
    method: Method,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    quorum: int = 1,
    tie_break: TieBreak = "none",
) -> Tally:
    """Count `ballots` over `options` by `method`. Late ballots are left out; a choice that is
    not among the options counts as an abstention. The ballots' order never matters."""
    options = list(options)
    counted = [ballot for ballot in ballots if not ballot.late]
    votes = [ballot for ballot in counted if ballot.choice in options]
    counts = {option: sum(1 for ballot in votes if ballot.choice == option) for option in options}
    # fsum is exact, so the order the ballots came in cannot change a weight by a rounding.
    weights = {option: math.fsum(ballot.weight for ballot in votes if ballot.choice == option) for option in options}
    total = len(votes)
    threshold, _ = effective_threshold(threshold)
    quorum_met = len(counted) >= quorum
    winner: str | None = None
    winner_votes = 0
    rounds: list[RunoffRound] | None = [] if method == "ranked_choice" else None
    tied: list[str] = []
    if not quorum_met:
        reason: str | None = f"quorum not met: {_ballots(len(counted))} arrived, {quorum} needed"
    elif not votes:
        reason = "no ballot was cast" if not counted else "every ballot abstained"
    elif method == "ranked_choice":
        rounds = runoff([preferences(ballot, options) for ballot in votes], options)
        winner = rounds[-1].winner
        winner_votes = rounds[-1].counts.get(winner, 0) if winner else 0
        reason = None if winner else "every ballot was exhausted"
    elif method in PLURALITY_METHODS:
        weightless = all(ballot.weight == 0 for ballot in votes)
        winner, tied, reason = _by_most(method, counts, weights, tie_break, weightless=weightless)
        winner_votes = counts[winner] if winner else 0
    elif method == "weighted" and any(ballot.weight < 0 for ballot in votes):
        reason = NEGATIVE_WEIGHTED
    else:
        winner, reason = _by_share(method, counts, weights, total, threshold)
        winner_votes = counts[winner] if winner else 0
    return Tally(
        method=method,
        options=options,
        winner=winner,
        vote_counts=counts,
        weights=weights,
        total_votes=total,
        total_weight=math.fsum(weights.values()),
        ballots_cast=len(counted),
        abstentions=len(counted) - total,
        quorum=quorum,
        quorum_met=quorum_met,
        threshold=threshold if method == "supermajority" else None,
        tie_break=tie_break if method in PLURALITY_METHODS else None,
        tied=tied,
        unanimous=total > 0 and len({ballot.choice for ballot in votes}) == 1,
        winner_votes=winner_votes,
        rounds=rounds,
        reason=reason,
    )


def _by_share(
    method: Method, counts: Mapping[str, int], weights: Mapping[str, float], total: int, threshold: float
) -> tuple[str | None, str | None]:
    """The winner of majority, supermajority, unanimous or weighted, or why there is none."""
    top = max(counts.values())
    leaders = [option for option, count in counts.items() if count == top]
    standing = _standing(counts)
    if method == "majority":
        if top * 2 > total:
            return leaders[0], None
        if len(leaders) > 1:
            return None, f"{_and(leaders)} tie with {_votes(top)} each, so none has more than half"
        return None, f"no option has more than half of the {_votes(total)} ({standing})"
    if method == "unanimous":
        if top == total:
            return leaders[0], None
        return None, f"the votes are split ({standing})"
    if method == "weighted":
        total_weight = math.fsum(weights.values())
        heaviest = max(weights.values())
        if total_weight > 0 and heaviest * 2 > total_weight:
            return next(option for option, weight in weights.items() if weight == heaviest), None
        heaviest_options = [option for option, weight in weights.items() if weight and ties(weight, heaviest)]
        if len(heaviest_options) > 1:
            return None, f"{_and(heaviest_options)} tie with weight {heaviest:g} each, so none has more than half"
        shares = ", ".join(f"{option} {weight:g}" for option, weight in weights.items() if weight)
        return (
            None,
            f"no option has more than half of the total weight {total_weight:g} ({shares or 'every vote weighs 0'})",
        )
    clears = top / total > threshold
    if clears and len(leaders) == 1:
        return leaders[0], None
    if clears:
        return None, f"{_and(leaders)} tie with more than {as_percent(threshold)} of the {_votes(total)} each"
    return None, f"no option has more than {as_percent(threshold)} of the {_votes(total)} ({standing})"


def _by_most(
    method: Method,
    counts: Mapping[str, int],
    weights: Mapping[str, float],
    tie_break: TieBreak,
    *,
    weightless: bool = False,
) -> tuple[str | None, list[str], str | None]:
    """The winner of plurality or weighted_plurality, the options tied at the top (empty
    without a tie), and why there is no winner. Two weights within `TIE_TOLERANCE` of each
    other tie: 0.1 + 0.2 is 0.3, and 2 log 6 is log 36, though floating point says otherwise.
    A weight below 0 (a member below chance, its weight a log-odds) counts against the option it
    names, so an option nobody named can win; when every vote weighs 0 (`weightless`), none does."""
    if method == "weighted_plurality" and weightless:
        return None, [], "every vote weighs 0"
    scores: Mapping[str, float] = weights if method == "weighted_plurality" else counts
    top = max(scores.values())
    leaders = [option for option, score in scores.items() if ties(score, top)]
    if len(leaders) == 1:
        return leaders[0], [], None
    if tie_break == "first":
        return leaders[0], leaders, None
    amount = f"weight {top:g}" if method == "weighted_plurality" else _votes(int(top))
    return None, leaders, f"{_and(leaders)} tie with {amount} each"


def ties(score: float, top: float) -> bool:
    """Whether a summed score ties the top one: equal but for rounding."""
    return math.isclose(score, top, rel_tol=TIE_TOLERANCE, abs_tol=TIE_TOLERANCE)


def tie_break_of(tie_break: TieBreak | None, leader: str | None) -> TieBreak:
    """The tie rule in force: the panel's `tie_break`, else the leader's when a decision has
    one (`leader`: None for a vote), else none."""
    return tie_break or ("leader" if leader else "none")


def settling_a_tie(counted: Tally) -> str | None:
    """For a person, not a model: what would have settled a tie that left majority or weighted
    with no winner (the same count by the most, with a tie rule, or a leader); None otherwise."""
    if counted.winner is None and counted.method in ("majority", "weighted") and counted.total_votes:
        scores = counted.weights if counted.method == "weighted" else counted.vote_counts
        top = max(scores.values())
        if top and sum(ties(score, top) for score in scores.values()) > 1:
            most = "weighted_plurality" if counted.method == "weighted" else "plurality"
            return f"--method {most} --tie-break first, or a leader in panel decide, settles a tie"
    return None


def leader_settles(counted: Tally) -> bool:
    """Whether a decision's leader chooses after this count: when no option won, except a tie
    that `tie_break: none` leaves undecided."""
    return counted.winner is None and not (counted.tied and counted.tie_break == "none")


def preferences(ballot: Ballot, options: Sequence[str]) -> list[str]:
    """A ballot's order of preference for the runoff: its choice first, then the rest of its
    ranking, real options only, each once."""
    order: list[str] = []
    for option in [ballot.choice, *ballot.ranking]:
        if option is not None and option in options and option not in order:
            order.append(option)
    return order


def runoff(ballots: Sequence[Sequence[str]], options: Sequence[str]) -> list[RunoffRound]:
    """Instant runoff over ranked ballots. Each round counts every live ballot for its
    highest option still in; an option with more than half of the live ballots wins.
    Otherwise the option with the fewest first preferences is dropped (of several, the one
    listed last) and its ballots go to their next option still in, or leave the count when
    they have none (exhausted). The last round has the winner, or none when every ballot
    is exhausted."""
    standing = list(options)
    rounds: list[RunoffRound] = []
    while True:
        tops = [next((option for option in ballot if option in standing), None) for ballot in ballots]
        counts = {option: sum(1 for top in tops if top == option) for option in standing}
        live = sum(1 for top in tops if top is not None)
        index = len(rounds) + 1
        exhausted = len(ballots) - live
        if live == 0:
            rounds.append(RunoffRound(index=index, counts=counts, live=0, exhausted=exhausted))
            return rounds
        best = max(counts.values())
        if best * 2 > live:
            winner = next(option for option, count in counts.items() if count == best)
            rounds.append(RunoffRound(index=index, counts=counts, live=live, exhausted=exhausted, winner=winner))
            return rounds
        fewest = min(counts.values())
        tied = [option for option in standing if counts[option] == fewest]
        dropped = tied[-1]
        rest = [option for option in standing if option != dropped]
        transfers: dict[str, int] = {}
        exhausted_now = 0
        for ballot, top in zip(ballots, tops, strict=True):
            if top != dropped:
                continue
            following = next((option for option in ballot if option in rest), None)
            if following is None:
                exhausted_now += 1
            else:
                transfers[following] = transfers.get(following, 0) + 1
        rounds.append(
            RunoffRound(
                index=index,
                counts=counts,
                live=live,
                exhausted=exhausted,
                eliminated=dropped,
                tied=tied if len(tied) > 1 else [],
                transfers={o: transfers[o] for o in rest if o in transfers},
                exhausted_now=exhausted_now,
            )
        )
        standing = rest


def _standing(counts: Mapping[str, int]) -> str:
    """`PostgreSQL 2, MySQL 1`: the options that got votes, most first."""
    named = sorted(((option, count) for option, count in counts.items() if count), key=lambda item: -item[1])
    return ", ".join(f"{option} {count}" for option, count in named)


def _and(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _votes(count: int) -> str:
    return f"{count} vote{'' if count == 1 else 's'}"


def _ballots(count: int) -> str:
    return f"{count} ballot{'' if count == 1 else 's'}"


# Re-tallies ------------------------------------------------------------------------------------


class StoredVote(BaseModel):
    """What a stored vote or decision run kept of its vote: the options and rules it was
    opened with, every ballot (late ones marked), and the leader's choice, if a leader was
    asked. Read from the run's stored events, so a run that never finished is readable too."""

    options: list[str]
    method: Method
    threshold: float
    quorum: int
    tie_break: TieBreak = "none"
    ballots: list[Ballot]
    leader: str | None = None
    leader_choice: str | None = None
    leader_asked: bool = False


def stored_vote(events: Sequence[Mapping[str, Any]]) -> StoredVote | None:
    """The vote in a run's stored event payloads, or None when the run never opened one.
    A voter's first ballot is its ballot; the payloads are the run's own, but a store can be
    edited, so each is validated and a malformed one is skipped."""
    opened = next((event for event in events if event.get("type") == "vote_opened"), None)
    if opened is None:
        return None
    options = [option for option in opened.get("options", []) if isinstance(option, str)]
    ballots: list[Ballot] = []
    seen: set[str] = set()
    leader: Mapping[str, Any] | None = None
    for event in events:
        if event.get("type") == "leader_chose":
            leader = event
        if event.get("type") != "vote_received":
            continue
        try:
            ballot = Ballot.model_validate({key: event[key] for key in Ballot.model_fields if key in event})
        except ValidationError:
            continue
        if ballot.voter not in seen:
            seen.add(ballot.voter)
            ballots.append(ballot)
    method = opened.get("method")
    tie_break = opened.get("tie_break")
    return StoredVote(
        options=options,
        method=method if method in METHODS else "majority",
        tie_break=tie_break if tie_break in TIE_BREAKS else "none",
        threshold=_number(opened.get("threshold"), DEFAULT_THRESHOLD),
        quorum=max(int(_number(opened.get("quorum"), 1)), 1),
        ballots=ballots,
        leader=opened.get("leader") if isinstance(opened.get("leader"), str) else None,
        leader_choice=_choice_of(leader, options),
        leader_asked=leader is not None,
    )


def _number(value: Any, default: float) -> float:
    return (
        float(value)
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        else default
    )


def _choice_of(event: Mapping[str, Any] | None, options: Sequence[str]) -> str | None:
    choice = event.get("choice") if event else None
    return choice if isinstance(choice, str) and choice in options else None


class Retally(BaseModel):
    """A stored vote counted again by other rules, with no model call. For a decision whose
    recount finds no winner (a tie that `tie_break: none` leaves undecided apart), the
    leader's stored choice decides, as it did in the run; a leader the run never asked (its
    own count had a winner) cannot be asked now."""

    tally: Tally
    winner: str | None
    leader: str | None
    leader_override: bool
    reason: str | None
    warnings: list[str]


def retally(
    vote: StoredVote,
    *,
    method: Method | None = None,
    threshold: float | None = None,
    quorum: int | None = None,
    tie_break: TieBreak | None = None,
) -> Retally:
    """Count a stored vote again; what is not given is taken from the vote as it ran."""
    warnings: list[str] = []
    chosen = method or vote.method
    limit = vote.threshold if threshold is None else threshold
    limit, problem = effective_threshold(limit)
    if problem and chosen == "supermajority":
        warnings.append(problem)
    counted = tally(
        vote.ballots,
        vote.options,
        chosen,
        threshold=limit,
        quorum=vote.quorum if quorum is None else quorum,
        tie_break=vote.tie_break if tie_break is None else tie_break,
    )
    if not leader_settles(counted) or vote.leader is None:
        return Retally(
            tally=counted,
            winner=counted.winner,
            leader=vote.leader,
            leader_override=False,
            reason=counted.reason,
            warnings=warnings,
        )
    if vote.leader_choice is not None:
        return Retally(
            tally=counted,
            winner=vote.leader_choice,
            leader=vote.leader,
            leader_override=True,
            reason=counted.reason,
            warnings=warnings,
        )
    why = (
        f"{counted.reason}; the leader {vote.leader} made no usable choice in the run"
        if vote.leader_asked
        else f"{counted.reason}; the leader {vote.leader} was not asked in the run, and a re-tally calls no model"
    )
    return Retally(tally=counted, winner=None, leader=vote.leader, leader_override=False, reason=why, warnings=warnings)
