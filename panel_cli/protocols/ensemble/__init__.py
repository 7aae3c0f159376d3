"""ensemble: one prompt to every member at once, no peer review; the mode decides what comes back
(docs/protocols.md#ensemble)."""

from panel_cli.protocols.options import MEMBERS, timeout
from panel_cli.protocols.registry import CommandOption, ProtocolSpec

PROTOCOL = ProtocolSpec(
    name="ensemble",
    summary="One prompt to every member at once, no peer review; the mode decides what comes back.",
    settings="panel_cli.protocols.ensemble.settings:EnsembleSettings",
    options=(
        MEMBERS,
        CommandOption(
            name="mode",
            flag="--mode",
            help="fanout: every result; race: the first success; consensus: the best score; "
            "majority: the most typical answer; synthesize: an aggregator merges them.",
            field="mode",
            noun="mode",
        ),
        CommandOption(
            name="scorer",
            flag="--scorer",
            help="For consensus: length, or judge:<member>.",
            field="scorer",
            requires=("mode", "consensus"),
        ),
        CommandOption(
            name="aggregator",
            flag="--aggregator",
            help="For synthesize: the member that writes the answer.",
            field="aggregator",
            requires=("mode", "synthesize"),
            completion="member_names",
        ),
        timeout(("answer",)),
        CommandOption(
            name="stop",
            flag="--stop",
            help="For majority: decided asks every member but the last, and the last only if its response could "
            "change the pick; all asks everyone.",
            field="stop",
            requires=("mode", "majority"),
            metavar="RULE",
            noun="stopping rule",
        ),
    ),
    theory="panel_cli.eval.rules:racing_alone",
    no_theory="ensemble's answer is a merge or a pick of whole answers, not a count of the voters' beliefs",
    unmeasurable="ensemble's answer is a merge or a pick of whole answers (fanout joins them all), not one answer "
    "the simulated voters give",
)
