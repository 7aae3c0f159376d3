"""`demo/<persona>`: an offline, deterministic stand-in for real models.

The gateway serves the personas in-process (`panel_cli.llm.demo_route`) and hands each call
its brief (`panel_cli.llm.brief`): what the engine asks for (an answer, a vote, a review, a
plan…), the question, the texts it quotes by label. A persona answers from the brief alone,
in the shape asked for and in its own voice, marked as simulated; it never reads the prompt,
so a reworded prompt changes no demo answer. The same persona, brief and seed always give the
same text.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import os
import random
import re
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from panel_cli.llm.brief import RequestBrief, SimulatedVoter
from panel_cli.tasks import Task
from panel_cli.tools.calls import RequestedCall

SIMULATED = "[simulated]"
DEFAULT_DELAY = 0.8
# A streamed demo reply comes a few words at a time: its first words after half the think
# time, the rest over the other half.
STREAM_WORDS = 3

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

# Two schools of thought. Every persona speaks for one of them (by its `bias`), in its own
# opening words, and personas of one school give the same two points for a question: their
# answers share most of their words, so ensemble's majority mode finds a real majority.
SCHOOLS: tuple[tuple[str, ...], ...] = (
    (
        "Start with the option you can reverse cheaply, and measure it on your real workload before you commit.",
        "Keep the design simple and write down what would make you change course.",
        "Run a small pilot with real users before the full rollout.",
    ),
    (
        "Commit to the mainstream choice now, because its community has already solved most problems you will meet.",
        "Ship the first version quickly and improve it from what production teaches you.",
        "Give one person clear ownership so that decisions do not stall.",
    ),
)
QUESTION_ECHO_LIMIT = 1000


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def _rng(persona: str, brief: RequestBrief, seed: int) -> random.Random:
    """Seeded by everything the brief says, so the same request gives the same demo run."""
    return random.Random(_digest(f"{persona}\x00{seed}\x00{brief.model_dump_json()}"))


def _question(brief: RequestBrief) -> str:
    """The question, on one line; a very long one is cut at a word, visibly."""
    text = " ".join(brief.question.split())
    if len(text) <= QUESTION_ECHO_LIMIT:
        return text
    return text[:QUESTION_ECHO_LIMIT].rsplit(" ", 1)[0] + " …"


def _quality(text: str, persona: str) -> float:
    """How much a persona likes an answer: shared by all personas (distinct words), with a
    small persona-specific nudge, so demo panels mostly agree and converge."""
    words = {word.lower() for word in re.findall(r"[A-Za-z']+", text)}
    nudge = int(hashlib.sha256(f"{persona}{text}".encode()).hexdigest()[:4], 16) / 65535
    return len(words) + 3 * nudge


def _answer(persona: str, brief: RequestBrief, seed: int) -> str:
    """The persona's opening, then its school's two points for this question. The draw is the
    same for every persona, so personas of one school make the same points."""
    voice = PERSONAS[persona]
    question = _question(brief)
    school = SCHOOLS[(voice["bias"] + _digest(question)) % len(SCHOOLS)]
    points = _rng("", brief, seed).sample(school, k=2)
    return f"{SIMULATED} {voice['opening']} On “{question}”: {points[0]} {points[1]}"


def _confer_vote(persona: str, brief: RequestBrief, seed: int) -> str:
    """Vote for the answer this persona rates best, and keep its own answer as its revision:
    the block then stays stable, so a demo panel converges the way a real one tends to."""
    rng = _rng(persona, brief, seed)
    blocks = brief.texts()
    if not blocks:
        return json.dumps(
            {
                "chosen_label": "A",
                "revised_answer": _answer(persona, brief, seed),
                "confidence": 50,
                "rationale": f"{SIMULATED} nothing to compare",
            }
        )
    label = max(blocks, key=lambda key: (_quality(blocks[key], persona), -ord(key[0])))
    revised = blocks[brief.own] if brief.own in blocks else blocks[label]
    return json.dumps(
        {
            "chosen_label": label,
            "revised_answer": revised,
            "confidence": 55 + rng.randint(0, 40),
            "rationale": f"{SIMULATED} Answer {label} is the most complete; {PERSONAS[persona]['points'][0].lower()}",
        }
    )


def _review(persona: str, brief: RequestBrief, prefix: str) -> str:
    """A review ranking every answer shown, best first, each named as it was shown: `Model A`
    in an anonymous council (`prefix` "Model "), the member's name in one that is not."""
    blocks = brief.texts()
    order = sorted(blocks, key=lambda key: (-_quality(blocks[key], persona), key))
    lines = [f"{SIMULATED} Review in the voice of the {persona}."]
    lines += [
        f"{prefix}{key}: {'strong and specific' if key == order[0] else 'reasonable, but less complete'}."
        for key in blocks
    ]
    lines += ["", "FINAL RANKING:"] + [f"{place}. {prefix}{key}" for place, key in enumerate(order, start=1)]
    return "\n".join(lines)


