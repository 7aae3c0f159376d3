"""`demo/<persona>`: an offline, deterministic stand-in for real models.

It is registered as a litellm custom provider so demo runs take the same gateway path as
real ones. It recognises what an engine wants from the task marker in the prompt
(`panel_cli.tasks`) and answers in that shape, in the persona's voice, marked as
simulated. The same persona, prompt and seed always give the same text; only the think
time (`PANEL_DEMO_DELAY`, seconds, 0 in tests) varies, so the live view has something to show.
Asked to stream, a persona writes the same text a few words at a time.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import re
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from panel_cli.tasks import FENCE_TAG_PATTERN, Task, find_task

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

_QUESTION = re.compile(r"Question:\s*\n?(.+?)(?:\n\n|\n\[panel-task|$)", re.DOTALL)
_FENCE = re.compile(
    rf"^=== (?P<noun>Answer|Model|Response|Member|Review by|Output|Expert|Deliverable|Feedback for) (?P<label>.+?) \[(?P<tag>{FENCE_TAG_PATTERN})\] ===$",
    re.MULTILINE,
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
        return json.dumps(
            {
                "chosen_label": "A",
                "revised_answer": _answer(persona, prompt, rng),
                "confidence": 50,
                "rationale": f"{SIMULATED} nothing to compare",
            }
        )
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
        lines.append(
            f"Model {label}: {'strong and specific' if label == order[0] else 'reasonable, but less complete'}."
        )
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
    lines += [
        f"{name}: {'strong and specific' if name == order[0] else 'reasonable, but less complete'}." for name in blocks
    ]
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
    options = (
        [line[2:].strip() for line in blocks[-1].splitlines() if line.startswith("- ")] if blocks else ["yes", "no"]
    )
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
    return json.dumps(
        {"choice": ranking[0], "ranking": ranking, "confidence": 55 + rng.randint(0, 40), "reason": reason}
    )


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
        others = sorted(
            (text for label, text in experts.items() if label != own_label), key=lambda text: -_quality(text, persona)
        )
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
    core = (
        first.group(0).removeprefix(SIMULATED).strip()
        if first
        else _supervise_work(persona, prompt, rng).removeprefix(SIMULATED).strip()
    )
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
_SUBTASK = re.compile(
    r"You are the (?P<worker>.+?) worker of a team answering it\. Your subtask is (?P<id>\S+): (?P<title>.*)"
)


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


def _orchestrate_task(persona: str, prompt: str, rng: random.Random) -> str:
    """A worker's output: its kind, its subtask, one of its persona's points, and the
    subtasks it built on."""
    found = _SUBTASK.search(prompt)
    worker, task_id, title = (
        (found.group("worker"), found.group("id"), found.group("title").strip())
        if found
        else ("team", "?", "the subtask")
    )
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
    accuracy = oracle_accuracy(persona)
    if accuracy is not None:
        return oracle_reply(accuracy, messages)
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


def demo_pieces(text: str) -> list[str]:
    """A text in pieces of `STREAM_WORDS` words, each with the spaces after it: joined, the text."""
    words = re.findall(r"\S+\s*|\s+", text)
    return ["".join(words[start : start + STREAM_WORDS]) for start in range(0, len(words), STREAM_WORDS)] or [""]


def register_demo_provider(litellm: ModuleType) -> None:
    """Add the `demo` provider to litellm (idempotent). It has no price: a simulated call costs
    nothing, and the views say so rather than show made-up money."""
    from litellm import CustomLLM, ModelResponse
    from litellm.llms.custom_llm import CustomLLMError

    class DemoLLM(CustomLLM):  # type: ignore[misc]
        def _reply(self, model: str, messages: list[dict[str, Any]], optional_params: dict[str, Any]) -> ModelResponse:
            persona = model.split("/", 1)[-1]
            call = demo_tool_call(messages, optional_params.get("tools"))
            try:
                text = (
                    ""
                    if call is not None
                    else cite_tool_results(
                        demo_reply(persona, messages, int(optional_params.get("seed") or 0)), messages
                    )
                )
            except ValueError as exc:
                raise CustomLLMError(status_code=404, message=str(exc)) from None
            prompt_chars = sum(len(str(m.get("content", ""))) for m in messages)
            message: dict[str, Any] = (
                {"role": "assistant", "content": text}
                if call is None
                else {"role": "assistant", "content": None, "tool_calls": [call]}
            )
            return ModelResponse(
                model=f"demo/{persona}",
                created=int(time.time()),
                choices=[{"index": 0, "finish_reason": "stop" if call is None else "tool_calls", "message": message}],
                usage={
                    "prompt_tokens": prompt_chars // 4 + 1,
                    "completion_tokens": len(text) // 4 + 1,
                    "total_tokens": prompt_chars // 4 + len(text) // 4 + 2,
                },
            )

        def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:
            time.sleep(demo_delay() * random.uniform(0.5, 1.5))
            return self._reply(model, messages, kwargs.get("optional_params") or {})

        async def acompletion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:
            await asyncio.sleep(demo_delay() * random.uniform(0.5, 1.5))
            return self._reply(model, messages, kwargs.get("optional_params") or {})

        async def astreaming(
            self, model: str, messages: list, *args: Any, **kwargs: Any
        ) -> AsyncIterator[dict[str, Any]]:
            """The reply `acompletion` gives, as litellm's generic stream chunks, the usage on
            the last; a tool call comes whole in one chunk."""
            think = demo_delay() * random.uniform(0.5, 1.5)
            await asyncio.sleep(think / 2)
            response = self._reply(model, messages, kwargs.get("optional_params") or {})
            message = response.choices[0].message
            usage = {
                key: getattr(response.usage, key) for key in ("prompt_tokens", "completion_tokens", "total_tokens")
            }
            if message.tool_calls:
                call = message.tool_calls[0]
                tool_use = {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.function.name, "arguments": call.function.arguments},
                    "index": 0,
                }
                yield {
                    "text": "",
                    "tool_use": tool_use,
                    "is_finished": True,
                    "finish_reason": "tool_calls",
                    "usage": usage,
                    "index": 0,
                }
                return
            pieces = demo_pieces(message.content or "")
            for number, piece in enumerate(pieces, start=1):
                if number > 1:
                    await asyncio.sleep(think / 2 / len(pieces))
                last = number == len(pieces)
                yield {
                    "text": piece,
                    "tool_use": None,
                    "is_finished": last,
                    "finish_reason": "stop" if last else "",
                    "usage": usage if last else None,
                    "index": 0,
                }

    if not any(entry.get("provider") == "demo" for entry in litellm.custom_provider_map):
        litellm.custom_provider_map = [*litellm.custom_provider_map, {"provider": "demo", "custom_handler": DemoLLM()}]


# Simulated voters of known accuracy -----------------------------------------------------------
#
# `demo/oracle@0.7` is right with probability 0.7 on each question, independently of every other
# voter and question, and otherwise holds a wrong option drawn at random: voters whose accuracy is
# known, so that `panel eval` can be checked against the Condorcet jury theorem. An oracle learns
# the gold answer only from the marker `panel eval` writes into a simulated member's system
# message (`oracle_marker`). Question text and other members' answers never reach a system
# message, so none can forge a marker, and eval never writes one for a real model.
#
# What an oracle holds for a question (its belief) is drawn once from the eval's key (its seed and
# the question) and the voter's name, so it answers, votes, ranks and casts its ballot on the same
# belief in every protocol: confer, council and vote differ only in how they combine the beliefs.

ORACLE = "oracle@"
ORACLE_MARKER = "[panel-oracle]"
ORACLE_CONFIDENCE = 80
_AGGREGATE_TOP = re.compile(r"^1\. Model (?P<label>[A-Z]+) \(", re.MULTILINE)
_REFERENCE = re.compile(r"Reference answer:\n(?P<gold>.+?)\n\n", re.DOTALL)


@dataclass(frozen=True)
class OracleKnowledge:
    """What a marker tells a simulated voter: who it is, the question's key, the gold answer and
    the options (empty for a short-answer question)."""

    voter: str
    key: str
    gold: str
    options: tuple[str, ...]


def oracle_accuracy(persona: str) -> float | None:
    """p for `oracle@p` with 0 <= p <= 1; None for any other persona."""
    if not persona.startswith(ORACLE):
        return None
    try:
        p = float(persona[len(ORACLE) :])
    except ValueError:
        return None
    return p if 0.0 <= p <= 1.0 else None


def is_persona(name: str) -> bool:
    """Whether `demo/<name>` is a model the demo provider answers as."""
    return name in PERSONAS or oracle_accuracy(name) is not None


def oracle_marker(voter: str, key: str, gold: str, options: Sequence[str] | None) -> str:
    """The line eval adds to a simulated member's system message for one question."""
    data = {"voter": voter, "key": key, "gold": gold, "options": list(options or ())}
    return f"{ORACLE_MARKER} {json.dumps(data, ensure_ascii=False)}"


