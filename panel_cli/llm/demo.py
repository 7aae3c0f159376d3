"""`demo/<persona>`: an offline, deterministic stand-in for real models.

It is registered as a litellm custom provider so demo runs take the same gateway path as
real ones. It recognises what an engine wants from the task marker in the prompt
(`panel_cli.tasks`) and answers in that shape, in the persona's voice, marked as
simulated. The same persona, prompt and seed always give the same text; only the think
time (`PANEL_DEMO_DELAY`, seconds, 0 in tests) varies, so the live view has something to show.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import re
import time
from types import ModuleType
from typing import Any

from panel_cli.tasks import FENCE_TAG_PATTERN, Task, find_task

SIMULATED = "[simulated]"
DEFAULT_DELAY = 0.8

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

_QUESTION = re.compile(r"Question:\s*\n?(.+?)(?:\n\n|\n\[panel-task|$)", re.DOTALL)
_FENCE = re.compile(
    rf"^=== (?P<noun>Answer|Model|Response|Member|Review by|Output|Expert|Deliverable|Feedback for) (?P<label>.+?) \[(?P<tag>{FENCE_TAG_PATTERN})\] ===$", re.MULTILINE
)
_TAG = re.compile(rf"\[{FENCE_TAG_PATTERN}\]")
_OPTIONS = re.compile(r"Options:\s*\n((?:- .+\n?)+)")
_WORKERS = re.compile(r"Workers:\s*\n((?:- .+\n?)+)")


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def _rng(persona: str, prompt: str, seed: int) -> random.Random:
    """Seeded by the prompt without its fence tags, which are drawn afresh for every run: the
    same question gives the same demo run."""
    return random.Random(_digest(f"{persona}\x00{seed}\x00{_TAG.sub('[]', prompt)}"))


def _question(prompt: str) -> str:
    """The question, on one line; a very long one is cut at a word, visibly."""
    match = _QUESTION.search(prompt)
    text = " ".join((match.group(1) if match else prompt).split())
    if len(text) <= QUESTION_ECHO_LIMIT:
        return text
    return text[:QUESTION_ECHO_LIMIT].rsplit(" ", 1)[0] + " …"


def _fenced(prompt: str) -> dict[str, tuple[str, str]]:
    """label -> (noun, text) of every fenced text in the prompt. Only fences carrying the tag of
    the prompt's first fence count, so a fence line forged inside an answer is just text."""
    first = _FENCE.search(prompt)
    if first is None:
        return {}
    tag = first.group("tag")
    found: dict[str, tuple[str, str]] = {}
    for header in _FENCE.finditer(prompt):
        if header.group("tag") != tag:
            continue
        noun, label = header.group("noun"), header.group("label")
        if label in found:
            continue
        closing = f"\n=== end of {noun} {label} [{tag}] ==="
        end = prompt.find(closing, header.end())
        if end != -1:
            found[label] = (noun, prompt[header.end() : end].strip())
    return found


def _blocks(prompt: str) -> dict[str, str]:
    """Labelled answers (`Answer A`, `Model A`, `Response A`) in the prompt, by label."""
    return {label: text for label, (noun, text) in _fenced(prompt).items() if noun in ("Answer", "Model", "Response")}


def _listed(pattern: re.Pattern[str], prompt: str) -> list[str]:
    match = pattern.search(prompt)
    return [line[2:].strip() for line in match.group(1).splitlines() if line.startswith("- ")] if match else []


def _quality(text: str, persona: str) -> float:
    """How much a persona likes an answer: shared by all personas (distinct words), with a
    small persona-specific nudge, so demo panels mostly agree and converge."""
    words = {word.lower() for word in re.findall(r"[A-Za-z']+", text)}
    nudge = int(hashlib.sha256(f"{persona}{text}".encode()).hexdigest()[:4], 16) / 65535
    return len(words) + 3 * nudge


