"""confer: every member answers, then votes anonymously with confidence until the winner is stable
(docs/protocols.md#confer)."""

from dataclasses import replace

from panel_cli.protocols.options import MEMBERS, max_rounds, no_convergence, stop
from panel_cli.protocols.registry import CommandOption, ProtocolSpec, RequestKind

PROTOCOL = ProtocolSpec(
    name="confer",
    summary="Every member answers, then votes anonymously with confidence until the winner is stable.",
    options=(
        # --agents, its name before confer took its members as every other protocol does, still works.
        replace(MEMBERS, short="--agents"),
        max_rounds("At most this many vote rounds."),
        CommandOption(
            name="tally",
            flag="--tally",
            help="How votes count: confidence (each vote's confidence, the default), votes (one each, "
            "confidence aside) or log_odds (log((K-1)c/(1-c)), so calibrated confidences weigh as they should).",
            field="tally",
            noun="tally",
        ),
        CommandOption(
            name="answer_order",
            flag="--answer-order",
            help="How members answer: parallel (all at once, the default) or sequential (one after another "
            "in member order, each shown the answers before it).",
            field="answer_order",
            noun="known answer order",
        ),
        no_convergence("Run every round even when the winner is stable."),
        stop(
            "decided: ask for answers a few at a time until the rest cannot change which answer leads, and hold "
            "the vote among those who answered, in waves too; all asks everyone."
        ),
    ),
    settings="panel_cli.protocols.confer.settings:ConferSettings",
    stage_views={"vote": "panel_cli.view.confer:vote_round"},
    requests=(
        RequestKind(
            "confer.vote",
            demo="panel_cli.llm.demo_replies:confer_vote",
            oracle="panel_cli.simulation.voters:oracle_vote",
        ),
    ),
    given_options=True,
    deliberates=True,
    theory="panel_cli.eval.rules:confer_rule",
)
