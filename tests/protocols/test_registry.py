"""A protocol is declared once, by its spec. Registered here and nowhere else, a toy protocol with
its own setting (`times`), its own kind of request (`echo.say`, with a demo and a simulated
voter's reply) and its own event with its plain line gets its command, `protocol: echo` in a
panel file, `panel validate`, `panel run`, `panel estimate`, `panel batch`, `panel eval` and
`panel history show`, without a change to any other file."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import Field
from rich.console import Console, RenderableType
from rich.text import Text

from panel_cli.config import Panel, ProtocolSettings, parse_panel
from panel_cli.errors import ConfigError
from panel_cli.events import BaseEvent, MemberInfo, RunStarted, StageStarted, parse_event
from panel_cli.llm.brief import RequestBrief
from panel_cli.llm.demo_replies import demo_reply
from panel_cli.llm.gateway import Gateway
from panel_cli.models.personas import OracleSpec
from panel_cli.protocols import base, plans, registry
from panel_cli.protocols.base import Emit, ProtocolResult, ProtocolRules
from panel_cli.protocols.plans import Bound, Calls, RunPlan, StagePlan, rounds_label, user
from panel_cli.store.reader import TranscriptReader
from panel_cli.tasks import Task, mark
from panel_cli.view.live import LiveView
from panel_cli.view.plain import PlainView
from panel_cli.view.tables import RunSoFar, StageState
from tests.helpers import cli, cli_json, cli_ok, cli_refused

# The toy protocol: everything it declares, in this module alone ---------------------------------

SAY = "echo.say"


class EchoSettings(ProtocolSettings):
    """Its own setting, which no other protocol reads: how many times each member echoes."""

    times: int = Field(default=1, ge=1, le=5)


class EchoHeard(BaseEvent):
    """Its own event: a member's echo came back, so many words long."""

    type: Literal["echo_heard"] = "echo_heard"
    member: str
    round: int
    words: int


def heard_line(event: Any) -> str:
    return f"[round {event.round}] echo  {event.member} heard {event.words} words"


def say(persona: str, brief: RequestBrief, seed: int) -> str:
    """A demo persona's echo."""
    return f"{persona} echoes: {brief.question}"


def say_as_voter(spec: OracleSpec, belief: str | None, brief: RequestBrief) -> str:
    """A simulated voter's echo: what it believes, on the first line, where eval grades it."""
    return f"{belief or 'I do not know.'}\n\nechoed by a simulated voter"


def prompt(question: str) -> list[dict[str, str]]:
    return user(mark(f"Say it again: {question}", SAY))


async def echo(panel: Panel, question: str, gateway: Gateway, emit: Emit) -> ProtocolResult:
    """Every member echoes the question `times` times; the answer is the first member's last echo."""
    times = EchoSettings.of(panel).times
    last: dict[str, str] = {}
    for round_ in range(1, times + 1):
        await emit(StageStarted(stage="answer", round=round_, members=panel.member_names))
        for member in panel.members:
            brief = RequestBrief(task=SAY, question=question)
            reply = await gateway.call(member, prompt(question), stage="answer", round=round_, brief=brief)
            if reply.ok:
                last[member.name] = reply.text
                await emit(EchoHeard(member=member.name, round=round_, words=len(reply.text.split())))
    first = panel.members[0].name
    return ProtocolResult(final_answer=last.get(first), failure_reason=None if first in last else "no echo came back")


def echo_plan(panel: Panel, question: str, bound: Bound) -> RunPlan:
    times = EchoSettings.of(panel).times
    calls = [Calls(member, times, times, prompt(question)) for member in panel.members]
    return RunPlan([StagePlan("answer", rounds_label(1, times), calls)])