def _answer(persona: str, prompt: str, rng: random.Random) -> str:
    """The persona's opening, then its school's two points for this question. `rng` is the
    same for every persona (see `demo_reply`), so personas of one school make the same points."""
    voice = PERSONAS[persona]
    question = _question(prompt)
    school = SCHOOLS[(voice["bias"] + _digest(question)) % len(SCHOOLS)]
    points = rng.sample(school, k=2)
    return f"{SIMULATED} {voice['opening']} On “{question}”: {points[0]} {points[1]}"


def _confer_vote(persona: str, prompt: str, rng: random.Random) -> str:
    """Vote for the answer this persona rates best, and keep its own answer as its revision:
    the block then stays stable, so a demo panel converges the way a real one tends to."""
    blocks = _blocks(prompt)
    own = re.search(r"Your current answer is Answer ([A-Z]+)\.", prompt)
    if not blocks:
        return json.dumps({"chosen_label": "A", "revised_answer": _answer(persona, prompt, rng), "confidence": 50, "rationale": f"{SIMULATED} nothing to compare"})
    label = max(blocks, key=lambda key: (_quality(blocks[key], persona), -ord(key[0])))
    revised = blocks[own.group(1)] if own and own.group(1) in blocks else blocks[label]
    return json.dumps(
        {
            "chosen_label": label,
            "revised_answer": revised,
            "confidence": 55 + rng.randint(0, 40),
            "rationale": f"{SIMULATED} Answer {label} is the most complete; {PERSONAS[persona]['points'][0].lower()}",
        }
    )


def _council_review(persona: str, prompt: str, rng: random.Random) -> str:
    blocks = _blocks(prompt)
    order = sorted(blocks, key=lambda key: (-_quality(blocks[key], persona), key))
    lines = [f"{SIMULATED} Review in the voice of the {persona}."]
    for label in blocks:
        lines.append(f"Model {label}: {'strong and specific' if label == order[0] else 'reasonable, but less complete'}.")
    lines.append("")
    lines.append("FINAL RANKING:")
    lines += [f"{place}. Model {label}" for place, label in enumerate(order, start=1)]
    return "\n".join(lines)


def _council_review_named(persona: str, prompt: str, rng: random.Random) -> str:
    """A review for a council that is not anonymised: the answers are headed by member
    names (`Member gpt`), so the ranking names members instead of labels."""
    blocks = {label: text for label, (noun, text) in _fenced(prompt).items() if noun == "Member"}
    order = sorted(blocks, key=lambda name: (-_quality(blocks[name], persona), name))
    lines = [f"{SIMULATED} Review in the voice of the {persona}."]
    lines += [f"{name}: {'strong and specific' if name == order[0] else 'reasonable, but less complete'}." for name in blocks]
    lines += ["", "FINAL RANKING:"] + [f"{place}. {name}" for place, name in enumerate(order, start=1)]
    return "\n".join(lines)


def _synthesis(persona: str, prompt: str, rng: random.Random) -> str:
    blocks = _blocks(prompt)
    best = max(blocks.values(), key=lambda text: _quality(text, persona)) if blocks else _answer(persona, prompt, rng)
    core = best.replace(SIMULATED, "").strip()
    return f"{SIMULATED} Synthesis by the {persona}: the panel converges on one recommendation.\n\n{core}\n\nWhere members differed, the safer, reversible step comes first."


# Personas that answer a ballot in plain prose, as a model without structured output does:
# the vote engine then reads their choice from the text.
PROSE_VOTERS = frozenset({"skeptic", "historian"})


def _ballot(persona: str, prompt: str, rng: random.Random) -> str:
    """A ballot on the last options list in the prompt (a question cannot slip in options of
    its own). How much an option appeals is mostly shared by every persona, drawn from the
    question and the option, plus a persona's own nudge: demo panels mostly agree and
    sometimes split. Prose voters name their choice alone, so it reads unambiguously."""
    blocks = _OPTIONS.findall(prompt)
    options = [line[2:].strip() for line in blocks[-1].splitlines() if line.startswith("- ")] if blocks else ["yes", "no"]
    question = _question(prompt)

    def appeal(option: str) -> float:
        shared = _digest(f"{question}\x00{option}") / 2**64
        own = _digest(f"{persona}\x00{question}\x00{option}") / 2**64
        return shared + 0.6 * own

    ranking = sorted(options, key=lambda option: -appeal(option))
    voice = PERSONAS[persona]
    if persona in PROSE_VOTERS:
        return f"{SIMULATED} {voice['opening']} Weighing it all, my vote goes to {ranking[0]}."
    reason = f"{SIMULATED} {rng.choice(voice['points'])}"
    return json.dumps({"choice": ranking[0], "ranking": ranking, "confidence": 55 + rng.randint(0, 40), "reason": reason})