def _oracle_knowledge(messages: list[dict[str, Any]]) -> OracleKnowledge | None:
    """The last well-formed marker in the system messages; anything elsewhere is ignored."""
    found = None
    for message in messages:
        if message.get("role") != "system":
            continue
        for line in str(message.get("content", "")).splitlines():
            if not line.startswith(f"{ORACLE_MARKER} "):
                continue
            try:
                data = json.loads(line[len(ORACLE_MARKER) + 1 :])
            except ValueError:
                continue
            if not isinstance(data, dict):
                continue
            voter, key, gold, options = (data.get(name) for name in ("voter", "key", "gold", "options"))
            if all(isinstance(value, str) for value in (voter, key, gold)) and isinstance(options, list):
                found = OracleKnowledge(voter, key, gold, tuple(str(option) for option in options))
    return found


def _oracle_fold(text: str) -> str:
    return text.strip().strip("*_`\"'“”‘’").rstrip(".").strip().casefold()


def _reads_as(text: str, belief: str) -> bool:
    """Whether an answer gives `belief`: its first line is the option, as the oracle writes it."""
    head = next((line for line in text.splitlines() if line.strip()), "")
    return _oracle_fold(head) == _oracle_fold(belief)


def _oracle_belief(p: float, knowledge: OracleKnowledge | None, prompt: str) -> str | None:
    """The gold answer with probability p, else a wrong option at random (None when there is
    none to pick). Without a marker an oracle knows nothing: an option of the prompt at random."""
    if knowledge is None:
        options = _listed(_OPTIONS, prompt)
        return random.Random(_digest(f"oracle\x00{_question(prompt)}")).choice(options) if options else None
    rng = random.Random(_digest(f"oracle\x00{knowledge.key}\x00{knowledge.voter}"))
    if rng.random() < p:
        return knowledge.gold
    wrong = [option for option in knowledge.options if _oracle_fold(option) != _oracle_fold(knowledge.gold)]
    return rng.choice(wrong) if wrong else None


