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
    rf"^=== (?P<noun>Answer|Model|Response|Member|Review by) (?P<label>.+?) \[(?P<tag>{FENCE_TAG_PATTERN})\] ===$", re.MULTILINE
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


def _ballot(persona: str, prompt: str, rng: random.Random) -> str:
    options = _listed(_OPTIONS, prompt) or ["yes", "no"]
    ranking = sorted(options, key=lambda option: (PERSONAS[persona]["bias"] + options.index(option) * 2 + rng.random()) % len(options))
    return json.dumps({"choice": ranking[0], "ranking": ranking, "confidence": 60 + rng.randint(0, 35), "reason": f"{SIMULATED} {ranking[0]} fits best."})


def _critic(persona: str, prompt: str, rng: random.Random) -> str:
    workers = _listed(_WORKERS, prompt)
    rejected = [w for w in workers if rng.random() < 0.3] if "Correction round" not in prompt else []
    return json.dumps(
        {
            "verdict": "REJECTED" if rejected else "APPROVED",
            "feedback": {w: ("Add concrete numbers and one example." if w in rejected else "Good.") for w in workers},
        }
    )


def _plan(persona: str, prompt: str, rng: random.Random) -> str:
    workers = _listed(_WORKERS, prompt) or ["research", "analysis", "writing"]
    tasks, previous = [], None
    for index, worker in enumerate(workers, start=1):
        tasks.append({"task_id": f"t{index}", "worker": worker, "title": f"{worker.title()} step", "description": f"{SIMULATED} {worker} for: {_question(prompt)}", "depends_on": [previous] if previous else [], "priority": index})
        previous = f"t{index}"
    return json.dumps({"subtasks": tasks})


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