def _council_review(persona: str, brief: RequestBrief, seed: int) -> str:
    return _review(persona, brief, "Model ")


def _council_review_named(persona: str, brief: RequestBrief, seed: int) -> str:
    return _review(persona, brief, "")


def _synthesis(persona: str, brief: RequestBrief, seed: int) -> str:
    blocks = brief.texts()
    best = max(blocks.values(), key=lambda text: _quality(text, persona)) if blocks else _answer(persona, brief, seed)
    core = best.replace(SIMULATED, "").strip()
    return f"{SIMULATED} Synthesis by the {persona}: the panel converges on one recommendation.\n\n{core}\n\nWhere members differed, the safer, reversible step comes first."


# Personas that answer a ballot in plain prose, as a model without structured output does:
# the vote engine then reads their choice from the text.
PROSE_VOTERS = frozenset({"skeptic", "historian"})


def _ballot(persona: str, brief: RequestBrief, seed: int) -> str:
    """A ballot on the brief's options. How much an option appeals is mostly shared by every
    persona, drawn from the question and the option, plus a persona's own nudge: demo panels
    mostly agree and sometimes split. Prose voters name their choice alone, so it reads
    unambiguously."""
    options = list(brief.options) or ["yes", "no"]
    question = _question(brief)

    def appeal(option: str) -> float:
        shared = _digest(f"{question}\x00{option}") / 2**64
        own = _digest(f"{persona}\x00{question}\x00{option}") / 2**64
        return shared + 0.6 * own

    ranking = sorted(options, key=lambda option: -appeal(option))
    voice = PERSONAS[persona]
    if persona in PROSE_VOTERS:
        return f"{SIMULATED} {voice['opening']} Weighing it all, my vote goes to {ranking[0]}."
    rng = _rng(persona, brief, seed)
    reason = f"{SIMULATED} {rng.choice(voice['points'])}"
    return json.dumps(
        {"choice": ranking[0], "ranking": ranking, "confidence": 55 + rng.randint(0, 40), "reason": reason}
    )


ADOPTED = "Having weighed the panel, I also agree:"


def _critic(persona: str, brief: RequestBrief, seed: int) -> str:
    """Reject once, then approve: in review round 1 the worker whose deliverable this persona
    rates lowest is sent back with a concrete request; every later round approves."""
    deliverables = brief.texts()
    if deliverables and brief.round in (None, 1):
        target = min(deliverables, key=lambda worker: (_quality(deliverables[worker], persona), worker))
        return json.dumps({"verdict": "REJECTED", "feedback": {target: "Add concrete numbers and one worked example."}})
    return json.dumps({"verdict": "APPROVED", "feedback": {}})


def _school_points(text: str) -> list[str]:
    """The demo's stock points a text makes, in the order SCHOOLS lists them."""
    return [point for school in SCHOOLS for point in school if point in text]


def _delphi_contribution(persona: str, brief: RequestBrief, seed: int) -> str:
    """A Delphi revision: an expert takes up one point of another school the first time it
    sees one, and reports no change once it has (or when nobody says anything new), so a
    demo panel changes in round 2 and settles in round 3."""
    experts = brief.texts()
    own = experts.get(brief.own) if brief.own else None
    if own is None:
        return json.dumps({"analysis": _answer(persona, brief, seed), "changed": True})
    if ADOPTED not in own:
        others = sorted(
            (text for label, text in experts.items() if label != brief.own), key=lambda text: -_quality(text, persona)
        )
        new = [point for text in others for point in _school_points(text) if point not in own]
        if new:
            return json.dumps({"analysis": f"{own} {ADOPTED} {new[0]}", "changed": True})
    return json.dumps({"analysis": own, "changed": False})


