"""Simulated voters of known accuracy: how `demo/oracle@p?knobs` answers, votes, ranks and
deliberates.

`demo/oracle@0.7` is right with probability 0.7 on each question, independently of every other
voter and question, and otherwise holds a wrong option drawn at random: voters whose accuracy is
known, so that `panel eval` can be checked against theory. An oracle learns the gold answer only
from its brief's `voter`, which `panel eval` gives the gateway for its simulated members
(`brief.simulated_voters`) and the gateway never sends anywhere: no question text or answer can
forge it, and no real model is ever told the gold answer.

What an oracle holds for a question (its belief) is drawn once from the eval's key (its seed and
the question) and the voter's name, so it answers, votes, ranks and casts its ballot on the same
belief in every protocol: confer, council and vote differ only in how they combine the beliefs.

Knobs after a `?` (`demo/oracle@0.6?herd=0.3&persuade=0.2&confidence=p`) make it deliberate and
say how sure it is (README, "Simulated voters"):

- `herd`: in a round that shows it the others' answers (a confer vote, a council review, a
  Delphi revision, or confer's answer stage under `answer_order: sequential`, which shows each
  member the answers given before its turn), it moves to the most common answer shown with this
  probability: herding, or conformity, which spends a voter's own evidence on what the crowd
  already says. Answering in turn, herders follow the first answers, right or wrong: a cascade.
- `persuade`: in such a round, when one of the answers shown is right, it moves to it with this
  probability: persuasion by a correct argument, which a real panel hopes for.
  Persuasion is drawn first; a voter it does not move may still herd.
- `confidence`: what it reports as its confidence, `p` (its own accuracy: calibrated) or a
  number from 0 to 100 (the default, 80, for every oracle).
- `noise`: the standard deviation of a normal error on that report, per question (a noisy
  reading of its own accuracy), kept inside [0, 1].
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Sequence

from panel_cli.llm.brief import RequestBrief, SimulatedVoter
from panel_cli.models.personas import OracleSpec
from panel_cli.simulation.seeded import SIMULATED, digest, echoed_question


def _oracle_fold(text: str) -> str:
    return text.strip().strip("*_`\"'“”‘’").rstrip(".").strip().casefold()


def _reads_as(text: str, belief: str) -> bool:
    """Whether an answer gives `belief`: its first line is the option, as the oracle writes it."""
    head = next((line for line in text.splitlines() if line.strip()), "")
    return _oracle_fold(head) == _oracle_fold(belief)


def _oracle_belief(p: float, voter: SimulatedVoter | None, brief: RequestBrief) -> str | None:
    """The gold answer with probability p, else a wrong option at random (None when there is
    none to pick). Told nothing, an oracle knows nothing: one of the brief's options at random."""
    if voter is None:
        options = brief.options
        return random.Random(digest(f"oracle\x00{echoed_question(brief)}")).choice(options) if options else None
    rng = random.Random(digest(f"oracle\x00{voter.key}\x00{voter.voter}"))
    if rng.random() < p:
        return voter.gold
    wrong = [option for option in voter.options if _oracle_fold(option) != _oracle_fold(voter.gold)]
    return rng.choice(wrong) if wrong else None


def _shown_answer(text: str, voter: SimulatedVoter) -> str | None:
    """The option (or the gold short answer) an answer shown to the oracle gives, read as the
    oracle writes one: its first line; None when it gives none of them."""
    known = [*voter.options] if voter.options else [voter.gold]
    return next((option for option in known if _reads_as(text, option)), None)


def _deliberated(spec: OracleSpec, belief: str | None, brief: RequestBrief) -> str | None:
    """The belief an oracle holds after a round that shows it answers: its current answer (its
    own shown answer, else its first belief), moved by persuasion or herding, each drawn once per
    question, voter and set of answers shown (the same request, the same move). Shown nothing
    (an answer asked for alone), it keeps its belief."""
    voter = brief.voter
    shown_texts = brief.texts()
    if voter is None or not shown_texts:
        return belief
    shown = [answer for answer in (_shown_answer(text, voter) for text in shown_texts.values()) if answer is not None]
    own = shown_texts.get(brief.own) if brief.own else None
    current = (_shown_answer(own, voter) if own is not None else None) or belief
    if not spec.deliberates or not shown:
        return current
    seen = hashlib.sha256("\x00".join(f"{label}\x01{text}" for label, text in shown_texts.items()).encode()).hexdigest()
    rng = random.Random(digest(f"oracle-deliberates\x00{voter.key}\x00{voter.voter}\x00{brief.task}\x00{seen}"))
    persuaded, herded = rng.random(), rng.random()
    gold = next((answer for answer in shown if _oracle_fold(answer) == _oracle_fold(voter.gold)), None)
    if gold is not None and persuaded < spec.persuade:
        return gold
    if herded < spec.herd:
        return most_common(shown, current)
    return current


def most_common(shown: Sequence[str], current: str | None) -> str:
    """The answer shown most often; of several, the oracle's own when it is one of them, else
    the one shown first."""
    counts = {answer: shown.count(answer) for answer in shown}
    top = max(counts.values())
    tied = [answer for answer in counts if counts[answer] == top]
    return current if current in tied else tied[0]


def oracle_confidence(spec: OracleSpec, voter: SimulatedVoter | None) -> float:
    """The confidence it reports, from 0 to 100: its fixed number or its p, read with a normal
    error of `noise` drawn once per question and voter."""
    if not spec.noise or voter is None:
        return spec.reported()
    rng = random.Random(digest(f"oracle-confidence\x00{voter.key}\x00{voter.voter}"))
    return noisy_reading(spec.reported(), spec.noise, rng)