_REVIEW_ROUND = re.compile(r"Review round (\d+) of")
_OWN_CONTRIBUTION = re.compile(r"Your own contribution in round \d+ is Expert ([A-Z]+)\.")
_ROUND_LABEL = re.compile(r"^(?P<label>[A-Z]+) \(round (?P<round>\d+)\)$")
_YOUR_TASK = re.compile(r"Your task:\n(.+?)\n\n", re.DOTALL)
ADOPTED = "Having weighed the panel, I also agree:"


def _critic(persona: str, prompt: str, rng: random.Random) -> str:
    """Reject once, then approve: in review round 1 one worker (drawn from the prompt) is sent
    back with a concrete request; every later round approves."""
    workers = _listed(_WORKERS, prompt)
    found = _REVIEW_ROUND.search(prompt)
    if workers and (found is None or found.group(1) == "1"):
        target = workers[rng.randrange(len(workers))]
        return json.dumps({"verdict": "REJECTED", "feedback": {target: "Add concrete numbers and one worked example."}})
    return json.dumps({"verdict": "APPROVED", "feedback": {}})


def _school_points(text: str) -> list[str]:
    """The demo's stock points a text makes, in the order SCHOOLS lists them."""
    return [point for school in SCHOOLS for point in school if point in text]


def _delphi_contribution(persona: str, prompt: str, rng: random.Random) -> str:
    """A Delphi revision: an expert takes up one point of another school the first time it
    sees one, and reports no change once it has (or when nobody says anything new), so a
    demo panel changes in round 2 and settles in round 3."""
    experts = {label: text for label, (noun, text) in _fenced(prompt).items() if noun == "Expert"}
    found = _OWN_CONTRIBUTION.search(prompt)
    own_label = found.group(1) if found else None
    own = experts.get(own_label) if own_label else None
    if own is None:
        return json.dumps({"analysis": _answer(persona, prompt, rng), "changed": True})
    if ADOPTED not in own:
        others = sorted((text for label, text in experts.items() if label != own_label), key=lambda text: -_quality(text, persona))
        new = [point for text in others for point in _school_points(text) if point not in own]
        if new:
            return json.dumps({"analysis": f"{own} {ADOPTED} {new[0]}", "changed": True})
    return json.dumps({"analysis": own, "changed": False})


def _delphi_synthesis(persona: str, prompt: str, rng: random.Random) -> str:
    """Consensus: the points every expert's latest contribution makes; divergence: those only
    some make, with who makes them."""
    latest: dict[str, tuple[int, str]] = {}
    for label, (noun, text) in _fenced(prompt).items():
        found = _ROUND_LABEL.match(label)
        if noun == "Expert" and found and int(found.group("round")) >= latest.get(found.group("label"), (0, ""))[0]:
            latest[found.group("label")] = (int(found.group("round")), text)
    points: dict[str, list[str]] = {}
    for label, (_, text) in sorted(latest.items()):
        for point in _school_points(text):
            points.setdefault(point, []).append(label)
    shared = [point for point, who in points.items() if len(who) == len(latest)]
    split = [f"{point} (Expert{'s' if len(who) > 1 else ''} {', '.join(who)})" for point, who in points.items() if len(who) < len(latest)]
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


def _supervise_work(persona: str, prompt: str, rng: random.Random) -> str:
    found = _YOUR_TASK.search(prompt)
    task = " ".join(found.group(1).split()) if found else "the task"
    voice = PERSONAS[persona]
    return f"{SIMULATED} Deliverable for “{task}”, in the voice of the {persona}: {voice['opening']} {rng.choice(voice['points'])}"