def _oracle_answer(p: float, belief: str | None) -> str:
    """The answer alone on the first line, where eval's grading looks first."""
    return f"{belief if belief is not None else 'I do not know.'}\n\n{SIMULATED} A simulated voter, right with probability {p:g}."


def _oracle_vote(p: float, belief: str | None, prompt: str) -> str:
    """confer: the first answer that gives its belief (its own, failing that), and its own answer
    kept as its revision, always at the same confidence: confer's tally is then a plurality."""
    blocks = _blocks(prompt)
    own = re.search(r"Your current answer is Answer ([A-Z]+)\.", prompt)
    own_label = own.group(1) if own and own.group(1) in blocks else None
    fallback = own_label or next(iter(blocks), "A")
    label = next((key for key, text in blocks.items() if belief is not None and _reads_as(text, belief)), fallback)
    rationale = f"{SIMULATED} Answer {label} gives the answer this voter holds."
    return json.dumps(
        {
            "chosen_label": label,
            "revised_answer": _oracle_answer(p, belief),
            "confidence": ORACLE_CONFIDENCE,
            "rationale": rationale,
        }
    )


def _oracle_review(belief: str | None, prompt: str, noun: str) -> str:
    """council: the answers that give its belief first, then the rest, each group in the order shown."""
    shown = {label: text for label, (kind, text) in _fenced(prompt).items() if kind == noun}
    agree = [label for label, text in shown.items() if belief is not None and _reads_as(text, belief)]
    order = agree + [label for label in shown if label not in agree]
    prefix = "Model " if noun == "Model" else ""
    lines = [f"{SIMULATED} A simulated reviewer: the answers that agree with it come first.", "", "FINAL RANKING:"]
    return "\n".join(lines + [f"{place}. {prefix}{label}" for place, label in enumerate(order, start=1)])


def _oracle_synthesis(p: float, belief: str | None, prompt: str) -> str:
    """council's chairman reports the answer the reviews ranked first (its own belief when no
    ranking can be read): the council's answer is its members' aggregate, not one voter's."""
    top = _AGGREGATE_TOP.search(prompt)
    answers = {label: text for label, (kind, text) in _fenced(prompt).items() if kind == "Model"}
    if top is None or top.group("label") not in answers:
        return _oracle_answer(p, belief)
    head = next((line.strip() for line in answers[top.group("label")].splitlines() if line.strip()), "")
    return f"{head}\n\n{SIMULATED} The chairman reports the answer the panel ranked first."


def _oracle_ballot(p: float, belief: str | None, knowledge: OracleKnowledge | None, prompt: str) -> str:
    options = list(knowledge.options) if knowledge and knowledge.options else _listed(_OPTIONS, prompt)
    if belief is None:
        return f"{SIMULATED} I do not know."
    ranking = [belief, *(option for option in options if option != belief)]
    reason = f"{SIMULATED} A simulated voter, right with probability {p:g}."
    return json.dumps({"choice": belief, "ranking": ranking, "confidence": ORACLE_CONFIDENCE, "reason": reason})


def _oracle_judge(prompt: str) -> str:
    """An oracle judging an answer compares its first line with the reference in the prompt."""
    reference = _REFERENCE.search(prompt)
    graded = next((text for _, (kind, text) in _fenced(prompt).items() if kind == "Answer"), "")
    correct = reference is not None and _reads_as(graded, reference.group("gold").strip())
    reason = f"{SIMULATED} the answer's first line {'is' if correct else 'is not'} the reference answer"
    return json.dumps({"verdict": "CORRECT" if correct else "INCORRECT", "reason": reason})


