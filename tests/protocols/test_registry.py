"""A protocol is declared once, by its spec: registered here, a toy protocol gets its command, its
own option, `panel run`, `panel validate` and the file's `protocol:` without any other change."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console, RenderableType
from rich.text import Text

from panel_cli.config import Panel, parse_panel
from panel_cli.errors import ConfigError, UserError
from panel_cli.events import MemberInfo, RunStarted, StageStarted
from panel_cli.llm.gateway import Gateway
from panel_cli.protocols import base, plans, registry
from panel_cli.protocols.base import Emit, ProtocolResult, ProtocolRules
from panel_cli.store.reader import TranscriptReader
from panel_cli.view.live import LiveView
from panel_cli.view.tables import RunSoFar, StageState
from tests.helpers import cli


async def echo(panel: Panel, question: str, gateway: Gateway, emit: Emit) -> ProtocolResult:
    """Every member answers `max_rounds` times; the answer says how many replies came back."""
    replies = [
        await gateway.call(member, [{"role": "user", "content": question}], stage="answer", round=round_)
        for round_ in range(1, panel.max_rounds + 1)
        for member in panel.members
    ]
    return ProtocolResult(final_answer=f"{sum(reply.ok for reply in replies)} echoes")


ECHO = registry.ProtocolSpec(
    name="echo",
    summary="Every member answers, as often as asked.",
    engine=echo,
    rules=ProtocolRules(fields=frozenset({"max_rounds"}), timeouts={"answer": 60.0}),
    options=(
        registry.CommandOption(
            name="times", flag="--times", help="How many times each member answers.", kind="int", field="max_rounds"
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


def echo_file(folder: Path) -> Path:
    path = folder / "echo.yaml"
    members = "".join(f"  - name: {name}\n    model: demo/{name}\n" for name in ("sage", "skeptic"))
    path.write_text(f"protocol: echo\nquestion: Say it again.\nmembers:\n{members}", encoding="utf-8")
    return path


def test_a_registered_protocol_runs_through_panel_run_with_its_own_option(echo_protocol, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    outcome = cli("run", str(echo_file(tmp_path)), "--times", "3", "--json", "--db", str(db))
    assert outcome.exit_code == 0, outcome.output
    result = json.loads(outcome.stdout)
    assert (result["protocol"], result["final_answer"], result["calls"]) == ("echo", "6 echoes", 6)
    with TranscriptReader.open(db) as reader:
        stored = reader.get_run(result["run_id"])
    assert (stored.protocol, stored.config["max_rounds"], stored.final_answer) == ("echo", 3, "6 echoes")


def test_its_own_command_takes_the_same_option_and_refuses_what_the_field_refuses(echo_protocol, tmp_path) -> None:
    panel_file = echo_file(tmp_path)
    helped = cli("echo", "--help")
    assert helped.exit_code == 0 and "--times" in helped.output and "as often as asked" in helped.output
    ran = cli("echo", str(panel_file), "--times", "1", "--json", "--db", str(tmp_path / "r.db"))
    assert ran.exit_code == 0, ran.output
    assert json.loads(ran.stdout)["calls"] == 2
    refused = cli("echo", str(panel_file), "--times", "0", "--db", str(tmp_path / "r.db"))
    assert isinstance(refused.exception, UserError), refused.output  # `main` makes it one sentence and exit 2
    assert refused.exception.message == "--times: input should be greater than or equal to 1."


def test_validate_checks_a_registered_protocol_by_its_rules(echo_protocol, tmp_path: Path) -> None:
    panel_file = echo_file(tmp_path)
    panel_file.write_text(panel_file.read_text() + "chairman: sage\n", encoding="utf-8")
    checked = cli("validate", str(panel_file))
    assert checked.exit_code == 0, checked.output
    assert "echo, 2 members" in checked.stdout
    assert "chairman: not used by echo" in checked.output


def test_a_protocol_no_one_registered_is_refused_with_the_closest_name() -> None:
    with pytest.raises(ConfigError) as refused:
        parse_panel("protocol: conferr\nmembers:\n  - name: a\n    model: demo/sage\n", "p.yaml")
    assert refused.value.message.startswith(
        "p.yaml, line 1: protocol: 'conferr' is not a protocol; did you mean 'confer'?"
    )


def test_every_builtin_protocol_is_a_spec_whose_references_resolve() -> None:
    for protocol in registry.specs():
        assert callable(base.engine_of(protocol.name)), protocol.name
        assert isinstance(base.rules_of(protocol.name), ProtocolRules), protocol.name
        assert callable(plans.plan_of(protocol.name)), protocol.name
        assert protocol.summary.endswith("."), protocol.name


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