def noisy_reading(confidence: float, noise: float, rng: random.Random) -> float:
    """A confidence (0 to 100) read with a normal error of standard deviation `noise` (in
    probability), kept inside [0, 100] and rounded to a tenth. Eval's theory draws with it too."""
    reading = confidence / 100 + rng.gauss(0.0, noise)
    return round(min(1.0, max(0.0, reading)) * 100, 1)


def _oracle_answer(p: float, belief: str | None) -> str:
    """The answer alone on the first line, where eval's grading looks first."""
    return f"{belief if belief is not None else 'I do not know.'}\n\n{SIMULATED} A simulated voter, right with probability {p:g}."


def oracle_vote(spec: OracleSpec, belief: str | None, brief: RequestBrief) -> str:
    """confer: the first answer that gives its belief after deliberating (its own, failing
    that), that belief as its revision, at the confidence it reports."""
    blocks = brief.texts()
    held = _deliberated(spec, belief, brief)
    own_label = brief.own if brief.own in blocks else None
    fallback = own_label or next(iter(blocks), "A")
    label = next((key for key, text in blocks.items() if held is not None and _reads_as(text, held)), fallback)
    rationale = f"{SIMULATED} Answer {label} gives the answer this voter holds."
    return json.dumps(
        {
            "chosen_label": label,
            "revised_answer": _oracle_answer(spec.p, held),
            "confidence": oracle_confidence(spec, brief.voter),
            "rationale": rationale,
        }
    )


def _oracle_review(spec: OracleSpec, belief: str | None, brief: RequestBrief, prefix: str) -> str:
    """council: the answers that give its belief (after deliberating) first, then the rest,
    each group in the order shown."""
    shown = brief.texts()
    held = _deliberated(spec, belief, brief)
    agree = [label for label, text in shown.items() if held is not None and _reads_as(text, held)]
    order = agree + [label for label in shown if label not in agree]
    lines = [f"{SIMULATED} A simulated reviewer: the answers that agree with it come first.", "", "FINAL RANKING:"]
    return "\n".join(lines + [f"{place}. {prefix}{label}" for place, label in enumerate(order, start=1)])


def oracle_review(spec: OracleSpec, belief: str | None, brief: RequestBrief) -> str:
    """An anonymous council's review: answers named `Model A`, …"""
    return _oracle_review(spec, belief, brief, "Model ")


def oracle_review_named(spec: OracleSpec, belief: str | None, brief: RequestBrief) -> str:
    """A council's review that names the authors."""
    return _oracle_review(spec, belief, brief, "")


def oracle_synthesis(spec: OracleSpec, belief: str | None, brief: RequestBrief) -> str:
    """council's chairman reports the answer the reviews ranked first (its own belief when no
    ranking can be read): the council's answer is its members' aggregate, not one voter's."""
    answers = brief.texts()
    top = brief.ranking[0] if brief.ranking else None
    if top is None or top not in answers:
        return _oracle_answer(spec.p, belief)
    head = next((line.strip() for line in answers[top].splitlines() if line.strip()), "")
    return f"{head}\n\n{SIMULATED} The chairman reports the answer the panel ranked first."


def oracle_ballot(spec: OracleSpec, belief: str | None, brief: RequestBrief) -> str:
    options = list(brief.voter.options) if brief.voter and brief.voter.options else list(brief.options)
    if belief is None:
        return f"{SIMULATED} I do not know."
    ranking = [belief, *(option for option in options if option != belief)]
    reason = f"{SIMULATED} A simulated voter, right with probability {spec.p:g}."
    confidence = oracle_confidence(spec, brief.voter)
    return json.dumps({"choice": belief, "ranking": ranking, "confidence": confidence, "reason": reason})


def oracle_revision(spec: OracleSpec, belief: str | None, brief: RequestBrief) -> str:
    """Delphi, from round 2 on: its answer after deliberating, changed when it moved."""
    shown = brief.texts()
    own = shown.get(brief.own) if brief.own else None
    held = _deliberated(spec, belief, brief)
    changed = own is None or not (held is not None and _reads_as(own, held))
    return json.dumps({"analysis": _oracle_answer(spec.p, held), "changed": changed})


def oracle_judge(spec: OracleSpec, belief: str | None, brief: RequestBrief) -> str:
    """An oracle judging an answer compares its first line with the brief's reference answer."""
    graded = brief.quoted[0].text if brief.quoted else ""
    correct = brief.reference is not None and _reads_as(graded, brief.reference.strip())
    reason = f"{SIMULATED} the answer's first line {'is' if correct else 'is not'} the reference answer"
    return json.dumps({"verdict": "CORRECT" if correct else "INCORRECT", "reason": reason})


def oracle_answer(spec: OracleSpec, belief: str | None, brief: RequestBrief) -> str:
    """An answer: its belief, moved by the answers the request shows (confer's answers in turn)."""
    return _oracle_answer(spec.p, _deliberated(spec, belief, brief))


# A simulated voter's reply to one kind of request: a function of the voter, its belief and the
# brief. Each kind names its own (`panel_cli.protocols.registry.RequestKind.oracle`).
OracleWriter = Callable[[OracleSpec, str | None, RequestBrief], str]


def oracle_reply(spec: OracleSpec, brief: RequestBrief, write: OracleWriter | None = None) -> str:
    """The reply of `demo/oracle@p?knobs` to a request, by the writer of its kind (`write`);
    a kind without one gets the voter's belief alone, on the first line."""
    belief = _oracle_belief(spec.p, brief.voter, brief)
    if write is None:
        return _oracle_answer(spec.p, belief)
    return write(spec, belief, brief)
