"""The demo personas and simulated voters a panel may name as `demo/<name>`: their names, each
persona's voice, and what an oracle's name (`oracle@p?knobs`) says.

A panel file is checked against these names before anything runs, so they sit below the panel
model (`panel_cli.config`); how a persona replies is the demo route's
(`panel_cli.llm.demo_replies`), how an oracle deliberates is the simulation's
(`panel_cli.simulation.voters`).
"""

from __future__ import annotations

import difflib
import math
from typing import Any

from pydantic import BaseModel, ConfigDict

PERSONAS: dict[str, dict[str, Any]] = {
    "sage": {
        "opening": "Weigh the long-term consequences before the short-term convenience.",
        "points": [
            "Choose what you can still undo in a year without a rewrite.",
            "The simplest design that meets today's need usually ages best.",
            "Write down the assumption each choice rests on, so you notice when it breaks.",
        ],
        "bias": 0,
    },
    "skeptic": {
        "opening": "Start from what could go wrong, because that is where the cost hides.",
        "points": [
            "Every option has a failure mode; name it before you commit.",
            "Be wary of claims nobody has measured on your own workload.",
            "Keep a fallback path until the new choice has survived real traffic.",
        ],
        "bias": 1,
    },
    "pragmatist": {
        "opening": "Pick the option your team can ship and operate this quarter.",
        "points": [
            "Prefer the tool people already know over the one that looks best on paper.",
            "Make the first step small, then measure before the second.",
            "Operational cost over three years matters more than the first week's speed.",
        ],
        "bias": 2,
    },
    "optimist": {
        "opening": "There is a good path here, and it is closer than it looks.",
        "points": [
            "The mainstream option has a large community, so most problems are already solved.",
            "Starting now and iterating beats waiting for a perfect plan.",
            "A clear owner and a short feedback loop turn most choices into good ones.",
        ],
        "bias": 3,
    },
    "engineer": {
        "opening": "Decide on the constraints first: load, consistency, latency and the team's skills.",
        "points": [
            "Benchmark the two leading candidates on a copy of real data.",
            "Keep the interface narrow so the implementation can change later.",
            "Automate the rollback before you automate the rollout.",
        ],
        "bias": 4,
    },
    "historian": {
        "opening": "Teams have faced this choice many times, and the record is instructive.",
        "points": [
            "Most regretted choices were made for fashion, not for fit.",
            "Durable systems grew from boring foundations.",
            "Migrations cost more than anyone estimates, so choose as if you will stay.",
        ],
        "bias": 5,
    },
}


# `oracle@p`: a simulated voter right with probability p on each question; the knobs after a
# `?` (`oracle@0.6?herd=0.3&persuade=0.2&confidence=p`) say how it deliberates and how sure it
# says it is (README, "Simulated voters"; `panel_cli.simulation.voters` plays them).

ORACLE = "oracle@"
ORACLE_CONFIDENCE = 80.0
KNOBS = ("herd", "persuade", "confidence", "noise")


class OracleSpec(BaseModel):
    """What `oracle@p?knobs` says: its accuracy, how it deliberates, what confidence it reports
    (`confidence` None: its own p)."""

    model_config = ConfigDict(frozen=True)

    p: float
    herd: float = 0.0
    persuade: float = 0.0
    confidence: float | None = ORACLE_CONFIDENCE
    noise: float = 0.0

    @property
    def deliberates(self) -> bool:
        return self.herd > 0 or self.persuade > 0

    def reported(self) -> float:
        """The confidence it reports before noise, from 0 to 100."""
        return self.p * 100 if self.confidence is None else self.confidence

    def knobs(self) -> str:
        """The knobs as written after `?`, only those that differ from the default."""
        parts = [f"herd={self.herd:g}"] if self.herd else []
        parts += [f"persuade={self.persuade:g}"] if self.persuade else []
        if self.confidence != ORACLE_CONFIDENCE:
            parts.append("confidence=p" if self.confidence is None else f"confidence={self.confidence:g}")
        parts += [f"noise={self.noise:g}"] if self.noise else []
        return "&".join(parts)


def _probability(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} is a probability from 0 to 1, not '{text}'")
    return value


def parse_oracle(persona: str) -> OracleSpec | None:
    """The spec of `oracle@p?knob=value&…`; None for a persona that is not an oracle. An
    oracle name with a bad accuracy or knobs raises ValueError saying what is wrong with each,
    in the order written, so one fix mends the name."""
    if not persona.startswith(ORACLE):
        return None
    head, _, query = persona[len(ORACLE) :].partition("?")
    fields: dict[str, Any] = {}
    problems: list[str] = []
    try:
        fields["p"] = _probability("an oracle's accuracy (oracle@p)", head)
    except ValueError as exc:
        problems.append(str(exc))
    if "?" in persona and not query:
        problems.append("nothing follows '?'; give knobs like herd=0.3&persuade=0.2")
    given: set[str] = set()
    for part in query.split("&") if query else []:
        name, equals, value = part.partition("=")
        try:
            if name not in KNOBS:
                close = difflib.get_close_matches(name, KNOBS, n=1)
                hint = f" (did you mean {close[0]}?)" if close else ""
                raise ValueError(f"'{name}' is not an oracle knob{hint}; the knobs are {', '.join(KNOBS)}")
            if not equals or not value:
                raise ValueError(f"the knob {name} needs a value, like {name}=0.3")
            if name in given:
                raise ValueError(f"the knob {name} is given twice")
            given.add(name)
            if name == "confidence":
                fields[name] = None if value == "p" else _percent(value)
            elif name == "noise":
                fields[name] = _probability("noise (a standard deviation, from 0 to 1)", value)
            else:
                fields[name] = _probability(name, value)
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        more = f"; and {len(problems) - 5} more" if len(problems) > 5 else ""  # a name of a thousand knobs
        raise ValueError("; ".join(problems[:5]) + more)
    return OracleSpec(**fields)


def _percent(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 100.0:
        raise ValueError(f"confidence is p (the oracle's own accuracy) or a number from 0 to 100, not '{text}'")
    return value


def oracle_spec(persona: str) -> OracleSpec | None:
    """The spec of a valid oracle name; None for anything else (another persona, a bad name)."""
    try:
        return parse_oracle(persona)
    except ValueError:
        return None


def oracle_problem(persona: str) -> str | None:
    """Why an oracle name is not valid; None for a valid one or a name that is no oracle."""
    try:
        parse_oracle(persona)
    except ValueError as exc:
        return f"demo/{persona}: {exc}"
    return None


def oracle_accuracy(persona: str) -> float | None:
    """p for a valid `oracle@p` (knobs or not); None for any other persona."""
    spec = oracle_spec(persona)
    return spec.p if spec is not None else None


def is_persona(name: str) -> bool:
    """Whether `demo/<name>` is a model the demo provider answers as."""
    return name in PERSONAS or oracle_spec(name) is not None
