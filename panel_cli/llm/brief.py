"""What a request is about, said in fields rather than in prose: the request's brief.

A real model reads the prompt. The demo personas (`panel_cli.llm.demo_replies`) must answer in the
shape each protocol asks for, and they must know what is asked for certain rather than
guess it from a prompt's wording; so every engine hands the gateway a brief beside its
messages: the kind of answer it wants, the question, the texts it quotes by label, the
options, and so on. The gateway gives the brief to the demo personas, whom it serves
in-process, and never sends it to a provider: a reworded prompt changes no demo answer,
and nothing in a brief (an eval's gold answer least of all) ever leaves the process.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from pydantic import BaseModel, ConfigDict

from panel_cli.tasks import Task


class Quoted(BaseModel):
    """One text a request shows its member, under the label it is shown by (`A`, a member's
    name, a subtask's id); `round` for a Delphi transcript, which shows every round."""

    model_config = ConfigDict(frozen=True)

    label: str
    text: str
    round: int | None = None


class SimulatedVoter(BaseModel):
    """What `panel eval` tells a simulated voter (`demo/oracle@p`) about one question: who it
    is, the question's key (the eval's seed and the question's id), the gold answer, and the
    options (empty for a short-answer question)."""

    model_config = ConfigDict(frozen=True)

    voter: str
    key: str
    gold: str
    options: tuple[str, ...] = ()


class RequestBrief(BaseModel):
    """What one request asks of its member. Engines fill what their request is about and
    leave the rest empty; `voter` is the gateway's to fill (`with_voter`), never an engine's."""

    model_config = ConfigDict(frozen=True)

    task: str = Task.ANSWER
    """The kind of request (`panel_cli.protocols.registry.RequestKind`): a built-in `Task`, or a
    kind a protocol from outside panel declares."""
    question: str = ""
    quoted: tuple[Quoted, ...] = ()
    """The texts the prompt quotes, in the order it shows them."""
    own: str | None = None
    """The label of the member's own text among `quoted` (a confer vote, a Delphi revision)."""
    options: tuple[str, ...] = ()
    """A ballot's options, as listed."""
    workers: tuple[str, ...] = ()
    """The workers a plan may give subtasks to."""
    round: int | None = None
    """A critic's review round."""
    ranking: tuple[str, ...] = ()
    """A council chairman's aggregate ranking: the labels of `quoted`, best first."""
    feedback: str | None = None
    """The critic's feedback a correction answers."""
    assignment: str | None = None
    """A supervised worker's own task."""
    worker: str | None = None
    """An orchestrated subtask's worker (its kind), `subtask` its id and `title` its title."""
    subtask: str | None = None
    title: str | None = None
    reference: str | None = None
    """A judge's reference answer."""
    voter: SimulatedVoter | None = None
    """What `panel eval` told this simulated member about the question (gateway-filled)."""

    def texts(self) -> dict[str, str]:
        """label -> text of the quoted texts; of two under one label, the first."""
        found: dict[str, str] = {}
        for entry in self.quoted:
            found.setdefault(entry.label, entry.text)
        return found


def quote(block: Mapping[str, str]) -> tuple[Quoted, ...]:
    """Labelled texts (label -> text, in the order shown) as a brief quotes them."""
    return tuple(Quoted(label=label, text=text) for label, text in block.items())


def plain(messages: Sequence[Mapping[str, object]]) -> RequestBrief:
    """The brief of a call that gave none: a plain question, its last message's text."""
    last = str(messages[-1].get("content") or "") if messages else ""
    return RequestBrief(task=Task.ANSWER, question=last)


# What `panel eval` tells its simulated voters for the question being run (member name ->
# what that member knows). Set around one run (`simulated_voters`), it reaches every call of
# that run and of no other: each question runs in a task of its own, and a context variable
# set in a task stays in it and the tasks it starts.
_VOTERS: ContextVar[Mapping[str, SimulatedVoter] | None] = ContextVar("panel_simulated_voters", default=None)


@contextmanager
def simulated_voters(voters: Mapping[str, SimulatedVoter]) -> Iterator[None]:
    """Within the block, a call of member `name` tells its persona `voters[name]`."""
    token = _VOTERS.set(dict(voters))
    try:
        yield
    finally:
        _VOTERS.reset(token)


def with_voter(brief: RequestBrief, member: str) -> RequestBrief:
    """The brief as the member's persona gets it: with what eval told that member, if anything."""
    voter = (_VOTERS.get() or {}).get(member)
    return brief if voter is None else brief.model_copy(update={"voter": voter})
