"""The rule eval's closed-form theory counts simulated voters by, one builder per protocol that
has one: each protocol's spec names its builder (`theory`), so the theory line of a system is
found from its spec, never from its name.

A builder is a function of the panel (as the protocol runs it) and its simulated voters (the
members', in order) returning the rule (`panel_cli.eval.theory`), or None for a panel it has
no closed form for. Pure: no run, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from panel_cli.config import Panel
from panel_cli.eval.theory import Alone, Confer, Council, Count, Rule
from panel_cli.models.personas import OracleSpec
from panel_cli.protocols.vote.tally import WEIGHTED_METHODS, tie_break_of

# A function of the panel and its simulated voters returning the rule that counts them.
RuleBuilder = Callable[[Panel, Sequence[OracleSpec]], Rule | None]


def confer_rule(panel: Panel, voters: Sequence[OracleSpec]) -> Rule | None:
    """confer: each vote weighs its confidence (or its log-odds), noisy when the voters' reports are."""
    noise = tuple(spec.noise for spec in voters)
    return Confer(panel.tally, tuple(spec.reported() for spec in voters), noise if any(noise) else ())


def council_rule(panel: Panel, voters: Sequence[OracleSpec]) -> Rule | None:
    """council: every reviewer ranks the answers, the chairman reports the best-ranked."""
    return Council(tuple(panel.member_names), self_review=panel.self_review, shuffle=panel.shuffle, seed=panel.seed)


def count_rule(panel: Panel, voters: Sequence[OracleSpec]) -> Rule | None:
    """vote and decide: the ballots counted by the method; decide's leader settles what it may."""
    names = panel.member_names
    weighted = panel.method in WEIGHTED_METHODS
    leader = names.index(panel.leader) if panel.protocol == "decide" and panel.leader in names else None
    return Count(
        panel.method,
        tuple(member.weight if weighted else 1.0 for member in panel.members),
        threshold=panel.threshold,
        tie_break=tie_break_of(panel, panel.protocol),
        leader=leader,
        leader_name=panel.leader or "",
    )


def racing_alone(panel: Panel, voters: Sequence[OracleSpec]) -> Rule | None:
    """ensemble racing one member: that member alone (eval's baseline); any other ensemble has none."""
    names = panel.member_names
    return Alone(0, names[0]) if panel.mode == "race" and len(names) == 1 else None
