"""`demo/<persona>`: an offline, deterministic stand-in for real models.

The gateway serves the personas in-process (`panel_cli.llm.demo_route`) and hands each call
its brief (`panel_cli.llm.brief`): what the engine asks for (an answer, a vote, a review, a
plan…), the question, the texts it quotes by label. A persona answers from the brief alone,
in the shape asked for and in its own voice, marked as simulated; it never reads the prompt,
so a reworded prompt changes no demo answer. The same persona, brief and seed always give the
same text. Which writer answers a request is its kind's (the spec that declares the kind names
it): those of the built-in protocols are here. The personas' voices are `panel_cli.models.personas`'s; a simulated voter
(`demo/oracle@p`) answers as `panel_cli.simulation.voters` plays it.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
from collections.abc import Callable, Sequence
from typing import Any

from panel_cli.llm.brief import RequestBrief
from panel_cli.llm.tool_calls import RequestedCall
from panel_cli.models.personas import PERSONAS, oracle_spec
from panel_cli.protocols.registry import request_kind, resolve
from panel_cli.simulation.seeded import SIMULATED, digest, echoed_question
from panel_cli.simulation.voters import oracle_reply
from panel_cli.tasks import Task

DEFAULT_DELAY = 0.8
# A streamed demo reply comes a few words at a time: its first words after half the think
# time, the rest over the other half.
STREAM_WORDS = 3


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


def _rng(persona: str, brief: RequestBrief, seed: int) -> random.Random:
    """Seeded by everything the brief says, so the same request gives the same demo run."""
    return random.Random(digest(f"{persona}\x00{seed}\x00{brief.model_dump_json()}"))


def _quality(text: str, persona: str) -> float:
    """How much a persona likes an answer: shared by all personas (distinct words), with a
    small persona-specific nudge, so demo panels mostly agree and converge."""
    words = {word.lower() for word in re.findall(r"[A-Za-z']+", text)}
    nudge = int(hashlib.sha256(f"{persona}{text}".encode()).hexdigest()[:4], 16) / 65535
    return len(words) + 3 * nudge


def answer(persona: str, brief: RequestBrief, seed: int) -> str:
    """The persona's opening, then its school's two points for this question. The draw is the
    same for every persona, so personas of one school make the same points."""
    voice = PERSONAS[persona]
    question = echoed_question(brief)
    school = SCHOOLS[(voice["bias"] + digest(question)) % len(SCHOOLS)]
    points = _rng("", brief, seed).sample(school, k=2)
    return f"{SIMULATED} {voice['opening']} On “{question}”: {points[0]} {points[1]}"


def confer_vote(persona: str, brief: RequestBrief, seed: int) -> str:
    """Vote for the answer this persona rates best, and keep its own answer as its revision:
    the block then stays stable, so a demo panel converges the way a real one tends to."""
    rng = _rng(persona, brief, seed)
    blocks = brief.texts()
    if not blocks:
        return json.dumps(
            {
                "chosen_label": "A",
                "revised_answer": answer(persona, brief, seed),
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


def council_review(persona: str, brief: RequestBrief, seed: int) -> str:
    return _review(persona, brief, "Model ")


def council_review_named(persona: str, brief: RequestBrief, seed: int) -> str:
    return _review(persona, brief, "")


def synthesis(persona: str, brief: RequestBrief, seed: int) -> str:
    blocks = brief.texts()
    best = max(blocks.values(), key=lambda text: _quality(text, persona)) if blocks else answer(persona, brief, seed)
    core = best.replace(SIMULATED, "").strip()
    return f"{SIMULATED} Synthesis by the {persona}: the panel converges on one recommendation.\n\n{core}\n\nWhere members differed, the safer, reversible step comes first."


# Personas that answer a ballot in plain prose, as a model without structured output does:
# the vote engine then reads their choice from the text.
PROSE_VOTERS = frozenset({"skeptic", "historian"})


def ballot(persona: str, brief: RequestBrief, seed: int) -> str:
    """A ballot on the brief's options. How much an option appeals is mostly shared by every
    persona, drawn from the question and the option, plus a persona's own nudge: demo panels
    mostly agree and sometimes split. Prose voters name their choice alone, so it reads
    unambiguously."""
    options = list(brief.options) or ["yes", "no"]
    question = echoed_question(brief)

    def appeal(option: str) -> float:
        shared = digest(f"{question}\x00{option}") / 2**64
        own = digest(f"{persona}\x00{question}\x00{option}") / 2**64
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


def critic(persona: str, brief: RequestBrief, seed: int) -> str:
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


def delphi_contribution(persona: str, brief: RequestBrief, seed: int) -> str:
    """A Delphi revision: an expert takes up one point of another school the first time it
    sees one, and reports no change once it has (or when nobody says anything new), so a
    demo panel changes in round 2 and settles in round 3."""
    experts = brief.texts()
    own = experts.get(brief.own) if brief.own else None
    if own is None:
        return json.dumps({"analysis": answer(persona, brief, seed), "changed": True})
    if ADOPTED not in own:
        others = sorted(
            (text for label, text in experts.items() if label != brief.own), key=lambda text: -_quality(text, persona)
        )
        new = [point for text in others for point in _school_points(text) if point not in own]
        if new:
            return json.dumps({"analysis": f"{own} {ADOPTED} {new[0]}", "changed": True})
    return json.dumps({"analysis": own, "changed": False})


def delphi_synthesis(persona: str, brief: RequestBrief, seed: int) -> str:
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


def supervise_work(persona: str, brief: RequestBrief, seed: int) -> str:
    task = " ".join((brief.assignment or "").split()) or "the task"
    voice = PERSONAS[persona]
    point = _rng(persona, brief, seed).choice(voice["points"])
    return f"{SIMULATED} Deliverable for “{task}”, in the voice of the {persona}: {voice['opening']} {point}"


def supervise_correction(persona: str, brief: RequestBrief, seed: int) -> str:
    """The worker's first deliverable (the one its work brief gives it), corrected as the
    critic's feedback asks."""
    asked = " ".join((brief.feedback or "").split()) or "the critic's points"
    work = RequestBrief(task=Task.SUPERVISE_WORK, question=brief.question, assignment=brief.assignment)
    core = supervise_work(persona, work, seed).removeprefix(SIMULATED).strip()
    return f"{SIMULATED} Corrected. {core} As the critic asked: {asked.rstrip('.')}; for example, 3 of 4 pilot users finished in under 5 minutes."


