"""The gateway's own route to the demo personas: a demo call goes the way any call goes
(events, request hash, deadline, budget, resume, streaming, tools), answered in-process from
its brief; the brief never reaches a real provider; and rewording every prompt of every
engine changes no demo run."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from panel_cli.config import Defaults, Member, Panel
from panel_cli.events import BaseEvent, CallFinished, CallTextGrew, EventBus, ToolCallFinished
from panel_cli.llm.brief import RequestBrief, SimulatedVoter, quote, simulated_voters
from panel_cli.llm.budget import Budget
from panel_cli.llm.demo_replies import demo_reply
from panel_cli.llm.gateway import Gateway
from panel_cli.llm.request_hash import request_hash
from panel_cli.llm.tool_calls import ToolOutcome
from panel_cli.protocols.base import engine_of
from panel_cli.protocols.confer import engine as confer
from panel_cli.protocols.council import engine as council
from panel_cli.protocols.delphi import engine as delphi
from panel_cli.protocols.ensemble import engine as ensemble
from panel_cli.protocols.orchestrate import engine as orchestrate
from panel_cli.protocols.registry import names
from panel_cli.protocols.supervise import engine as supervise
from panel_cli.protocols.vote import engine as vote
from panel_cli.runs.execute import run_engine
from panel_cli.simulation.seeded import SIMULATED
from panel_cli.tasks import Task
from panel_cli.tools.calls import ToolSpec, tool_set
from tests.fakes.openai_server import FakeOpenAIServer, reply, reply_json

ROOT = Path(__file__).resolve().parents[2]
QUESTION = [{"role": "user", "content": "Which database should we pick?"}]
BRIEF = RequestBrief(task=Task.ANSWER, question="Which database should we pick?")


class Recorder:
    def __init__(self) -> None:
        self.events: list[BaseEvent] = []

    async def __call__(self, event: BaseEvent) -> None:
        self.events.append(event)

    def finished(self) -> list[CallFinished]:
        return [event for event in self.events if isinstance(event, CallFinished)]


@dataclass
class Stored:
    """The fields the gateway reads of a stored call."""

    response: str | None
    truncated: bool = False
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None


def sage(**fields: Any) -> Member:
    return Member(name="sage", model="demo/sage", **fields)


async def test_a_demo_call_is_reported_like_any_call_and_costs_nothing():
    recorder = Recorder()
    gateway = Gateway(recorder, defaults=Defaults(retries=0))
    result = await gateway.call(sage(system="Be brief."), QUESTION, stage="answer", brief=BRIEF)
    assert result.ok and result.text == demo_reply("sage", BRIEF)
    assert [event.type for event in recorder.events] == ["call_started", "call_finished"]
    (finished,) = recorder.finished()
    sent = [{"role": "system", "content": "Be brief."}, *QUESTION]
    assert finished.messages == sent
    context = [{"role": "system", "content": "Be brief."}]
    assert finished.request_hash == request_hash(
        {"model": "demo/sage"}, member="sage", stage="answer", context=context, brief=BRIEF
    )
    prompt_chars = len("Be brief.") + len(QUESTION[0]["content"])
    assert (result.tokens_in, result.tokens_out) == (prompt_chars // 4 + 1, len(result.text) // 4 + 1)
    assert result.cost == 0.0 and finished.cost == 0.0, "simulated: nothing spent (cost_basis says so)"


async def test_the_brief_decides_the_reply_and_the_prompt_does_not():
    gateway = Gateway(Recorder(), defaults=Defaults(retries=0))
    first = await gateway.call(sage(), QUESTION, stage="answer", brief=BRIEF)
    reworded = await gateway.call(
        sage(), [{"role": "user", "content": "Anything at all."}], stage="answer", brief=BRIEF
    )
    other = await gateway.call(sage(), QUESTION, stage="answer", brief=BRIEF.model_copy(update={"question": "Tea?"}))
    assert first.text == reworded.text != other.text


async def test_a_call_without_a_brief_is_a_plain_question():
    gateway = Gateway(Recorder(), defaults=Defaults(retries=0))
    result = await gateway.call(sage(), QUESTION, stage="answer")
    assert result.text == demo_reply("sage", BRIEF)


async def test_a_resumed_demo_call_is_answered_from_the_store():
    recorder = Recorder()
    gateway = Gateway(recorder, defaults=Defaults(retries=0))
    await gateway.call(sage(), QUESTION, stage="answer", brief=BRIEF)
    (earlier,) = recorder.finished()
    again = Recorder()
    resumed = Gateway(again, defaults=Defaults(retries=0), answered={earlier.request_hash: [Stored("as stored")]})
    result = await resumed.call(sage(), QUESTION, stage="answer", brief=BRIEF)
    assert result.reused and result.text == "as stored"
    assert again.finished()[0].request_hash == earlier.request_hash


class Pick(BaseModel):
    choice: str


async def test_a_structured_demo_call_is_asked_in_the_prompt_and_parsed():
    recorder = Recorder()
    gateway = Gateway(recorder, defaults=Defaults(retries=0))
    brief = RequestBrief(task=Task.BALLOT, question="Which?", options=("PostgreSQL", "MySQL"))
    result = await gateway.call(sage(), QUESTION, stage="vote", schema=Pick, brief=brief)
    assert result.parsed is not None and result.parsed["choice"] in brief.options
    assert "JSON schema" in recorder.finished()[0].messages[-1]["content"]


async def test_a_demo_call_keeps_its_deadline(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PANEL_DEMO_DELAY", "60")
    gateway = Gateway(Recorder(), defaults=Defaults(retries=1))
    result = await gateway.call(sage(timeout=0.2), QUESTION, stage="answer", brief=BRIEF)
    assert (result.ok, result.error_kind, result.attempts) == (False, "timeout", 1)


async def test_the_budget_counts_demo_calls():
    gateway = Gateway(Recorder(), defaults=Defaults(retries=0), budget=Budget(max_cost=0.0, max_calls=1))
    first = await gateway.call(sage(), QUESTION, stage="answer", brief=BRIEF)
    second = await gateway.call(sage(), QUESTION, stage="answer", brief=BRIEF)
    assert first.ok and (second.ok, second.error_kind) == (False, "budget")
    assert gateway.budget is not None and gateway.budget.spent == 0.0


async def test_a_streamed_demo_call_grows_in_pieces_and_ends_as_unstreamed():
    results = []
    for stream in (True, False):
        recorder = Recorder()
        gateway = Gateway(recorder, defaults=Defaults(retries=0), stream=stream)
        results.append((await gateway.call(sage(), QUESTION, stage="answer", brief=BRIEF), recorder))
    (streamed, streamed_events), (whole, whole_events) = results
    assert streamed.text == whole.text and (streamed.tokens_in, streamed.tokens_out) == (
        whole.tokens_in,
        whole.tokens_out,
    )
    grew = [event.text for event in streamed_events.events if isinstance(event, CallTextGrew)]
    assert grew and grew[0] != whole.text and all(whole.text.startswith(text) for text in grew)
    assert not any(isinstance(event, CallTextGrew) for event in whole_events.events)
    assert streamed_events.finished()[0].request_hash == whole_events.finished()[0].request_hash


class Lookup:
    """A tool server's stand-in for the gateway's tool loop: records each call, finds one line."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def call(self, server: str, tool: str, arguments: dict[str, Any], limit: float | None) -> ToolOutcome:
        self.calls.append(arguments)
        text = "## Tenants\nUse row-level security."
        return ToolOutcome(text=text, chars=len(text), truncated=False, status="ok")