def _delphi_synthesis(persona: str, brief: RequestBrief, seed: int) -> str:
    """Consensus: the points every expert's latest contribution makes; divergence: those only
    some make, with who makes them."""
    latest: dict[str, tuple[int, str]] = {}
    for entry in brief.quoted:
        round_index = entry.round or 0
        if round_index >= latest.get(entry.label, (0, ""))[0]:
            latest[entry.label] = (round_index, entry.text)
    points: dict[str, list[str]] = {}
    for label, (_, text) in sorted(latest.items()):
        for point in _school_points(text):
            points.setdefault(point, []).append(label)
    shared = [point for point, who in points.items() if len(who) == len(latest)]
    split = [
        f"{point} (Expert{'s' if len(who) > 1 else ''} {', '.join(who)})"
        for point, who in points.items()
        if len(who) < len(latest)
    ]
    rounds = max((entry[0] for entry in latest.values()), default=0)
    return "\n".join(
        [
            f"{SIMULATED} Delphi synthesis by the {persona}, from {len(latest)} experts over {rounds} round{'s' if rounds != 1 else ''}.",
            "",
            "## Points of consensus",
            *([f"- {point}" for point in shared] or ["- No point is shared by every expert yet."]),
            "",
            "## Points of divergence",
            *([f"- {point}" for point in split] or ["- None left: every expert makes the same points."]),
            "",
            "## Recommendation",
            f"{PERSONAS[persona]['opening']} Act on the points of consensus first, and settle each divergent one with a small, reversible test.",
        ]
    )


def _supervise_work(persona: str, brief: RequestBrief, seed: int) -> str:
    task = " ".join((brief.assignment or "").split()) or "the task"
    voice = PERSONAS[persona]
    point = _rng(persona, brief, seed).choice(voice["points"])
    return f"{SIMULATED} Deliverable for “{task}”, in the voice of the {persona}: {voice['opening']} {point}"


def _supervise_correction(persona: str, brief: RequestBrief, seed: int) -> str:
    """The worker's first deliverable (the one its work brief gives it), corrected as the
    critic's feedback asks."""
    asked = " ".join((brief.feedback or "").split()) or "the critic's points"
    work = RequestBrief(task=Task.SUPERVISE_WORK, question=brief.question, assignment=brief.assignment)
    core = _supervise_work(persona, work, seed).removeprefix(SIMULATED).strip()
    return f"{SIMULATED} Corrected. {core} As the critic asked: {asked.rstrip('.')}; for example, 3 of 4 pilot users finished in under 5 minutes."


def _supervise_synthesis(persona: str, brief: RequestBrief, seed: int) -> str:
    deliverables = brief.texts()
    sections = [f"### {name}\n\n{' '.join(text.replace(SIMULATED, '').split())}" for name, text in deliverables.items()]
    count = f"{len(deliverables)} deliverable{'s' if len(deliverables) != 1 else ''}"
    return (
        f"{SIMULATED} Consolidated by the {persona} from {count}.\n\n"
        + "\n\n".join(sections)
        + f"\n\nTogether: {PERSONAS[persona]['points'][0]}"
    )


# What a demo plan asks of each kind of worker; another kind gets a generic title.
_PLAN_TITLES = {
    "research": ("Gather the facts", "Look for the risks"),
    "analysis": ("Weigh the options", "Size the risks"),
    "writing": ("Write the answer", "Write up the risks"),
}


def _plan_title(worker: str, branch: int) -> str:
    titles = _PLAN_TITLES.get(worker.casefold())
    return titles[branch] if titles else f"{worker.title()} work" + (" on the risks" if branch else "")


def _plan(persona: str, brief: RequestBrief, seed: int) -> str:
    """A valid plan with two parallel branches for the brief's workers: the main path through
    every worker but the last, a short risk check by the first, and the last worker joining
    both. A re-plan gets the same valid plan."""
    workers = list(brief.workers) or ["research", "analysis", "writing"]
    path, last = (workers[:-1][:20], workers[-1]) if len(workers) > 1 else (workers, workers[0])
    question = _question(brief)
    tasks: list[dict[str, Any]] = []

    def add(worker: str, branch: int, depends_on: list[str]) -> str:
        task_id = f"t{len(tasks) + 1}"
        title = _plan_title(worker, branch)
        description = f"{SIMULATED} {title} for: {question}"
        tasks.append(
            {
                "task_id": task_id,
                "worker": worker,
                "title": title,
                "description": description,
                "depends_on": depends_on,
                "priority": len(tasks) + 1,
            }
        )
        return task_id

    main = add(path[0], 0, [])
    risks = add(path[0], 1, [])
    for worker in path[1:]:
        main = add(worker, 0, [main])
    add(last, 0, [main, risks])
    return json.dumps({"subtasks": tasks})