def supervise_synthesis(persona: str, brief: RequestBrief, seed: int) -> str:
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


def plan(persona: str, brief: RequestBrief, seed: int) -> str:
    """A valid plan with two parallel branches for the brief's workers: the main path through
    every worker but the last, a short risk check by the first, and the last worker joining
    both. A re-plan gets the same valid plan."""
    workers = list(brief.workers) or ["research", "analysis", "writing"]
    path, last = (workers[:-1][:20], workers[-1]) if len(workers) > 1 else (workers, workers[0])
    question = echoed_question(brief)
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


def orchestrate_task(persona: str, brief: RequestBrief, seed: int) -> str:
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


def orchestrate_synthesis(persona: str, brief: RequestBrief, seed: int) -> str:
    """The chairman's answer: one line per output it was given, then its own recommendation."""
    outputs = brief.texts()
    lines = [f"- {label}: {' '.join(text.replace(SIMULATED, '').split())}" for label, text in outputs.items()]
    return (
        f"{SIMULATED} Synthesis by the {persona} from {len(outputs)} subtask output{'s' if len(outputs) != 1 else ''}.\n\n"
        + "\n".join(lines)
        + f"\n\nTogether: {PERSONAS[persona]['points'][0]}"
    )


def judge(persona: str, brief: RequestBrief, seed: int) -> str:
    score = _rng(persona, brief, seed).randint(50, 95)
    return json.dumps({"score": score, "reason": f"{SIMULATED} judged by the {persona}"})


# The demo reply to one kind of request: a function of the persona, the brief and the seed. Each
# kind's writer is named by the spec that declares the kind (`panel_cli.protocols.registry`).
Writer = Callable[[str, RequestBrief, int], str]


def demo_reply(persona: str, brief: RequestBrief, seed: int = 0) -> str:
    """The deterministic reply of a persona to a request, from its brief, by the writer its
    kind names (`panel_cli.protocols.registry.request_kind`; a kind no protocol declares is
    `UnknownRequestKind`, a mistake in the engine that asked)."""
    kind = request_kind(brief.task)
    spec = oracle_spec(persona)
    if spec is not None:
        return oracle_reply(spec, brief, None if kind.oracle is None else resolve(kind.oracle))
    if persona not in PERSONAS:
        raise ValueError(f"unknown demo persona '{persona}'; choose one of {', '.join(PERSONAS)}")
    write: Writer = resolve(kind.demo)
    return write(persona, brief, seed)


def demo_delay() -> float:
    try:
        return max(0.0, float(os.environ.get("PANEL_DEMO_DELAY", DEFAULT_DELAY)))
    except ValueError:
        return DEFAULT_DELAY


def demo_pieces(text: str) -> list[str]:
    """A text in pieces of `STREAM_WORDS` words, each with the spaces after it: joined, the text."""
    words = re.findall(r"\S+\s*|\s+", text)
    return ["".join(words[start : start + STREAM_WORDS]) for start in range(0, len(words), STREAM_WORDS)] or [""]


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
    query = echoed_question(brief)
    if len(query) > TOOL_QUERY_LIMIT:
        query = query[:TOOL_QUERY_LIMIT].rsplit(" ", 1)[0]
    arguments = json.dumps({parameter: query})
    call_id = f"call_{digest(brief.model_dump_json() + arguments) % 10**12}"
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
