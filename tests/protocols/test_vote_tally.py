"""The vote tallies (docs/protocols.md#vote-and-decide) by hand, one case per rule, then their
invariants by property."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from panel_cli.protocols.vote.tally import (
    DEFAULT_THRESHOLD,
    METHODS,
    NEGATIVE_WEIGHTED,
    TIE_BREAKS,
    Ballot,
    Method,
    StoredVote,
    effective_threshold,
    leader_settles,
    parse_choice,
    retally,
    runoff,
    settling_a_tie,
    stored_vote,
    tally,
    ties,
)
from panel_cli.thresholds import as_percent, threshold_problem

ABC = ["A", "B", "C"]


def votes(*choices: str | None, weights: list[float] | None = None) -> list[Ballot]:
    """One ballot per choice (None abstains), voters v0, v1, …, each ranking only its choice."""
    return [
        Ballot(
            voter=f"v{i}",
            choice=c,
            ranking=[c] if c else [],
            matched_by="structured" if c else "none",
            weight=(weights or [1.0] * len(choices))[i],
        )
        for i, c in enumerate(choices)
    ]


def ranked(*rankings: list[str]) -> list[Ballot]:
    return [Ballot(voter=f"v{i}", choice=r[0], ranking=r, matched_by="structured") for i, r in enumerate(rankings)]


# majority -------------------------------------------------------------------------------------


def test_majority_needs_more_than_half_of_the_votes():
    result = tally(votes("A", "A", "B"), ABC, "majority")
    assert (result.winner, result.winner_votes, result.total_votes) == ("A", 2, 3)
    assert result.vote_counts == {"A": 2, "B": 1, "C": 0}
    assert result.reason is None and result.quorum_met and not result.unanimous


def test_majority_at_exactly_half_has_no_winner():
    result = tally(votes("A", "A", "B", "C"), ABC, "majority")
    assert result.winner is None
    assert result.reason == "no option has more than half of the 4 votes (A 2, B 1, C 1)"


def test_a_tie_under_majority_says_it_is_a_tie_and_what_would_settle_it():
    result = tally(votes("A", "A", "B", "B"), ABC, "majority")
    assert result.winner is None
    assert result.reason == "A and B tie with 2 votes each, so none has more than half"
    assert settling_a_tie(result) == (
        "--method plurality --tie-break first, or a leader in panel decide, settles a tie"
    )
    assert settling_a_tie(tally(votes("A", "A", "B", "C"), ABC, "majority")) is None
    settled = tally(votes("A", "A", "B", "B"), ABC, "plurality", tie_break="first")
    assert settled.winner == "A"


def test_abstentions_are_reported_apart_from_the_votes():
    """2 of 3 votes is a majority: the two abstentions are not votes against."""
    result = tally(votes("A", "A", "B", None, None), ABC, "majority")
    assert (result.winner, result.total_votes, result.abstentions, result.ballots_cast) == ("A", 3, 2, 5)


def test_every_ballot_abstaining_is_no_winner():
    result = tally(votes(None, None), ABC, "majority")
    assert result.winner is None and result.quorum_met
    assert result.reason == "every ballot abstained"


def test_late_ballots_count_nowhere():
    ballots = [*votes("A", "B"), Ballot(voter="late", choice="B", ranking=["B"], late=True)]
    result = tally(ballots, ABC, "majority")
    assert result.vote_counts == {"A": 1, "B": 1, "C": 0} and result.ballots_cast == 2 and result.winner is None


def test_a_choice_that_is_not_an_option_counts_as_an_abstention():
    result = tally([*votes("A"), Ballot(voter="x", choice="Oracle", ranking=["Oracle"])], ABC, "majority")
    assert result.vote_counts == {"A": 1, "B": 0, "C": 0} and result.abstentions == 1 and result.winner == "A"


# quorum ---------------------------------------------------------------------------------------


def test_quorum_just_met():
    result = tally(votes("A", "B", "A"), ABC, "majority", quorum=3)
    assert result.quorum_met and result.winner == "A"


def test_quorum_just_missed():
    result = tally(votes("A", "A"), ABC, "majority", quorum=3)
    assert not result.quorum_met and result.winner is None
    assert result.reason == "quorum not met: 2 ballots arrived, 3 needed"
    assert result.vote_counts == {"A": 2, "B": 0, "C": 0}, "the count is still reported"


def test_an_abstention_counts_towards_the_quorum():
    assert tally(votes("A", None), ABC, "majority", quorum=2).quorum_met


def test_no_ballot_at_all_misses_the_default_quorum():
    result = tally([], ABC, "majority")
    assert result.reason == "quorum not met: 0 ballots arrived, 1 needed"


# supermajority --------------------------------------------------------------------------------


def test_supermajority_needs_more_than_the_threshold():
    assert tally(votes("A", "A", "A", "B"), ABC, "supermajority", threshold=0.7).winner == "A"  # 0.75 > 0.7
    missed = tally(votes("A", "A", "A", "B"), ABC, "supermajority", threshold=0.75)  # 0.75 is not above 0.75
    assert missed.winner is None
    assert missed.reason == "no option has more than 75% of the 4 votes (A 3, B 1)"


def test_two_thirds_is_not_above_the_default_threshold():
    """2/3 = 0.6666… is below 0.667: the default asks for a little more than two thirds."""
    assert tally(votes("A", "A", "B"), ABC, "supermajority").winner is None
    assert tally(votes("A", "A", "A"), ABC, "supermajority").winner == "A"


def test_a_stored_threshold_outside_the_range_falls_back_with_a_warning():
    """Only a stored vote can hold one (a run kept when 1 was allowed): the file, the option,
    retally and the API refuse it (tests/cli/test_vote_cli.py)."""
    for bad in (0.0, -0.5, 1.0, 1.5, float("nan")):
        value, warning = effective_threshold(bad)
        assert value == DEFAULT_THRESHOLD and warning is not None and "is not a share above 0 and below 1" in warning
    assert effective_threshold(0.8) == (0.8, None)
    result = tally(votes("A", "A", "B"), ABC, "supermajority", threshold=1.5)
    assert result.threshold == DEFAULT_THRESHOLD and result.winner is None


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (0.75, None),
        (0.001, None),
        (0.999, None),
        (
            1,
            "a share above 0 and below 1, such as 0.75 (more than 75% of the votes), not 1; for every vote, use the method unanimous",
        ),
        (0, "a share above 0 and below 1, such as 0.75 (more than 75% of the votes), not 0"),
        (1.5, "a share above 0 and below 1, such as 0.75 (more than 75% of the votes), not 1.5"),
        (float("nan"), "a share above 0 and below 1, such as 0.75 (more than 75% of the votes), not nan"),
        (True, "give a share above 0 and below 1, such as 0.75, not True"),
    ],
)
def test_one_range_for_a_threshold(value, problem):
    assert threshold_problem(value) == problem


def test_a_threshold_reads_as_a_percentage():
    assert [as_percent(share) for share in (0.667, 0.75, 0.6666, 0.5, 0.001)] == [
        "66.7%",
        "75%",
        "66.66%",
        "50%",
        "0.1%",
    ]


def test_a_low_threshold_cleared_by_two_options_is_a_tie():
    result = tally(votes("A", "A", "B", "B", "C"), ABC, "supermajority", threshold=0.3)
    assert result.winner is None and result.reason == "A and B tie with more than 30% of the 5 votes each"


# unanimous ------------------------------------------------------------------------------------


def test_unanimous_with_one_ballot():
    result = tally(votes("B"), ABC, "unanimous")
    assert (result.winner, result.unanimous, result.winner_votes) == ("B", True, 1)


def test_unanimous_split():
    result = tally(votes("A", "A", "B"), ABC, "unanimous")
    assert result.winner is None and not result.unanimous
    assert result.reason == "the votes are split (A 2, B 1)"


# weighted -------------------------------------------------------------------------------------


def test_weighted_with_uneven_weights():
    """B has fewer ballots but more weight: 3 of 5 is more than half."""
    result = tally(votes("A", "A", "B", weights=[1, 1, 3]), ABC, "weighted")
    assert result.winner == "B"
    assert result.weights == {"A": 2.0, "B": 3.0, "C": 0.0} and result.total_weight == 5.0
    assert tally(votes("A", "A", "B"), ABC, "majority").winner == "A", "by ballots, A wins"


def test_weighted_at_exactly_half_the_weight_has_no_winner():
    result = tally(votes("A", "B", "C", weights=[2, 1, 1]), ABC, "weighted")
    assert result.winner is None
    assert result.reason == "no option has more than half of the total weight 4 (A 2, B 1, C 1)"


def test_weighted_with_no_weight_at_all():
    result = tally(votes("A", weights=[0]), ABC, "weighted")
    assert result.winner is None and "every vote weighs 0" in (result.reason or "")


# plurality and weighted plurality ------------------------------------------------------------


def test_plurality_needs_only_the_most_votes():
    """2 of 5 is no majority, but the most votes: plurality has a winner where majority has none."""
    ballots = votes("A", "A", "B", "C", None)
    assert tally(ballots, ABC, "majority").winner is None
    result = tally(ballots, ABC, "plurality")
    assert (result.winner, result.winner_votes, result.tied, result.reason) == ("A", 2, [], None)
    assert (result.tie_break, result.abstentions, result.threshold) == ("none", 1, None)


def test_a_plurality_tie_at_the_top_is_no_winner_by_default():
    result = tally(votes("C", "B", "B", "C", "A"), ABC, "plurality")
    assert (result.winner, result.tied) == (None, ["B", "C"]), "tied options in the order listed"
    assert result.reason == "B and C tie with 2 votes each"


def test_tie_break_first_gives_the_tie_to_the_tied_option_listed_first():
    result = tally(votes("C", "B", "B", "C", "A"), ABC, "plurality", tie_break="first")
    assert (result.winner, result.tied, result.reason, result.winner_votes) == ("B", ["B", "C"], None, 2)
    assert tally(votes("C", "B", "B", "C", "A"), ["C", "B", "A"], "plurality", tie_break="first").winner == "C"
    # A tie below the top is no tie: A alone has the most.
    untied = tally(votes("A", "A", "B", "C"), ABC, "plurality", tie_break="first")
    assert (untied.winner, untied.tied) == ("A", [])


def test_tie_break_leader_leaves_the_count_undecided_for_the_leader():
    result = tally(votes("A", "B"), ABC, "plurality", tie_break="leader")
    assert (result.winner, result.tied, result.reason) == (None, ["A", "B"], "A and B tie with 1 vote each")
    assert leader_settles(result)
    assert not leader_settles(tally(votes("A", "B"), ABC, "plurality", tie_break="none"))
    # Any other count without a winner goes to the leader whatever the tie rule.
    assert leader_settles(tally(votes("A", "B"), ABC, "majority"))
    assert leader_settles(tally(votes(None), ABC, "plurality", tie_break="none"))
    assert not leader_settles(tally(votes("A"), ABC, "plurality"))


def test_weighted_plurality_needs_only_the_most_weight():
    """The Nitzan–Paroush case: one voter of weight 3.3 outweighs two of 1.5, though not half of all."""
    ballots = votes("A", "B", "B", "C", "C", weights=[3.3, 1.5, 1.5, 1.0, 1.0])
    assert tally(ballots, ABC, "weighted").winner is None
    result = tally(ballots, ABC, "weighted_plurality")
    assert (result.winner, result.winner_votes, result.tied) == ("A", 1, [])
    assert result.weights == {"A": 3.3, "B": 3.0, "C": 2.0}


def test_a_weighted_plurality_tie_and_its_tie_breaks():
    ballots = votes("A", "B", "B", weights=[2, 1, 1])
    result = tally(ballots, ABC, "weighted_plurality")
    assert (result.winner, result.tied, result.reason) == (None, ["A", "B"], "A and B tie with weight 2 each")
    assert tally(ballots, ["B", "A", "C"], "weighted_plurality", tie_break="first").winner == "B"


def test_weighted_plurality_with_no_weight_is_no_winner_not_a_tie():
    result = tally(votes("A", "B", weights=[0, 0]), ABC, "weighted_plurality", tie_break="first")
    assert (result.winner, result.tied, result.reason) == (None, [], "every vote weighs 0")


def test_a_member_below_chance_counts_against_what_it_names():
    """Weights as log-odds: an always-wrong member (weight −3) names A, so A is the least likely,
    and the weak vote for B wins; an option nobody named can win when every vote is against."""
    result = tally(votes("A", "B", weights=[-3.0, 0.5]), ABC, "weighted_plurality")
    assert (result.winner, result.weights) == ("B", {"A": -3.0, "B": 0.5, "C": 0.0})
    against = tally(votes("A", weights=[-1.0]), ["A", "B"], "weighted_plurality")
    assert (against.winner, against.reason) == ("B", None)
    # Weights that sum to 0 are not "every vote weighs 0".
    assert tally(votes("A", "B", weights=[1.0, -1.0]), ABC, "weighted_plurality").winner == "A"


def test_weighted_counts_no_negative_weight():
    result = tally(votes("A", "A", "B", weights=[2.0, 1.0, -1.0]), ABC, "weighted")
    assert result.winner is None and result.reason == NEGATIVE_WEIGHTED


def test_weights_equal_but_for_rounding_tie():
    """0.1 + 0.2 is 0.30000000000000004 in floating point, and 0.3 is not: they still tie."""
    result = tally(votes("A", "A", "B", weights=[0.1, 0.2, 0.3]), ABC, "weighted_plurality")
    assert (result.winner, result.tied) == (None, ["A", "B"])
    assert tally(votes("A", "B", weights=[0.3, 0.3000001]), ABC, "weighted_plurality").winner == "B"


def test_weighted_plurality_weights_are_exact_whatever_the_order():
    """0.1 + 0.2 + 0.3 summed in two orders is two floats apart; fsum makes it one number, so a
    tie is a tie however the ballots arrived."""
    ballots = votes("A", "A", "A", "B", weights=[0.1, 0.2, 0.3, 0.6])
    for order in (ballots, ballots[::-1], [ballots[2], ballots[0], ballots[1], ballots[3]]):
        assert tally(order, ABC, "weighted_plurality").tied == ["A", "B"]


def test_the_tie_break_is_recorded_only_where_it_applies():
    for method in METHODS:
        result = tally(votes("A", "B"), ABC, method, tie_break="first")
        plural = method in ("plurality", "weighted_plurality")
        assert (result.tie_break == "first") == plural and (result.tied != []) == plural


def test_method_names_are_read_in_any_case():
    assert parse_choice("Plurality", METHODS) == "plurality"
    assert parse_choice(" WEIGHTED-plurality ", METHODS) == "weighted_plurality"
    assert parse_choice("weighted plurality", METHODS) == "weighted_plurality"
    assert parse_choice("First", TIE_BREAKS) == "first"
    assert parse_choice("borda", METHODS) is None


# ranked choice --------------------------------------------------------------------------------


def test_runoff_transfers_until_one_has_more_than_half():
    """Round 1: A 2, B 2, C 1 of 5; C goes, its ballot to B; round 2: B 3 of 5."""
    rounds = runoff([["A", "B"], ["A", "C"], ["B", "A"], ["B"], ["C", "B", "A"]], ABC)
    assert [(r.counts, r.eliminated, r.transfers, r.winner) for r in rounds] == [
        ({"A": 2, "B": 2, "C": 1}, "C", {"B": 1}, None),
        ({"A": 2, "B": 3}, None, {}, "B"),
    ]


def test_runoff_elimination_tie_drops_the_option_listed_last_and_exhausted_ballots_leave():
    """Round 1: A 2, B 1, C 1, D 0 of 4: D goes (no ballots). Round 2: B and C tie at 1;
    C is listed last and goes; its ballot names nothing else and is exhausted. Round 3:
    A 2 of 3 live ballots is more than half."""
    result = tally(ranked(["A"], ["A", "B"], ["B", "A"], ["C"]), ["A", "B", "C", "D"], "ranked_choice")
    rounds = result.rounds
    assert rounds is not None
    assert [(r.index, r.counts, r.live, r.exhausted) for r in rounds] == [
        (1, {"A": 2, "B": 1, "C": 1, "D": 0}, 4, 0),
        (2, {"A": 2, "B": 1, "C": 1}, 4, 0),
        (3, {"A": 2, "B": 1}, 3, 1),
    ]
    assert (rounds[0].eliminated, rounds[0].tied, rounds[0].transfers) == ("D", [], {})
    assert (rounds[1].eliminated, rounds[1].tied, rounds[1].exhausted_now) == ("C", ["B", "C"], 1)
    assert (result.winner, result.winner_votes, rounds[2].winner) == ("A", 2, "A")


def test_runoff_with_a_first_round_majority_is_one_round():
    result = tally(ranked(["A", "B"], ["A", "C"], ["B", "A"]), ABC, "ranked_choice")
    assert result.winner == "A" and result.rounds is not None and len(result.rounds) == 1


def test_runoff_uses_the_choice_first_whatever_the_ranking_says():
    ballot = Ballot(voter="v", choice="B", ranking=["A", "B", "Z", "A"])
    result = tally([ballot], ABC, "ranked_choice")
    assert result.winner == "B" and result.rounds and result.rounds[0].counts == {"A": 0, "B": 1, "C": 0}


def test_only_ranked_choice_has_rounds():
    for method in METHODS:
        rounds = tally(votes("A"), ABC, method).rounds
        assert (rounds is not None) == (method == "ranked_choice")


# re-tallies -----------------------------------------------------------------------------------


def stored(events: list[dict]) -> StoredVote:
    vote = stored_vote(events)
    assert vote is not None
    return vote


OPENED = {
    "type": "vote_opened",
    "options": ["A", "B", "C"],
    "method": "majority",
    "threshold": 0.667,
    "quorum": 1,
    "leader": "lead",
}


def received(voter: str, choice: str | None, ranking: list[str], **extra) -> dict:
    return {
        "type": "vote_received",
        "voter": voter,
        "choice": choice,
        "ranking": ranking,
        "matched_by": "structured",
        "run_id": "r",
        "seq": 3,
        **extra,
    }


def test_a_stored_vote_is_read_from_its_events():
    vote = stored(
        [
            {"type": "run_started"},
            OPENED,
            received("a", "A", ["A", "C"]),
            received("b", "B", ["B", "C"]),
            received("a", "B", ["B"]),  # a voter's first ballot is its ballot
            received("c", None, [], matched_by="none"),
            {"type": "vote_received", "voter": 7},  # malformed: skipped
            received("d", "C", ["C"], late=True),
        ]
    )
    assert [(b.voter, b.choice, b.late) for b in vote.ballots] == [
        ("a", "A", False),
        ("b", "B", False),
        ("c", None, False),
        ("d", "C", True),
    ]
    assert (vote.options, vote.method, vote.quorum, vote.leader, vote.leader_asked) == (
        ["A", "B", "C"],
        "majority",
        1,
        "lead",
        False,
    )
    assert stored_vote([{"type": "run_started"}]) is None


def test_a_retally_recounts_by_other_rules_and_keeps_the_leaders_stored_choice():
    events = [OPENED, received("a", "A", ["A", "C"]), received("b", "B", ["B", "C"]), received("c", "C", ["C", "B"])]
    vote = stored(events)
    by_majority = retally(vote)
    assert by_majority.winner is None and "was not asked in the run, and a re-tally calls no model" in (
        by_majority.reason or ""
    )
    by_runoff = retally(vote, method="ranked_choice")
    assert by_runoff.winner == "B" and not by_runoff.leader_override  # C goes (listed last), its ballot to B
    chosen = stored([*events, {"type": "leader_chose", "leader": "lead", "choice": "C"}])
    assert (retally(chosen).winner, retally(chosen).leader_override) == ("C", True)
    assert retally(chosen, quorum=4).tally.reason == "quorum not met: 3 ballots arrived, 4 needed"
    warned = retally(vote, method="supermajority", threshold=3)
    assert warned.warnings == ["the threshold 3 is not a share above 0 and below 1; the default 0.667 is used"]


def test_a_retally_by_plurality_and_its_tie_break():
    events = [
        {**OPENED, "leader": None},
        received("a", "A", ["A"]),
        received("b", "B", ["B"]),
        received("c", "B", ["B"], weight=0.5),
        received("d", "A", ["A"], weight=2.0),
        received("e", "C", ["C"]),
    ]
    vote = stored(events)
    assert vote.tie_break == "none"
    tied = retally(vote, method="plurality")
    assert (tied.winner, tied.tally.tied, tied.reason) == (None, ["A", "B"], "A and B tie with 2 votes each")
    assert retally(vote, method="plurality", tie_break="first").winner == "A"
    heaviest = retally(vote, method="weighted_plurality")
    assert (heaviest.winner, heaviest.tally.weights) == ("A", {"A": 3.0, "B": 1.5, "C": 1.0})


def test_a_retally_of_a_tie_goes_to_the_leader_only_under_tie_break_leader():
    events = [
        {**OPENED, "method": "plurality", "tie_break": "leader"},
        received("a", "A", ["A"]),
        received("b", "B", ["B"]),
        {"type": "leader_chose", "leader": "lead", "choice": "B"},
    ]
    vote = stored(events)
    assert (vote.method, vote.tie_break) == ("plurality", "leader")
    assert (retally(vote).winner, retally(vote).leader_override) == ("B", True)
    undecided = retally(vote, tie_break="none")
    assert (undecided.winner, undecided.leader_override) == (None, False)
    assert undecided.reason == "A and B tie with 1 vote each"
    assert retally(vote, tie_break="first").winner == "A"
    # A stored tie rule that is not one is read as none, like an unknown method as majority.
    assert stored([{**events[0], "tie_break": "coin"}, *events[1:]]).tie_break == "none"


# properties -----------------------------------------------------------------------------------

OPTIONS = ["A", "B", "C", "D"]
choices = st.sampled_from([*OPTIONS, None])


@st.composite
def ballot_lists(draw: st.DrawFn, complete: bool = False) -> list[Ballot]:
    """Ballots with any choice (or an abstention), a ranking that starts with it, and a weight;
    with `complete`, every ballot ranks every option."""
    ballots = []
    for index in range(draw(st.integers(min_value=0, max_value=12))):
        if complete:
            order = draw(st.permutations(OPTIONS))
            ballots.append(
                Ballot(
                    voter=f"v{index}",
                    choice=order[0],
                    ranking=list(order),
                    weight=draw(st.sampled_from([0.5, 1.0, 2.0])),
                )
            )
            continue
        choice = draw(choices)
        rest = draw(st.lists(st.sampled_from(OPTIONS), max_size=4, unique=True))
        ranking = [choice, *(o for o in rest if o != choice)] if choice else []
        ballots.append(
            Ballot(
                voter=f"v{index}",
                choice=choice,
                ranking=ranking,
                weight=draw(st.sampled_from([0.0, 0.1, 0.2, 0.7, 1.0, 3.0])),
            )
        )
    return ballots


@settings(max_examples=200, deadline=None)
@given(ballot_lists(), st.sampled_from(METHODS), st.integers(min_value=1, max_value=6))
def test_counts_add_up_to_the_ballots_cast(ballots, method, quorum):
    result = tally(ballots, OPTIONS, method, quorum=quorum)
    assert sum(result.vote_counts.values()) + result.abstentions == result.ballots_cast == len(ballots)
    assert result.total_votes == sum(result.vote_counts.values())
    assert (result.winner is None) == (result.reason is not None)
    assert result.quorum_met == (len(ballots) >= quorum)


@settings(max_examples=200, deadline=None)
@given(ballot_lists(complete=True))
def test_with_complete_rankings_a_majority_winner_also_wins_the_runoff(ballots):
    majority = tally(ballots, OPTIONS, "majority").winner
    if majority is not None:
        assert tally(ballots, OPTIONS, "ranked_choice").winner == majority


@settings(max_examples=200, deadline=None)
@given(
    ballot_lists(),
    st.sampled_from(METHODS),
    st.randoms(use_true_random=False),
    st.floats(min_value=0.1, max_value=0.99),
)
def test_permuting_the_ballots_never_changes_a_result(ballots, method, random, threshold):
    shuffled = list(ballots)
    random.shuffle(shuffled)
    assert tally(shuffled, OPTIONS, method, threshold=threshold) == tally(ballots, OPTIONS, method, threshold=threshold)


@pytest.mark.parametrize("method", METHODS)
def test_every_method_counts_an_empty_vote(method):
    assert tally([], OPTIONS, method).winner is None


PLURALITY: list[Method] = ["plurality", "weighted_plurality"]


@settings(max_examples=300, deadline=None)
@given(ballot_lists(), st.sampled_from(PLURALITY), st.sampled_from(TIE_BREAKS), st.randoms(use_true_random=False))
def test_a_plurality_winner_has_strictly_the_most_or_won_the_tie_listed_first(ballots, method, tie_break, random):
    result = tally(ballots, OPTIONS, method, tie_break=tie_break)
    scores = result.weights if method == "weighted_plurality" else result.vote_counts
    if result.winner is None:
        assert result.tied == [] or (len(result.tied) > 1 and tie_break != "first")
        return
    others = [scores[option] for option in OPTIONS if option != result.winner]
    if result.tied:
        assert tie_break == "first" and result.winner == result.tied[0] and len(result.tied) > 1
        assert all(ties(scores[option], scores[result.winner]) for option in result.tied)
        assert all(scores[option] < scores[result.winner] for option in OPTIONS if option not in result.tied)
    else:
        assert all(score < scores[result.winner] and not ties(score, scores[result.winner]) for score in others)
    # Listing the options in another order moves a tie's winner, never an outright one.
    reordered = list(OPTIONS)
    random.shuffle(reordered)
    again = tally(ballots, reordered, method, tie_break=tie_break)
    if result.tied:
        assert again.winner == next(option for option in reordered if option in result.tied)
    else:
        assert again.winner == result.winner


@settings(max_examples=200, deadline=None)
@given(ballot_lists(), st.sampled_from(TIE_BREAKS))
def test_a_share_winner_is_the_plurality_winner_too(ballots, tie_break):
    """More than half of the votes (or weight) is always the most: majority's winner wins plurality,
    weighted's wins weighted_plurality."""
    for share, most in (("majority", "plurality"), ("weighted", "weighted_plurality")):
        winner = tally(ballots, OPTIONS, share).winner
        if winner is not None:
            assert tally(ballots, OPTIONS, most, tie_break=tie_break).winner == winner


@settings(max_examples=200, deadline=None)
@given(ballot_lists(), st.sampled_from(TIE_BREAKS))
def test_weighted_plurality_with_equal_weights_is_plurality(ballots, tie_break):
    even = [ballot.model_copy(update={"weight": 2.5}) for ballot in ballots]
    by_count = tally(even, OPTIONS, "plurality", tie_break=tie_break)
    by_weight = tally(even, OPTIONS, "weighted_plurality", tie_break=tie_break)
    assert (by_weight.winner, by_weight.tied) == (by_count.winner, by_count.tied)