def oracle_reply(p: float, messages: list[dict[str, Any]]) -> str:
    """The reply of `demo/oracle@p`, by the task its prompt asks for."""
    knowledge = _oracle_knowledge(messages)
    prompt = "\n\n".join(str(message.get("content", "")) for message in messages if message.get("role") != "system")
    task = find_task(prompt) or Task.ANSWER
    belief = _oracle_belief(p, knowledge, prompt)
    match task:
        case Task.CONFER_VOTE:
            return _oracle_vote(p, belief, prompt)
        case Task.COUNCIL_REVIEW:
            return _oracle_review(belief, prompt, "Model")
        case Task.COUNCIL_REVIEW_NAMED:
            return _oracle_review(belief, prompt, "Member")
        case Task.COUNCIL_SYNTHESIS:
            return _oracle_synthesis(p, belief, prompt)
        case Task.BALLOT:
            return _oracle_ballot(p, belief, knowledge, prompt)
        case Task.JUDGE:
            return _oracle_judge(prompt)
        case _:
            return _oracle_answer(p, belief)


# Tools ------------------------------------------------------------------------------------------
#
# A persona offered tools looks something up once before it answers: it calls the tool it is
# offered (`lookup` when there is one) with the question as the query, then answers as usual and
# cites the first line of what it found. Offered no tools, it answers as it always did.

_TOOL_RESULT = re.compile(
    rf"^=== Tool result (?P<label>.+?) \[(?P<tag>{FENCE_TAG_PATTERN})\] ===\n(?P<text>.*?)\n=== end of Tool result (?P=label) \[(?P=tag)\] ===$",
    re.MULTILINE | re.DOTALL,
)
TOOL_QUERY_LIMIT = 80
CITATION_LIMIT = 200


def demo_tool_call(messages: list[dict[str, Any]], tools: Any) -> dict[str, Any] | None:
    """The tool call a persona makes when offered tools and it has not looked anything up yet:
    one string argument of the chosen tool, filled with the question; None otherwise."""
    if not tools or _tool_results(messages):
        return None
    functions = [tool.get("function", {}) for tool in tools if isinstance(tool, dict)]
    usable = [(function, _string_parameter(function)) for function in functions]
    usable = [(function, parameter) for function, parameter in usable if parameter is not None and function.get("name")]
    if not usable:
        return None
    function, parameter = next(((f, p) for f, p in usable if f["name"] == "lookup"), usable[0])
    prompt = "\n\n".join(str(message.get("content") or "") for message in messages if message.get("role") == "user")
    query = _question(prompt)
    if len(query) > TOOL_QUERY_LIMIT:
        query = query[:TOOL_QUERY_LIMIT].rsplit(" ", 1)[0]
    arguments = json.dumps({parameter: query})
    call_id = f"call_{_digest(prompt + arguments) % 10**12}"
    return {"id": call_id, "type": "function", "function": {"name": function["name"], "arguments": arguments}}


def _string_parameter(function: dict[str, Any]) -> str | None:
    """The tool's first string parameter, the required ones first."""
    parameters = function.get("parameters") or {}
    properties = parameters.get("properties") or {}
    required = [name for name in parameters.get("required") or [] if name in properties]
    for name in [*required, *properties]:
        if isinstance(properties.get(name), dict) and properties[name].get("type") == "string":
            return str(name)
    return None


def _tool_results(messages: list[dict[str, Any]]) -> list[str]:
    """Every tool result in the conversation: in tool messages, or quoted in the last prompt
    (the final request once the tool budget is spent)."""
    texts = [str(m.get("content") or "") for m in messages if m.get("role") == "tool"]
    if messages and messages[-1].get("role") == "user":
        texts.append(str(messages[-1].get("content") or ""))
    return [match.group("text") for text in texts for match in _TOOL_RESULT.finditer(text)]


def cite_tool_results(text: str, messages: list[dict[str, Any]]) -> str:
    """A persona's answer, with the first line of what its tools found (or that they failed)."""
    results = _tool_results(messages)
    if not results:
        return text
    lines = [line.strip() for line in results[0].splitlines() if line.strip()]
    line = next((line for line in lines if not line.startswith("#")), lines[0] if lines else "nothing")
    if len(line) > CITATION_LIMIT:
        line = line[:CITATION_LIMIT].rsplit(" ", 1)[0] + " …"
    if line.startswith("Error:"):
        citation = f"I tried to look this up, but the tool failed ({line.removeprefix('Error:').strip()})."
    else:
        citation = f"From what I looked up: “{line}”"
    # A synthesis quoting an answer that already cites the same line does not cite it twice.
    return text if citation in text else f"{text}\n\n{citation}"