@pytest.mark.parametrize("budget", [1, 3])
async def test_a_persona_offered_a_tool_calls_it_once_then_cites_it(budget: int):
    recorder = Recorder()
    gateway = Gateway(recorder, defaults=Defaults(retries=0, tool_budget=budget))
    spec = ToolSpec("lookup", "Look it up.", {"type": "object", "properties": {"query": {"type": "string"}}})
    toolbox = Lookup()
    gateway.equip(toolbox=toolbox, offered={"sage": tool_set({"docs": [spec]})})  # type: ignore[arg-type]
    result = await gateway.call(sage(), QUESTION, stage="answer", tools=True, brief=BRIEF)
    assert toolbox.calls == [{"query": "Which database should we pick?"}]
    assert [event.status for event in recorder.events if isinstance(event, ToolCallFinished)] == ["ok"]
    assert result.text == f"{demo_reply('sage', BRIEF)}\n\nFrom what I looked up: “Use row-level security.”"
    assert len(recorder.finished()) == 1, "one call, however many requests"


# -- the brief never leaves the process ----------------------------------------------------

SECRET = "brief-only-7f3a"


async def test_a_real_provider_never_receives_the_brief(fake_server: FakeOpenAIServer):
    """Through litellm's real path to the fake server: plain, structured and streamed calls,
    with a brief (and an eval voter) full of words the prompt does not hold."""
    fake_server.script("m", reply("fine"), reply_json({"choice": "A"}), reply("streamed fine"))
    member = Member(name="m", model="openai/m", api_base=fake_server.url)
    brief = RequestBrief(
        task=Task.JUDGE,
        question=f"{SECRET} question",
        quoted=quote({f"{SECRET}-label": f"{SECRET} text"}),
        own=f"{SECRET}-label",
        options=(f"{SECRET} option",),
        workers=(f"{SECRET}-worker",),
        feedback=f"{SECRET} feedback",
        assignment=f"{SECRET} assignment",
        title=f"{SECRET} title",
        reference=f"{SECRET} gold",
    )
    voters = {"m": SimulatedVoter(voter="m", key=f"{SECRET}:q1", gold=f"{SECRET} gold")}
    with simulated_voters(voters):
        for stream, schema in ((False, None), (False, Pick), (True, None)):
            gateway = Gateway(Recorder(), defaults=Defaults(retries=0), stream=stream)
            result = await gateway.call(member, QUESTION, stage="answer", schema=schema, brief=brief)
            assert result.ok, result.error
            await gateway.aclose()
    assert len(fake_server.requests) == 3 and fake_server.requests[2].streamed
    for request in fake_server.requests:
        sent = json.dumps(request.body) + json.dumps(request.headers)
        assert SECRET not in sent and '"quoted"' not in sent and '"voter"' not in sent
        assert request.messages[-1]["content"].startswith(QUESTION[0]["content"])