ECHO = registry.ProtocolSpec(
    name="echo",
    summary="Every member echoes the question, as often as asked.",
    engine=echo,
    rules=ProtocolRules(
        fields=frozenset(),
        timeouts={"answer": 60.0},
        settings=lambda panel: [("times", f"{EchoSettings.of(panel).times} echoes each")],
    ),
    plan=echo_plan,
    settings=EchoSettings,
    requests=(registry.RequestKind(SAY, demo=say, oracle=say_as_voter),),
    events=(EchoHeard,),
    plain_lines={"echo_heard": heard_line},
    options=(
        registry.CommandOption(
            name="times", flag="--times", help="How many times each member echoes.", kind="int", field="times"
        ),
    ),
)


@pytest.fixture
def echo_protocol() -> Iterator[registry.ProtocolSpec]:
    registry.register(ECHO)
    try:
        yield ECHO
    finally:
        registry.unregister("echo")


def echo_file(folder: Path, *lines: str, models: tuple[str, ...] = ("demo/sage", "demo/skeptic")) -> Path:
    path = folder / "echo.yaml"
    members = "".join(f"  - name: m{index}\n    model: {model}\n" for index, model in enumerate(models, start=1))
    head = "".join(f"{line}\n" for line in lines)
    path.write_text(f"protocol: echo\nquestion: Say it again.\n{head}members:\n{members}", encoding="utf-8")
    return path


def invalid(panel_file: Path) -> str:
    """What `panel validate` says of a file it refuses (exit 2)."""
    outcome = cli("validate", str(panel_file))
    assert outcome.exit_code == 2, outcome.output
    return outcome.output.removeprefix("panel: ").strip()


# Through every command ------------------------------------------------------------------------


def test_panel_run_reads_its_setting_asks_its_own_request_and_writes_its_plain_line(echo_protocol, tmp_path) -> None:
    db = tmp_path / "runs.db"
    result = cli_json("run", str(echo_file(tmp_path, "times: 2")), "--db", str(db))
    assert (result["protocol"], result["calls"]) == ("echo", 4)
    assert result["final_answer"] == "sage echoes: Say it again.", "the demo reply is the spec's writer's"
    with TranscriptReader.open(db) as reader:
        stored = reader.get_run(result["run_id"])
        events = [parse_event(payload) for payload in reader.run_events(stored.id)]
    assert (stored.protocol, stored.config["times"]) == ("echo", 2)
    heard = [event for event in events if isinstance(event, EchoHeard)]
    assert [(event.member, event.round, event.words) for event in heard] == [
        ("m1", 1, 5),
        ("m2", 1, 5),
        ("m1", 2, 5),
        ("m2", 2, 5),
    ], "its own events are stored and read back as its own class"
    plain = cli("run", str(echo_file(tmp_path)), "--db", str(db), columns=None)
    assert plain.exit_code == 0, plain.output
    assert "[round 1] echo  m2 heard 5 words" in plain.stderr
    assert "[round 2]" not in plain.stderr, "times defaults to its settings' 1"


def test_its_command_takes_its_option_and_refuses_what_its_setting_refuses(echo_protocol, tmp_path) -> None:
    panel_file = echo_file(tmp_path)
    helped = cli("echo", "--help")
    assert helped.exit_code == 0 and "--times" in helped.output and "as often as asked" in helped.output
    assert cli_json("echo", str(panel_file), "--times", "3", "--db", str(tmp_path / "r.db"))["calls"] == 6
    refused = cli_refused("echo", str(panel_file), "--times", "9", "--db", str(tmp_path / "r.db"))
    assert refused == "--times: input should be less than or equal to 5."


def test_validate_shows_its_setting_and_locates_what_it_refuses(echo_protocol, tmp_path: Path) -> None:
    panel_file = echo_file(tmp_path, "times: 3", "chairman: m1")
    checked = cli("validate", str(panel_file))
    assert checked.exit_code == 0, checked.output
    assert "echo, 2 members" in checked.stdout and "times: 3 echoes each" in checked.stdout
    assert "chairman: not used by echo" in checked.output
    echo_file(tmp_path, "times: 0")
    assert invalid(panel_file) == f"{panel_file}, line 3: times: input should be greater than or equal to 1."
    echo_file(tmp_path, "tims: 2")
    assert invalid(panel_file) == f"{panel_file}, line 3: tims: unknown field (did you mean 'times'?)."


