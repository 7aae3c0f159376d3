"""The counting methods, the tie rules and the methods' families, apart from the count itself so
a view that draws a stored tally (`panel history show`) and a panel's settings read them without
loading the tally's models."""

from __future__ import annotations

from typing import Literal, get_args

Method = Literal[
    "majority", "supermajority", "unanimous", "ranked_choice", "weighted", "plurality", "weighted_plurality"
]
METHODS: tuple[Method, ...] = get_args(Method)
TieBreak = Literal["none", "leader", "first"]
TIE_BREAKS: tuple[TieBreak, ...] = get_args(TieBreak)

# The methods that count weight rather than ballots, and those that need only the most.
WEIGHTED_METHODS: frozenset[str] = frozenset({"weighted", "weighted_plurality"})
PLURALITY_METHODS: frozenset[str] = frozenset({"plurality", "weighted_plurality"})
