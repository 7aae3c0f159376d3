"""The families of counting methods, apart from the count itself so a view that draws a stored
tally (`panel history show`) reads them without loading the tally's models."""

from __future__ import annotations

# The methods that count weight rather than ballots, and those that need only the most.
WEIGHTED_METHODS: frozenset[str] = frozenset({"weighted", "weighted_plurality"})
PLURALITY_METHODS: frozenset[str] = frozenset({"plurality", "weighted_plurality"})
