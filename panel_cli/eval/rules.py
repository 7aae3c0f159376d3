"""The rule eval's closed-form theory counts simulated voters by, one builder per protocol that
has one: each protocol's spec names its builder (`theory`), so the theory line of a system is
found from its spec, never from its name.

A builder is a function of the panel (as the protocol runs it) and its simulated voters (the
members', in order) returning the rule (`panel_cli.eval.theory`), or None for a panel it has
no closed form for. Pure: no run, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from panel_cli.config import Panel, settings_model
from panel_cli.eval.theory import Alone, Confer, Council, Count, Rule
from panel_cli.models.personas import OracleSpec
from panel_cli.protocols.confer.settings import ConferSettings
from panel_cli.protocols.council.settings import CouncilSettings
from panel_cli.protocols.ensemble.settings import EnsembleSettings
from panel_cli.protocols.vote.settings import leader_of, settings_of
from panel_cli.protocols.vote.tally import WEIGHTED_METHODS, tie_break_of

# A function of the panel and its simulated voters returning the rule that counts them.
RuleBuilder = Callable[[Panel, Sequence[OracleSpec]], Rule | None]


def confer_rule(panel: Panel, voters: Sequence[OracleSpec]) -> Rule | None:
    """confer: each vote weighs its confidence (or its log-odds), noisy when the voters' reports are."""
    noise = tuple(spec.noise for spec in voters)
    return Confer(
        ConferSettings.of(panel).tally, tuple(spec.reported() for spec in voters), noise if any(noise) else ()
    )


def council_rule(panel: Panel, voters: Sequence[OracleSpec]) -> Rule | None:
    """council: every reviewer ranks the answers, the chairman reports the best-ranked."""
    settings = CouncilSettings.of(panel)
    return Council(
        tuple(panel.member_names), self_review=settings.self_review, shuffle=settings.shuffle, seed=settings.seed
    )


def count_rule(panel: Panel, voters: Sequence[OracleSpec]) -> Rule | None:
    """vote and decide: the ballots counted by the method; decide's leader settles what it may."""
    names = panel.member_names
    settings = settings_of(panel, panel.protocol)
    named = leader_of(settings)
    weighted = settings.method in WEIGHTED_METHODS
    return Count(
        settings.method,
        tuple(member.weight if weighted else 1.0 for member in panel.members),
        threshold=settings.threshold,
        tie_break=tie_break_of(settings.tie_break, named),
        leader=names.index(named) if named in names else None,
        leader_name=named or "",
    )


def racing_alone(panel: Panel, voters: Sequence[OracleSpec]) -> Rule | None:
    """ensemble racing one member: that member alone (eval's baseline); any other ensemble has none."""
    names = panel.member_names
    return Alone(0, names[0]) if EnsembleSettings.of(panel).mode == "race" and len(names) == 1 else None


def answers_in_turn(protocol: str, panel: Panel) -> bool:
    """Whether the protocol's members answer in turn, each shown the answers before it (its
    settings say `answer_order: sequential`): where herding voters start a cascade."""
    model = settings_model(protocol)
    return model is not None and getattr(panel.settings_as(model), "answer_order", None) == "sequential"
