"""decide: a vote inside the group, stored as a decision; when no option wins, the leader chooses
(docs/protocols.md#vote-and-decide)."""

from panel_cli.protocols.options import MEMBERS, timeout
from panel_cli.protocols.registry import ProtocolSpec
from panel_cli.protocols.vote import (
    BALLOT_TRAITS,
    GATE,
    LEADER,
    METHOD,
    NO_MATCH,
    OPTIONS,
    QUORUM,
    STOP,
    THRESHOLD,
    TIE_BREAK,
)

PROTOCOL = ProtocolSpec(
    name="decide",
    summary="A vote inside the group, stored as a decision; when no option wins, the leader chooses.",
    engine="panel_cli.protocols.vote.engine:decide",
    rules="panel_cli.protocols.vote.engine:DECIDE_RULES",
    plan="panel_cli.protocols.vote.estimate:plan_calls",
    options=(OPTIONS, MEMBERS, LEADER, METHOD, TIE_BREAK, THRESHOLD, QUORUM, timeout(("vote",)), NO_MATCH, STOP, GATE),
    settings="panel_cli.protocols.vote.settings:DecideSettings",
    stage_views={"vote": "panel_cli.view.vote:ballot_stage", "leader": "panel_cli.view.vote:leader_stage"},
    **BALLOT_TRAITS,
)