def _supervise_correction(persona: str, prompt: str, rng: random.Random) -> str:
    """The worker's first deliverable (earlier in its own conversation), corrected as the
    latest feedback asks."""
    headers = [header for header in _FENCE.finditer(prompt) if header.group("noun") == "Feedback for"]
    feedback = _fenced_at(prompt, headers[-1]) if headers else []
    asked = " ".join(feedback[0].split()) if feedback else "the critic's points"
    first = re.search(rf"^{re.escape(SIMULATED)} Deliverable for .+$", prompt, re.MULTILINE)
    core = first.group(0).removeprefix(SIMULATED).strip() if first else _supervise_work(persona, prompt, rng).removeprefix(SIMULATED).strip()
    return f"{SIMULATED} Corrected. {core} As the critic asked: {asked.rstrip('.')}; for example, 3 of 4 pilot users finished in under 5 minutes."


def _fenced_at(prompt: str, header: re.Match[str]) -> list[str]:
    """The text of the fence that `header` opens, if it is closed."""
    closing = f"\n=== end of {header.group('noun')} {header.group('label')} [{header.group('tag')}] ==="
    end = prompt.find(closing, header.end())
    return [prompt[header.end() : end].strip()] if end != -1 else []


def _supervise_synthesis(persona: str, prompt: str, rng: random.Random) -> str:
    deliverables = {label: text for label, (noun, text) in _fenced(prompt).items() if noun == "Deliverable"}
    sections = [f"### {name}\n\n{' '.join(text.replace(SIMULATED, '').split())}" for name, text in deliverables.items()]
    count = f"{len(deliverables)} deliverable{'s' if len(deliverables) != 1 else ''}"
    return f"{SIMULATED} Consolidated by the {persona} from {count}.\n\n" + "\n\n".join(sections) + f"\n\nTogether: {PERSONAS[persona]['points'][0]}"


# What a demo plan asks of each kind of worker; another kind gets a generic title.
_PLAN_TITLES = {
    "research": ("Gather the facts", "Look for the risks"),
    "analysis": ("Weigh the options", "Size the risks"),
    "writing": ("Write the answer", "Write up the risks"),
}
_SUBTASK = re.compile(r"You are the (?P<worker>.+?) worker of a team answering it\. Your subtask is (?P<id>\S+): (?P<title>.*)")


def _plan_title(worker: str, branch: int) -> str:
    titles = _PLAN_TITLES.get(worker.casefold())
    return titles[branch] if titles else f"{worker.title()} work" + (" on the risks" if branch else "")


def _plan(persona: str, prompt: str, rng: random.Random) -> str:
    """A valid plan with two parallel branches for the workers the prompt lists: the main
    path through every worker but the last, a short risk check by the first, and the last
    worker joining both. A re-plan gets the same valid plan."""
    workers = _listed(_WORKERS, prompt) or ["research", "analysis", "writing"]
    path, last = (workers[:-1][:20], workers[-1]) if len(workers) > 1 else (workers, workers[0])
    question = _question(prompt)
    tasks: list[dict[str, Any]] = []

    def add(worker: str, branch: int, depends_on: list[str]) -> str:
        task_id = f"t{len(tasks) + 1}"
        title = _plan_title(worker, branch)
        description = f"{SIMULATED} {title} for: {question}"
        tasks.append({"task_id": task_id, "worker": worker, "title": title, "description": description, "depends_on": depends_on, "priority": len(tasks) + 1})
        return task_id

    main = add(path[0], 0, [])
    risks = add(path[0], 1, [])
    for worker in path[1:]:
        main = add(worker, 0, [main])
    add(last, 0, [main, risks])
    return json.dumps({"subtasks": tasks})