def _orchestrate_task(persona: str, brief: RequestBrief, seed: int) -> str:
    """A worker's output: its kind, its subtask, one of its persona's points, and the
    subtasks it built on."""
    worker, task_id = brief.worker or "team", brief.subtask or "?"
    title = (brief.title or "").strip() or "the subtask"
    inputs = [entry.label for entry in brief.quoted]
    voice = PERSONAS[persona]
    basis = f" It builds on {', '.join(inputs)}." if inputs else ""
    return (
        f"{SIMULATED} {title} ({task_id}, the {worker} worker, in the voice of the {persona}): "
        f"{voice['opening']} {_rng(persona, brief, seed).choice(voice['points'])}{basis}"
    )


def _orchestrate_synthesis(persona: str, brief: RequestBrief, seed: int) -> str:
    """The chairman's answer: one line per output it was given, then its own recommendation."""
    outputs = brief.texts()
    lines = [f"- {label}: {' '.join(text.replace(SIMULATED, '').split())}" for label, text in outputs.items()]
    return (
        f"{SIMULATED} Synthesis by the {persona} from {len(outputs)} subtask output{'s' if len(outputs) != 1 else ''}.\n\n"
        + "\n".join(lines)
        + f"\n\nTogether: {PERSONAS[persona]['points'][0]}"
    )


def _judge(persona: str, brief: RequestBrief, seed: int) -> str:
    score = _rng(persona, brief, seed).randint(50, 95)
    return json.dumps({"score": score, "reason": f"{SIMULATED} judged by the {persona}"})


Writer = Callable[[str, RequestBrief, int], str]
_WRITERS: dict[Task, Writer] = {
    Task.ANSWER: _answer,
    Task.CONFER_VOTE: _confer_vote,
    Task.COUNCIL_REVIEW: _council_review,
    Task.COUNCIL_REVIEW_NAMED: _council_review_named,
    Task.COUNCIL_SYNTHESIS: _synthesis,
    Task.SYNTHESIS: _synthesis,
    Task.BALLOT: _ballot,
    Task.CRITIC: _critic,
    Task.PLAN: _plan,
    Task.JUDGE: _judge,
    Task.ORCHESTRATE_TASK: _orchestrate_task,
    Task.ORCHESTRATE_SYNTHESIS: _orchestrate_synthesis,
    Task.DELPHI_CONTRIBUTION: _delphi_contribution,
    Task.DELPHI_SYNTHESIS: _delphi_synthesis,
    Task.SUPERVISE_WORK: _supervise_work,
    Task.SUPERVISE_CORRECTION: _supervise_correction,
    Task.SUPERVISE_SYNTHESIS: _supervise_synthesis,
}


def demo_reply(persona: str, brief: RequestBrief, seed: int = 0) -> str:
    """The deterministic reply of a persona to a request, from its brief."""
    spec = oracle_spec(persona)
    if spec is not None:
        return oracle_reply(spec, brief)
    if persona not in PERSONAS:
        raise ValueError(f"unknown demo persona '{persona}'; choose one of {', '.join(PERSONAS)}")
    return _WRITERS[brief.task](persona, brief, seed)


def demo_delay() -> float:
    try:
        return max(0.0, float(os.environ.get("PANEL_DEMO_DELAY", DEFAULT_DELAY)))
    except ValueError:
        return DEFAULT_DELAY


def demo_pieces(text: str) -> list[str]:
    """A text in pieces of `STREAM_WORDS` words, each with the spaces after it: joined, the text."""
    words = re.findall(r"\S+\s*|\s+", text)
    return ["".join(words[start : start + STREAM_WORDS]) for start in range(0, len(words), STREAM_WORDS)] or [""]