async def test_a_simulated_voter_in_an_eval_does_not_think(monkeypatch: pytest.MonkeyPatch) -> None:
    """The think time makes a demo run watchable; an eval's simulated voters are not watched,
    and 73 questions of 5 voters waited minutes for it. Measured by what the route asks to
    sleep, never by a clock."""
    from panel_cli.llm import demo_route

    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(demo_route.asyncio, "sleep", sleep)
    monkeypatch.setenv("PANEL_DEMO_DELAY", "5")
    oracle = Member(name="v1", model="demo/oracle@0.7")
    ask = RequestBrief(task=Task.ANSWER, question="Capital of Italy?", options=("Rome", "Paris"))
    with simulated_voters({"v1": SimulatedVoter(voter="v1", key="7:q1", gold="Rome", options=("Rome", "Paris"))}):
        for stream in (False, True):
            gateway = Gateway(Recorder(), defaults=Defaults(retries=0), stream=stream)
            assert (await gateway.call(oracle, QUESTION, stage="answer", brief=ask)).ok
    assert slept and not any(slept), slept
    sage = Member(name="sage", model="demo/sage")
    assert (
        await Gateway(Recorder(), defaults=Defaults(retries=0)).call(sage, QUESTION, stage="answer", brief=BRIEF)
    ).ok
    assert slept[-1] >= 2.5, "a persona a person watches still thinks (5 s, give or take half)"


# -- a reworded prompt changes no demo run ----------------------------------------------------

PROMPT_MODULES = (confer, council, ensemble, delphi, supervise, orchestrate, vote)


def reword(text: str) -> str:
    """Other prose altogether: no sentence, label line or task marker of the original survives."""
    return "Put differently, and backwards:\n" + text[::-1].upper()


