"""Which way a model's calls go: the demo personas are served in-process, every other model
through litellm. Deciding it needs no import, so a run of demo personas alone never pays
for litellm's (several seconds of CPU before the first call)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

DEMO_PREFIX = "demo/"


class HasModel(Protocol):
    @property
    def model(self) -> str: ...


def is_demo(model: str) -> bool:
    """Whether a model id names a demo persona, which the gateway answers itself."""
    return model.startswith(DEMO_PREFIX)


def needs_litellm(members: Iterable[HasModel]) -> bool:
    """Whether calling these members needs litellm: one of them is not a demo persona."""
    return any(not is_demo(member.model) for member in members)