def _orchestrate_task(persona: str, prompt: str, rng: random.Random) -> str:
    """A worker's output: its kind, its subtask, one of its persona's points, and the
    subtasks it built on."""
    found = _SUBTASK.search(prompt)
    worker, task_id, title = (found.group("worker"), found.group("id"), found.group("title").strip()) if found else ("team", "?", "the subtask")
    inputs = [label for label, (noun, _) in _fenced(prompt).items() if noun == "Output"]
    voice = PERSONAS[persona]
    basis = f" It builds on {', '.join(inputs)}." if inputs else ""
    return (
        f"{SIMULATED} {title} ({task_id}, the {worker} worker, in the voice of the {persona}): "
        f"{voice['opening']} {rng.choice(voice['points'])}{basis}"
    )


def _orchestrate_synthesis(persona: str, prompt: str, rng: random.Random) -> str:
    """The chairman's answer: one line per output it was given, then its own recommendation."""
    outputs = {label: text for label, (noun, text) in _fenced(prompt).items() if noun == "Output"}
    lines = [f"- {label}: {' '.join(text.replace(SIMULATED, '').split())}" for label, text in outputs.items()]
    return (
        f"{SIMULATED} Synthesis by the {persona} from {len(outputs)} subtask output{'s' if len(outputs) != 1 else ''}.\n\n"
        + "\n".join(lines)
        + f"\n\nTogether: {PERSONAS[persona]['points'][0]}"
    )


def _judge(persona: str, prompt: str, rng: random.Random) -> str:
    return json.dumps({"score": rng.randint(50, 95), "reason": f"{SIMULATED} judged by the {persona}"})


_WRITERS = {
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


def demo_reply(persona: str, messages: list[dict[str, Any]], seed: int = 0) -> str:
    """The deterministic reply of a persona to a conversation."""
    if persona not in PERSONAS:
        raise ValueError(f"unknown demo persona '{persona}'; choose one of {', '.join(PERSONAS)}")
    prompt = "\n\n".join(str(message.get("content", "")) for message in messages if message.get("role") != "system")
    task = find_task(prompt) or Task.ANSWER
    # An answer's randomness is shared by all personas, so those of one school agree.
    rng = _rng("" if task is Task.ANSWER else persona, prompt, seed)
    return _WRITERS[task](persona, prompt, rng)


def demo_delay() -> float:
    try:
        return max(0.0, float(os.environ.get("PANEL_DEMO_DELAY", DEFAULT_DELAY)))
    except ValueError:
        return DEFAULT_DELAY


def register_demo_provider(litellm: ModuleType) -> None:
    """Add the `demo` provider to litellm (idempotent). It has no price: a simulated call costs
    nothing, and the views say so rather than show made-up money."""
    from litellm import CustomLLM, ModelResponse
    from litellm.llms.custom_llm import CustomLLMError

    class DemoLLM(CustomLLM):  # type: ignore[misc]
        def _reply(self, model: str, messages: list[dict[str, Any]], optional_params: dict[str, Any]) -> ModelResponse:
            persona = model.split("/", 1)[-1]
            try:
                text = demo_reply(persona, messages, int(optional_params.get("seed") or 0))
            except ValueError as exc:
                raise CustomLLMError(status_code=404, message=str(exc)) from None
            prompt_chars = sum(len(str(m.get("content", ""))) for m in messages)
            return ModelResponse(
                model=f"demo/{persona}",
                created=int(time.time()),
                choices=[{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                usage={"prompt_tokens": prompt_chars // 4 + 1, "completion_tokens": len(text) // 4 + 1, "total_tokens": prompt_chars // 4 + len(text) // 4 + 2},
            )

        def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:
            time.sleep(demo_delay() * random.uniform(0.5, 1.5))
            return self._reply(model, messages, kwargs.get("optional_params") or {})

        async def acompletion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:
            await asyncio.sleep(demo_delay() * random.uniform(0.5, 1.5))
            return self._reply(model, messages, kwargs.get("optional_params") or {})

    if not any(entry.get("provider") == "demo" for entry in litellm.custom_provider_map):
        litellm.custom_provider_map = [*litellm.custom_provider_map, {"provider": "demo", "custom_handler": DemoLLM()}]