def reworded_prompts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every prompt builder of every engine returns other prose (ensemble's answer prompt is
    council's, imported under its own name, so each module's names are patched)."""
    patched = []
    for module in PROMPT_MODULES:
        for name, builder in list(vars(module).items()):
            if name.endswith("_prompt") and callable(builder):

                def other(*args: Any, _builder: Any = builder, **kwargs: Any) -> str:
                    return reword(_builder(*args, **kwargs))

                monkeypatch.setattr(module, name, other)
                patched.append(f"{module.__name__}.{name}")
    return patched


def starter(protocol: str) -> Panel:
    data = yaml.safe_load(files("panel_cli").joinpath(f"starters/{protocol}.demo.yaml").read_text(encoding="utf-8"))
    # A council that shuffles draws its seed at random; fixed here, both runs see one order.
    return Panel.model_validate({**data, "seed": 7} if data.get("protocol") == "council" else data)


async def demo_run(protocol: str) -> tuple[str | None, list[tuple[Any, ...]], list[str]]:
    """A starter panel's run: its final answer, every reply (who, stage, round, about, text),
    and every prompt sent."""
    panel = starter(protocol)
    recorder = Recorder()
    bus = EventBus(f"reword-{protocol}", [recorder])
    gateway = Gateway(bus.emit, defaults=panel.defaults, concurrency=panel.concurrency)
    outcome = await run_engine(engine_of(panel.protocol), panel, panel.question or "", gateway, bus)
    replies = sorted(
        (event.member, event.stage, event.round or 0, event.about or "", event.text) for event in recorder.finished()
    )
    sent = [
        str(message["content"])
        for event in recorder.finished()
        for message in event.messages
        if message["role"] == "user"
    ]
    return outcome.result.final_answer, replies, sent


@pytest.mark.parametrize("protocol", names())
async def test_rewording_every_prompt_changes_no_demo_run(protocol: str, monkeypatch: pytest.MonkeyPatch):
    """The same final answer and every same reply (so the same votes, rankings, verdicts,
    plans and contributions), although no prompt of the second run reads like the first's."""
    answer, replies, sent = await demo_run(protocol)
    assert len(reworded_prompts(monkeypatch)) >= 20
    reworded_answer, reworded_replies, reworded_sent = await demo_run(protocol)
    assert answer is not None and reworded_answer == answer
    assert reworded_replies == replies
    assert any(text.startswith("Put differently") for text in reworded_sent)
    assert not any("[panel-task:" in text for text in reworded_sent) and not set(sent) & set(reworded_sent)


# -- a run of personas alone never imports litellm --------------------------------------------


def run_panel_process(*args: str) -> tuple[bool, dict[str, Any], str]:
    """Run `panel ARGS --json` through its entry point in a fresh interpreter: whether litellm
    was imported by the end, the result it printed, and its stderr (with its exit code)."""
    code = (
        "import sys\n"
        f"sys.argv = ['panel', *{list(args)!r}]\n"
        "from panel_cli.cli.app import main\n"
        "try:\n    main()\nexcept SystemExit as exit:\n    print('exit', exit.code, file=sys.stderr)\n"
        "print(any(name == 'litellm' or name.startswith('litellm.') for name in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    printed, _, loaded = done.stdout.rstrip("\n").rpartition("\n")
    return loaded == "True", json.loads(printed) if printed.strip() else {}, done.stderr


@pytest.mark.subprocess
@pytest.mark.parametrize("protocol", ["confer", "council"])
def test_a_run_of_demo_personas_never_imports_litellm(protocol: str, tmp_path: Path):
    panel = (
        ROOT / "configs" / "demo.yaml" if protocol == "confer" else files("panel_cli") / "starters/council.demo.yaml"
    )
    loaded, result, stderr = run_panel_process(protocol, str(panel), "--json", "--db", str(tmp_path / "runs.db"))
    assert "exit 0" in stderr and result["reached_answer"], stderr
    assert result["calls"] >= 8 and result["cost"] == 0.0 and result["cost_basis"] == "simulated"
    assert not loaded


@pytest.mark.subprocess
def test_a_panel_with_one_real_member_imports_litellm(fake_server: FakeOpenAIServer, tmp_path: Path):
    fake_server.default(reply("Measure first."))
    panel = tmp_path / "mixed.yaml"
    panel.write_text(
        yaml.safe_dump(
            {
                "name": "mixed",
                "question": "What first?",
                "members": [
                    {"name": "sage", "model": "demo/sage"},
                    {"name": "real", "model": "openai/real-model", "api_base": fake_server.url},
                ],
                "max_rounds": 1,
            }
        )
    )
    loaded, result, stderr = run_panel_process("confer", str(panel), "--json", "--db", str(tmp_path / "runs.db"))
    assert "exit 0" in stderr, stderr
    assert loaded
    assert {request.model for request in fake_server.requests} == {"real-model"}
    assert SIMULATED in result["initial_answers"]["sage"]