# Simulated voters of known accuracy -----------------------------------------------------------
#
# `demo/oracle@0.7` is right with probability 0.7 on each question, independently of every other
# voter and question, and otherwise holds a wrong option drawn at random: voters whose accuracy is
# known, so that `panel eval` can be checked against theory. An oracle learns the gold answer only
# from its brief's `voter`, which `panel eval` gives the gateway for its simulated members
# (`brief.simulated_voters`) and the gateway never sends anywhere: no question text or answer can
# forge it, and no real model is ever told the gold answer.
#
# What an oracle holds for a question (its belief) is drawn once from the eval's key (its seed and
# the question) and the voter's name, so it answers, votes, ranks and casts its ballot on the same
# belief in every protocol: confer, council and vote differ only in how they combine the beliefs.
#
# Knobs after a `?` (`demo/oracle@0.6?herd=0.3&persuade=0.2&confidence=p`) make it deliberate and
# say how sure it is (README, "Simulated voters"):
#
# - `herd`: in a round that shows it the others' answers (a confer vote, a council review, a
#   Delphi revision, or confer's answer stage under `answer_order: sequential`, which shows each
#   member the answers given before its turn), it moves to the most common answer shown with this
#   probability: herding, or conformity, which spends a voter's own evidence on what the crowd
#   already says. Answering in turn, herders follow the first answers, right or wrong: a cascade.
# - `persuade`: in such a round, when one of the answers shown is right, it moves to it with this
#   probability: persuasion by a correct argument, which a real panel hopes for.
#   Persuasion is drawn first; a voter it does not move may still herd.
# - `confidence`: what it reports as its confidence, `p` (its own accuracy: calibrated) or a
#   number from 0 to 100 (the default, 80, for every oracle).
# - `noise`: the standard deviation of a normal error on that report, per question (a noisy
#   reading of its own accuracy), kept inside [0, 1].

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
        return random.Random(_digest(f"oracle\x00{_question(brief)}")).choice(options) if options else None
    rng = random.Random(_digest(f"oracle\x00{voter.key}\x00{voter.voter}"))
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
    rng = random.Random(_digest(f"oracle-deliberates\x00{voter.key}\x00{voter.voter}\x00{brief.task}\x00{seen}"))
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
    rng = random.Random(_digest(f"oracle-confidence\x00{voter.key}\x00{voter.voter}"))
    return noisy_reading(spec.reported(), spec.noise, rng)


def noisy_reading(confidence: float, noise: float, rng: random.Random) -> float:
    """A confidence (0 to 100) read with a normal error of standard deviation `noise` (in
    probability), kept inside [0, 100] and rounded to a tenth. Eval's theory draws with it too."""
    reading = confidence / 100 + rng.gauss(0.0, noise)
    return round(min(1.0, max(0.0, reading)) * 100, 1)


def _oracle_answer(p: float, belief: str | None) -> str:
    """The answer alone on the first line, where eval's grading looks first."""
    return f"{belief if belief is not None else 'I do not know.'}\n\n{SIMULATED} A simulated voter, right with probability {p:g}."


def _oracle_vote(spec: OracleSpec, belief: str | None, brief: RequestBrief) -> str:
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


def _oracle_synthesis(p: float, belief: str | None, brief: RequestBrief) -> str:
    """council's chairman reports the answer the reviews ranked first (its own belief when no
    ranking can be read): the council's answer is its members' aggregate, not one voter's."""
    answers = brief.texts()
    top = brief.ranking[0] if brief.ranking else None
    if top is None or top not in answers:
        return _oracle_answer(p, belief)
    head = next((line.strip() for line in answers[top].splitlines() if line.strip()), "")
    return f"{head}\n\n{SIMULATED} The chairman reports the answer the panel ranked first."


def _oracle_ballot(spec: OracleSpec, belief: str | None, brief: RequestBrief) -> str:
    options = list(brief.voter.options) if brief.voter and brief.voter.options else list(brief.options)
    if belief is None:
        return f"{SIMULATED} I do not know."
    ranking = [belief, *(option for option in options if option != belief)]
    reason = f"{SIMULATED} A simulated voter, right with probability {spec.p:g}."
    confidence = oracle_confidence(spec, brief.voter)
    return json.dumps({"choice": belief, "ranking": ranking, "confidence": confidence, "reason": reason})


def _oracle_revision(spec: OracleSpec, belief: str | None, brief: RequestBrief) -> str:
    """Delphi, from round 2 on: its answer after deliberating, changed when it moved."""
    shown = brief.texts()
    own = shown.get(brief.own) if brief.own else None
    held = _deliberated(spec, belief, brief)
    changed = own is None or not (held is not None and _reads_as(own, held))
    return json.dumps({"analysis": _oracle_answer(spec.p, held), "changed": changed})


