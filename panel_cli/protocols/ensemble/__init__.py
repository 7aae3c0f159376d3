"""ensemble: one prompt to every member at once, no peer review; the mode decides what comes back
(docs/protocols.md#ensemble)."""

from panel_cli.protocols.options import MEMBERS, timeout
from panel_cli.protocols.registry import CommandOption, ProtocolSpec

PROTOCOL = ProtocolSpec(
    name="ensemble",
    summary="One prompt to every member at once, no peer review; the mode decides what comes back.",
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
)