def test_another_protocols_file_is_warned_about_its_setting_not_refused(echo_protocol, tmp_path: Path) -> None:
    confer = tmp_path / "confer.yaml"
    confer.write_text(
        "protocol: confer\ntimes: 2\nmembers:\n  - {name: a, model: demo/sage}\n  - {name: b, model: demo/skeptic}\n",
        encoding="utf-8",
    )
    checked = cli("validate", str(confer))
    assert checked.exit_code == 0, checked.output
    assert f"{confer}, line 2: times: not used by confer." in checked.output
    confer.write_text(confer.read_text().replace("times: 2", "times: 7"), encoding="utf-8")
    assert invalid(confer) == f"{confer}, line 2: times: input should be less than or equal to 5."


def test_estimate_counts_its_calls_by_its_plan(echo_protocol, tmp_path: Path) -> None:
    estimate = cli_json("estimate", str(echo_file(tmp_path, "times: 3")))
    assert (estimate["protocol"], estimate["calls_low"], estimate["calls_high"]) == ("echo", 6, 6)
    assert [stage["rounds"] for stage in estimate["stages"]] == ["1–3"]


def test_batch_runs_it_once_per_question(echo_protocol, tmp_path: Path) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text("".join(json.dumps({"id": f"q{n}", "question": f"Q{n}?"}) + "\n" for n in (1, 2)))
    summary = cli_json(
        "batch",
        str(echo_file(tmp_path, "times: 2")),
        "--questions",
        str(questions),
        "--db",
        str(tmp_path / "runs.db"),
        "--output",
        str(tmp_path / "out.jsonl"),
        columns=None,
    )
    assert (summary["questions"], summary["answered"], summary["calls"]) == (2, 2, 8)
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [line["final_answer"] for line in lines] == ["sage echoes: Q1?", "sage echoes: Q2?"]


def test_eval_grades_it_and_its_simulated_voters_answer_by_its_own_writer(echo_protocol, tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    rows = [{"id": f"x{n}", "question": f"Which is {n}?", "answer": "b", "options": ["a", "b", "c"]} for n in (1, 2)]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    panel_file = echo_file(tmp_path, models=("demo/oracle@1", "demo/oracle@1"))
    result = cli_json(
        "eval", str(panel_file), "--dataset", str(data), "--protocols", "echo", "--db", str(tmp_path / "r.db")
    )
    echoed = next(system for system in result["systems"] if system["system"] == "echo")
    assert (echoed["questions"], echoed["correct"], echoed["not_measurable"]) == (2, 2, None)
    assert result["theory"]["echo"]["note"] == "no closed form: echo's answer is not a count of the voters' beliefs"
    answers = [item["final_answer"] for item in result["items"] if item["system"] == "echo"]
    assert answers == ["b\n\nechoed by a simulated voter"] * 2


def test_history_show_draws_a_stored_run_of_it(echo_protocol, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run = cli_json("run", str(echo_file(tmp_path, "times: 2")), "--db", str(db))
    shown = cli_ok("history", "show", run["run_id"], "--db", str(db))
    assert "echo" in shown and "sage echoes: Say it again." in shown and "m2" in shown


# What a spec must give, checked when it is registered ----------------------------------------


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            {"requests": (registry.RequestKind("echo.shout", demo="tests.protocols.test_registry:nobody"),)},
            "the demo reply of 'echo.shout' cannot be imported",
        ),
        (
            {"requests": (registry.RequestKind(Task.BALLOT, demo=say),)},
            "the request kind 'ballot' is declared otherwise",
        ),
        ({"engine": None}, "it gives no engine"),
        ({"settings": None}, "--times sets 'times', neither a panel field nor one of its settings"),
        ({"plain_lines": {"echo_said": heard_line}}, "a plain line for 'echo_said', an event type it does not declare"),
        ({"events": (RunStarted,)}, "the event type 'run_started' is taken"),
    ],
)
def test_a_spec_missing_a_part_is_refused_when_it_is_registered(change: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match="^protocol echo: ") as refused:
        registry.register(dataclasses.replace(ECHO, **change))
    assert problem in str(refused.value)
    assert not registry.is_protocol("echo")