def _oracle_judge(brief: RequestBrief) -> str:
    """An oracle judging an answer compares its first line with the brief's reference answer."""
    graded = brief.quoted[0].text if brief.quoted else ""
    correct = brief.reference is not None and _reads_as(graded, brief.reference.strip())
    reason = f"{SIMULATED} the answer's first line {'is' if correct else 'is not'} the reference answer"
    return json.dumps({"verdict": "CORRECT" if correct else "INCORRECT", "reason": reason})


def oracle_reply(spec: OracleSpec, brief: RequestBrief) -> str:
    """The reply of `demo/oracle@p?knobs`, by the task its brief asks for."""
    belief = _oracle_belief(spec.p, brief.voter, brief)
    match brief.task:
        case Task.CONFER_VOTE:
            return _oracle_vote(spec, belief, brief)
        case Task.COUNCIL_REVIEW:
            return _oracle_review(spec, belief, brief, "Model ")
        case Task.COUNCIL_REVIEW_NAMED:
            return _oracle_review(spec, belief, brief, "")
        case Task.COUNCIL_SYNTHESIS:
            return _oracle_synthesis(spec.p, belief, brief)
        case Task.BALLOT:
            return _oracle_ballot(spec, belief, brief)
        case Task.JUDGE:
            return _oracle_judge(brief)
        case Task.DELPHI_CONTRIBUTION:
            return _oracle_revision(spec, belief, brief)
        case Task.ANSWER:
            return _oracle_answer(spec.p, _deliberated(spec, belief, brief))
        case _:
            return _oracle_answer(spec.p, belief)


# Tools ------------------------------------------------------------------------------------------
#
# A persona offered tools looks something up once before it answers: it calls the tool it is
# offered (`lookup` when there is one) with the question as the query, then answers as usual and
# cites the first line of what it found. Offered no tools, it answers as it always did.

TOOL_QUERY_LIMIT = 80
CITATION_LIMIT = 200


def demo_tool_call(brief: RequestBrief, tools: Sequence[Any] | None, found: Sequence[str]) -> RequestedCall | None:
    """The tool call a persona makes when offered tools and its call has found nothing yet:
    one string argument of the chosen tool, filled with the question; None otherwise."""
    if not tools or found:
        return None
    functions = [tool.get("function", {}) for tool in tools if isinstance(tool, dict)]
    usable = [(function, _string_parameter(function)) for function in functions]
    usable = [(function, parameter) for function, parameter in usable if parameter is not None and function.get("name")]
    if not usable:
        return None
    function, parameter = next(((f, p) for f, p in usable if f["name"] == "lookup"), usable[0])
    query = _question(brief)
    if len(query) > TOOL_QUERY_LIMIT:
        query = query[:TOOL_QUERY_LIMIT].rsplit(" ", 1)[0]
    arguments = json.dumps({parameter: query})
    call_id = f"call_{_digest(brief.model_dump_json() + arguments) % 10**12}"
    return RequestedCall(id=call_id, name=str(function["name"]), arguments=arguments)


def _string_parameter(function: dict[str, Any]) -> str | None:
    """The tool's first string parameter, the required ones first."""
    parameters = function.get("parameters") or {}
    properties = parameters.get("properties") or {}
    required = [name for name in parameters.get("required") or [] if name in properties]
    for name in [*required, *properties]:
        if isinstance(properties.get(name), dict) and properties[name].get("type") == "string":
            return str(name)
    return None


def cite_tool_results(text: str, found: Sequence[str]) -> str:
    """A persona's answer, with the first line of what its tools found (or that they failed)."""
    if not found:
        return text
    lines = [line.strip() for line in found[0].splitlines() if line.strip()]
    line = next((line for line in lines if not line.startswith("#")), lines[0] if lines else "nothing")
    if len(line) > CITATION_LIMIT:
        line = line[:CITATION_LIMIT].rsplit(" ", 1)[0] + " …"
    if line.startswith("Error:"):
        citation = f"I tried to look this up, but the tool failed ({line.removeprefix('Error:').strip()})."
    else:
        citation = f"From what I looked up: “{line}”"
    # A synthesis quoting an answer that already cites the same line does not cite it twice.
    return text if citation in text else f"{text}\n\n{citation}"
