"""vote: every member votes on fixed options; the ballots are counted by the method, against the
quorum (docs/protocols.md#vote-and-decide)."""

from typing import TypedDict

from panel_cli.protocols.options import MEMBERS, stop, timeout
from panel_cli.protocols.registry import CommandOption, ProtocolSpec, Ref, RequestKind

OPTIONS = CommandOption(
    name="choices",
    flag="--options",
    help="What to vote on: every word after --options up to the next flag; quote an option with spaces "
    '("SQL Server"). Replaces the file\'s options.',
    kind="words",
    change="panel_cli.protocols.vote.engine:with_options",
    metavar="<option …>",
)
METHOD = CommandOption(
    name="method",
    flag="--method",
    help="majority, supermajority, unanimous, ranked_choice, weighted, plurality or weighted_plurality, in any case "
    "(default majority).",
    field="method",
    noun="method",
)
TIE_BREAK = CommandOption(
    name="tie_break",
    flag="--tie-break",
    help="plurality and weighted_plurality: a tie at the top is no winner (none), the tied option listed first "
    "(first), or the leader's to settle (leader; a decision's default when it has one).",
    field="tie_break",
    noun="tie rule",
)
THRESHOLD = CommandOption(
    name="threshold",
    flag="--threshold",
    help="supermajority: the share of the votes an option must exceed (default 0.667).",
    kind="float",
    field="threshold",
    requires=("method", "supermajority"),
)
QUORUM = CommandOption(
    name="quorum",
    flag="--quorum",
    help="Fewer ballots than this, and nothing wins (default 1).",
    kind="int",
    field="quorum",
    minimum=1,
)
NO_MATCH = CommandOption(
    name="no_match",
    flag="--no-match",
    help="A ballot that names no option: abstain (default), or first (a vote for the first option).",
    field="no_match",
)
LEADER = CommandOption(
    name="leader",
    flag="--leader",
    help="The member who chooses when no option wins.",
    field="leader",
    completion="member_names",
)
STOP = stop(
    "Ask the voters a few at a time: decided (stop once the rest cannot change the outcome) or "
    "'confident(0.95)' (once the leading option is right with that probability; needs weights); all asks everyone."
)
GATE = CommandOption(
    name="gate",
    flag="--gate",
    help="For CI: exit 0 when this option wins, 1 when another one does, 3 when none does.",
    metavar="OPTION",
    verdict="panel_cli.protocols.vote.gate:VOTE_GATE",
    completion="vote_options",
)

# A member's ballot on the options; decide's members cast the same.
BALLOT = RequestKind(
    "ballot", demo="panel_cli.llm.demo_replies:ballot", oracle="panel_cli.simulation.voters:oracle_ballot"
)


class BallotTraits(TypedDict):
    """The `ProtocolSpec` fields vote and decide share, so each spec's call is checked whole."""

    requests: tuple[RequestKind, ...]
    plain_lines: Ref
    votes_on_options: bool
    given_options: bool
    retallies: bool
    theory: Ref


# What vote and decide share beside their options: members vote on fixed options (which eval and
# a batch's questions may give), their ballots can be counted again, and eval counts simulated
# voters by the method.
BALLOT_TRAITS: BallotTraits = {
    "requests": (BALLOT,),
    "plain_lines": "panel_cli.view.vote:PLAIN_LINES",
    "votes_on_options": True,
    "given_options": True,
    "retallies": True,
    "theory": "panel_cli.eval.rules:count_rule",
}

PROTOCOL = ProtocolSpec(
    name="vote",
    summary="Every member votes on fixed options; the ballots are counted by the method, against the quorum.",
    options=(OPTIONS, MEMBERS, METHOD, TIE_BREAK, THRESHOLD, QUORUM, timeout(("vote",)), NO_MATCH, STOP, GATE),
    settings="panel_cli.protocols.vote.settings:VoteSettings",
    stage_views={"vote": "panel_cli.view.vote:ballot_stage"},
    **BALLOT_TRAITS,
)