def test_a_setting_may_not_shadow_a_field_every_protocol_shares() -> None:
    class Shadowing(ProtocolSettings):
        members: int = 1

    with pytest.raises(ValueError, match="its setting 'members' is a field every protocol shares"):
        registry.register(dataclasses.replace(ECHO, settings=Shadowing))


async def test_an_engine_asking_a_kind_no_spec_declares_is_told_so_by_name(echo_protocol) -> None:
    with pytest.raises(registry.UnknownRequestKind, match="no protocol declares the request kind 'echo.whisper'"):
        demo_reply("sage", RequestBrief(task="echo.whisper", question="q"))
    assert demo_reply("sage", RequestBrief(task=SAY, question="q")) == "sage echoes: q"


def test_every_builtin_protocol_is_a_whole_spec() -> None:
    """Every reference resolves, every kind of request has its replies, every option its field."""
    for protocol in registry.specs():
        assert registry.problems_of(protocol) == [], protocol.name
        assert callable(base.engine_of(protocol.name)), protocol.name
        assert isinstance(base.rules_of(protocol.name), ProtocolRules), protocol.name
        assert callable(plans.plan_of(protocol.name)), protocol.name
        assert protocol.summary.endswith("."), protocol.name


def test_every_kind_of_request_a_builtin_engine_makes_is_declared() -> None:
    """Each with its replies (`problems_of` checks them, and that no two protocols declare one
    kind otherwise: decide asks vote's ballot, declared the same)."""
    assert set(Task) <= set(registry.request_kinds())
    assert registry.spec("decide").requests == registry.spec("vote").requests


def test_a_protocol_no_one_registered_is_refused_with_the_closest_name() -> None:
    with pytest.raises(ConfigError) as refused:
        parse_panel("protocol: conferr\nmembers:\n  - name: a\n    model: demo/sage\n", "p.yaml")
    assert refused.value.message.startswith(
        "p.yaml, line 1: protocol: 'conferr' is not a protocol; did you mean 'confer'?"
    )


# Its views ------------------------------------------------------------------------------------


class EchoStage(StageState):
    """The toy protocol's own table for its `answer` stage."""

    def render(self) -> RenderableType:
        return Text(f"echo stage, round {self.round}")


def echo_stage(stage: str, round_: int | None, seen: RunSoFar) -> StageState:
    return EchoStage(stage, round_)


async def test_a_protocol_names_the_live_view_table_of_its_own_stages() -> None:
    registry.register(dataclasses.replace(ECHO, stage_views={"answer": echo_stage}))
    try:
        console = Console(file=StringIO(), width=100, force_terminal=True)
        view = LiveView(console, animate=False)
        members = [MemberInfo(name="sage", model="demo/sage")]
        for event in (
            RunStarted(protocol="echo", panel="p", question="q", members=members),
            StageStarted(stage="answer", round=2, members=["sage"]),
            StageStarted(stage="review", round=None, members=["sage"]),
        ):
            await view(event)
        view.close()
    finally:
        registry.unregister("echo")
    drawn = console.file.getvalue()  # type: ignore[attr-defined]
    assert "echo stage, round 2" in drawn
    assert "review" in drawn and "echo stage, round None" not in drawn


async def test_the_plain_view_writes_its_own_events_by_its_spec(echo_protocol) -> None:
    stream = StringIO()
    view = PlainView(stream)
    await view(EchoHeard(member="m1", round=3, words=4))
    assert stream.getvalue() == "[round 3] echo  m1 heard 4 words\n"
