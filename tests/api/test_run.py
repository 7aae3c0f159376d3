"""`panel_cli.run`, `arun` and `stream` (docs/python.md): the run the command line makes, from
Python, writing nothing anywhere but the store, and raising what the command line would say.

Panels of demo personas run offline; panels of real models run on the fake OpenAI server through
litellm's real path."""

from __future__ import annotations

import asyncio
import json
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest

import panel_cli
from panel_cli.errors import PanelError
from panel_cli.protocols.registry import specs
from panel_cli.runs.panels import panels_folder
from panel_cli.store.subscriber import StoreFailure
from tests.fakes.openai_server import FakeOpenAIServer, after, hang, reply, reply_json
from tests.helpers import ROOT, cli, cli_json, cli_refused, member, run_python

DEMO = str(ROOT / "configs" / "demo.yaml")
VOTE = str(ROOT / "configs" / "vote.yaml")
# What differs between two runs of the same panel: the run's id and its wall time.
PER_RUN = ("run_id", "duration_s")


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "fake-test-key")


def same_run(payload: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in payload.items() if key not in PER_RUN}


def fake_panel(server: FakeOpenAIServer, *names: str, **fields: Any) -> panel_cli.Panel:
    fields.setdefault("defaults", {"retries": 0})
    return panel_cli.Panel(name="fake", members=[member(server, name) for name in names], **fields)


# The run and its result ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("panel", "options", "args"),
    [
        (DEMO, {}, []),
        (VOTE, {"gate": "MySQL", "method": "plurality"}, ["--gate", "MySQL", "--method", "plurality"]),
        (
            VOTE,
            {"choices": ["PostgreSQL", "SQLite"], "quorum": 2},
            ["--options", "PostgreSQL", "SQLite", "--quorum", "2"],
        ),
    ],
)
def test_the_result_is_what_json_prints_for_the_same_run(panel, options, args, tmp_path) -> None:
    result = panel_cli.run(panel, **options)
    printed = cli_json("run", panel, *args, code=0 if result.gate is None or result.gate.passed else 1)
    assert list(result.to_dict()) == list(printed)
    assert same_run(result.to_dict()) == same_run(printed)
    assert (result.run_id, result.final_answer, result.cost) == (
        result.to_dict()["run_id"],
        printed["final_answer"],
        0.0,
    )


def test_the_run_is_stored_as_the_command_line_stores_it() -> None:
    result = panel_cli.run(DEMO, "Which database first?")
    record = panel_cli.history.get_run(result.run_id)
    assert (record.status, record.question, record.final_answer) == (
        "finished",
        "Which database first?",
        result.final_answer,
    )
    assert panel_cli.history.get_result(result.run_id) == result
    events = panel_cli.history.run_events(result.run_id)
    assert (events[0].type, events[-1].type) == ("run_started", "run_finished")


def test_a_panel_built_in_code_runs_on_real_models(fake_server) -> None:
    fake_server.default(reply("Use PostgreSQL."))
    result = panel_cli.run(fake_panel(fake_server, "x", "y"), "Which database?", protocol="council")
    assert (result.protocol, result.reached_answer, result.calls) == ("council", True, 5)
    assert len(fake_server.requests) == 5
    assert panel_cli.history.get_run(result.run_id).members[0].name == "x"


async def test_arun_serves_its_loop_meanwhile_and_hears_every_event() -> None:
    heard: list[str] = []

    async def hear(event: Any) -> None:
        heard.append(event.type)

    vote, council = await asyncio.gather(
        panel_cli.arun(VOTE, on_event=hear), panel_cli.arun("council.demo", on_event=lambda event: None)
    )
    assert vote.details["winner"] == "MySQL" and council.reached_answer
    assert heard[0] == "run_started" and heard[-1] == "run_finished"
    assert heard.count("vote_received") == 6


def test_a_run_that_reaches_no_answer_is_a_result_not_an_error() -> None:
    result = panel_cli.run(VOTE, method="majority")
    assert (result.reached_answer, result.final_answer) == (False, None)
    assert result.failure_reason == result.details["failure_reason"] == result.to_dict()["failure_reason"]
    assert result.failure_reason.startswith("no option has more than half")


def test_a_gate_is_judged_in_the_result() -> None:
    result = panel_cli.run(VOTE, gate="postgresql")
    assert result.gate == panel_cli.GateVerdict(
        option="PostgreSQL", passed=False, exit_status=1, reason="MySQL won, not PostgreSQL"
    )


# Nothing printed ---------------------------------------------------------------------------------


async def test_the_library_writes_nothing_on_stdout_or_stderr(fake_server, capfd) -> None:
    fake_server.default(reply_json({"choice": "A", "ranking": ["A", "B"], "confidence": 90, "reason": "r"}))
    real = fake_panel(fake_server, "x", "y", "z", options=["A", "B"])
    await panel_cli.arun(real, "A or B?", protocol="vote", gate="A")
    await panel_cli.arun(DEMO, max_calls=5)
    async with aclosing(panel_cli.stream("delphi.demo", text=True)) as events:
        kinds = [event.type async for event in events]
    with pytest.raises(panel_cli.OptionError):
        await panel_cli.arun(VOTE, gate="Oracle")
    assert "call_text_grew" in kinds
    assert capfd.readouterr() == ("", "")


def test_run_from_a_thread_without_a_loop_writes_nothing_either(capfd) -> None:
    panel_cli.run("supervise.demo", gate="approved")
    assert capfd.readouterr() == ("", "")


# Errors --------------------------------------------------------------------------------------


def bad_file(tmp_path: Path) -> str:
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\nmembers:\n  - name: a\n    model: demo/sage\n    temprature: 0.2\n")
    return str(path)


NO_NAME = "{} is no file's name: it holds a NUL byte or a lone surrogate."


@pytest.mark.parametrize(
    ("call", "kind", "message"),
    [
        (lambda tmp: panel_cli.run(str(tmp / "none.yaml")), panel_cli.PanelFileError, "none.yaml: no such file."),
        (
            lambda tmp: panel_cli.run(bad_file(tmp), "Q?"),
            panel_cli.ConfigError,
            "line 5: members[0].temprature: unknown field (did you mean 'temperature'?).",
        ),
        (lambda tmp: panel_cli.run(DEMO, max_cost=-1), panel_cli.BudgetError, "--max-cost: -1 is not an amount"),
        (lambda tmp: panel_cli.run(DEMO, max_calls=0), panel_cli.BudgetError, "--max-calls: 0 is not in the range"),
        (
            lambda tmp: panel_cli.run(DEMO, max_rounds=0),
            panel_cli.OptionError,
            "--max-rounds: 0 is not in the range 1<=x<=50.",
        ),
        (
            lambda tmp: panel_cli.run(DEMO, max_rounds="2"),
            panel_cli.OptionError,
            "--max-rounds: '2' is not a whole number.",
        ),
        (lambda tmp: panel_cli.run(VOTE, choices="A B"), panel_cli.OptionError, "--options: give a list of strings."),
        (
            lambda tmp: panel_cli.run(DEMO, rounds=2),
            panel_cli.UnknownOptionError,
            "confer takes no option 'rounds'; its options are members, max_rounds, tally, answer_order, no_convergence, stop.",
        ),
        (
            lambda tmp: panel_cli.run(DEMO, protocol="conferr"),
            panel_cli.UserError,
            "'conferr' is not a protocol; did you mean 'confer'?",
        ),
        (
            lambda tmp: panel_cli.run(panel_cli.Panel(name="p", members=[{"name": "a", "model": "demo/sage"}])),
            panel_cli.UserError,
            "No question: give one, or give the panel a question or question_file.",
        ),
        (lambda tmp: panel_cli.run("no-such-panel"), panel_cli.PanelFileError, "No panel is called 'no-such-panel'"),
        (
            lambda tmp: panel_cli.run(DEMO, " "),
            panel_cli.UserError,
            "The question is empty; give one, or None to ask the panel's own.",
        ),
        (
            lambda tmp: panel_cli.run(DEMO, "Tea?", follow_up=""),
            panel_cli.UserError,
            "No run has the id ''",
        ),
        (lambda tmp: panel_cli.run("configs/demo.yaml", dry_run=True), panel_cli.UnknownOptionError, "'dry_run'"),
        (lambda tmp: panel_cli.run("demo\x00.yaml", "Q?"), panel_cli.PanelFileError, NO_NAME.format("panel")),
        (lambda tmp: panel_cli.run("\ud800.yaml", "Q?"), panel_cli.PanelFileError, NO_NAME.format("panel")),
        (lambda tmp: panel_cli.run(DEMO, "Q?", db=tmp / "x\x00.db"), panel_cli.UserError, NO_NAME.format("db")),
        (lambda tmp: panel_cli.run(DEMO, "Q?", db="\ud800.db"), panel_cli.UserError, NO_NAME.format("db")),
        (lambda tmp: panel_cli.run(DEMO, "Q?", attach=["a\x00"]), panel_cli.UserError, NO_NAME.format("attach")),
        (lambda tmp: panel_cli.history.list_runs(db="\ud800.db"), panel_cli.UserError, NO_NAME.format("db")),
    ],
)
def test_bad_input_raises_one_sentence_before_any_call(call, kind, message, tmp_path) -> None:
    with pytest.raises(kind) as raised:
        call(tmp_path)
    assert message in raised.value.message
    assert raised.value.exit_code == 2 and isinstance(raised.value, PanelError)
    assert not (tmp_path / "panel.db").exists()


def test_an_unknown_option_is_a_type_error_too() -> None:
    with pytest.raises(TypeError, match="its options are"):
        panel_cli.run(VOTE, bogus=True)


@pytest.mark.parametrize(
    ("options", "args"),
    [
        ({"method": "bogus"}, ["--method", "bogus"]),
        ({"gate": "Oracle"}, ["--gate", "Oracle"]),
        ({"threshold": 0.8}, ["--threshold", "0.8"]),
        ({"choices": ["A", "a"]}, ["--options", "A", "a"]),
    ],
)
def test_an_option_refuses_what_the_command_line_refuses_in_its_words(options, args) -> None:
    with pytest.raises(panel_cli.OptionError) as raised:
        panel_cli.run(VOTE, **options)
    assert raised.value.message == cli_refused("vote", VOTE, *args)


def test_a_missing_key_is_named_before_any_call(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    file = tmp_path / "p.yaml"
    file.write_text("name: p\nmembers:\n  - {name: x, model: openai/gpt-4o-mini}\n  - {name: y, model: demo/sage}\n")
    with pytest.raises(panel_cli.MissingKeyError) as raised:
        panel_cli.run(file, "Q?", protocol="council")
    assert raised.value.message == cli_refused("council", str(file), "-q", "Q?")
    assert raised.value.message.startswith("Member 'x' (openai/gpt-4o-mini) needs OPENAI_API_KEY.")
    assert not (tmp_path / "panel.db").exists()


def test_an_unknown_price_under_a_cost_cap_is_a_budget_error(fake_server) -> None:
    panel = fake_panel(fake_server, "no-price-model", "y", question="Q?")
    with pytest.raises(panel_cli.BudgetError, match="--max-cost cannot bound this run"):
        panel_cli.run(panel, max_cost=1.0)
    assert panel_cli.run(panel, max_cost=1.0, allow_unknown_prices=True, protocol="council") is not None


def test_a_panel_that_is_not_one_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="panel is a path, a panel's name or a panel_cli.Panel, not int"):
        panel_cli.run(3)  # type: ignore[arg-type]


async def test_run_inside_a_running_loop_says_to_await_arun() -> None:
    with pytest.raises(RuntimeError, match=r"await panel_cli\.arun"):
        panel_cli.run(DEMO)


async def test_what_the_store_could_not_keep_is_raised_with_the_result(monkeypatch) -> None:
    from panel_cli.runs import ask

    async def disk_full(store: Any) -> StoreFailure:
        await store.close()
        return StoreFailure("could not write run x: the disk is full.")

    monkeypatch.setattr(ask, "closed", disk_full)
    with pytest.raises(panel_cli.StoreFailure) as raised:
        await panel_cli.arun(DEMO)
    assert raised.value.message == "could not write run x: the disk is full."
    assert raised.value.result.reached_answer  # type: ignore[attr-defined]


# Names ---------------------------------------------------------------------------------------


def test_a_name_is_a_panel_in_the_config_directory_else_a_starter(tmp_path, monkeypatch) -> None:
    config = panels_folder()
    config.mkdir(parents=True)
    (config / "review.yaml").write_text((ROOT / "configs" / "vote.yaml").read_text().replace("vote-demo", "review"))
    assert panel_cli.run("review").to_dict()["protocol"] == "vote"
    assert panel_cli.history.get_run("last").panel == "review"
    assert panel_cli.run("vote.demo").protocol == "vote"
    with pytest.raises(panel_cli.PanelFileError, match="There is no default panel yet"):
        panel_cli.run("default", "Q?")
    (config.parent / "defaults.yaml").write_text("name: mine\nmembers:\n  - name: a\n    model: demo/sage\n")
    assert panel_cli.history.get_run(panel_cli.run("default", "Q?").run_id).panel == "mine"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "review").write_text("name: here\nquestion: Q?\nmembers:\n  - name: a\n    model: demo/sage\n")
    assert panel_cli.history.get_run(panel_cli.run("review").run_id).panel == "here"  # a file here is a path


def test_no_api_keyword_is_a_protocols_option_name() -> None:
    import inspect

    keywords = set(inspect.signature(panel_cli.arun).parameters) - {"options"}
    for spec in specs():
        assert keywords.isdisjoint(option.name for option in spec.options), spec.name


# stream, notices, stopping ---------------------------------------------------------------------


async def test_stream_yields_the_runs_events_in_order_ending_with_its_result() -> None:
    async with aclosing(panel_cli.stream(VOTE)) as events:
        seen = [event async for event in events]
    assert [event.seq for event in seen] == list(range(1, len(seen) + 1))
    assert seen[-1].type == "run_finished"
    assert panel_cli.RunResult.from_payload(seen[-1].result) == panel_cli.history.get_result(seen[0].run_id)
    assert not any(event.type == "call_text_grew" for event in seen)


@pytest.mark.subprocess
async def test_a_notice_comes_before_litellm_is_needed_and_before_any_call(fake_server) -> None:
    elsewhere = panel_cli.Panel(
        name="proxy",
        question="Q?",
        members=[{"name": "x", "model": "openai/x", "api_base": "https://proxy.example.com/v1"}],
    )
    notices: list[Any] = []

    async def stop_at_the_notice(event: Any) -> None:
        notices.append(event)
        raise KeyError("stop")

    with pytest.raises(KeyError):
        await panel_cli.arun(elsewhere, on_event=stop_at_the_notice)
    assert [type(event) for event in notices] == [panel_cli.Notice]
    assert notices[0].message.startswith("warning: OPENAI_API_KEY is sent to proxy.example.com")
    assert panel_cli.history.list_runs() == []


async def test_a_run_cancelled_mid_way_is_stored_interrupted_and_resumes(fake_server) -> None:
    fake_server.script("x", reply("Answer x."))
    fake_server.script("y", hang(), reply("Answer y."))
    running: list[asyncio.Task[Any]] = []

    def hear(event: Any) -> None:
        if event.type == "call_finished":
            running[0].cancel()

    panel = fake_panel(fake_server, "x", "y")
    running.append(asyncio.create_task(panel_cli.arun(panel, "Which?", protocol="council", on_event=hear)))
    with pytest.raises(asyncio.CancelledError):
        await running[0]
    (stopped,) = panel_cli.history.list_runs()
    assert stopped.status == "interrupted"
    assert stopped.calls_by_status["answered"] == 1 and stopped.calls_by_status["cancelled"] == 1
    resumed = await asyncio.to_thread(cli, "resume", stopped.id, "--json")
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(resumed.stdout)["calls_by_status"]["reused"] == 1


async def test_closing_a_stream_early_stops_the_run(fake_server) -> None:
    fake_server.script("x", reply("Answer x."))
    fake_server.script("y", after(lambda: False, reply("never"), guard=60))
    async with aclosing(panel_cli.stream(fake_panel(fake_server, "x", "y"), "Which?", protocol="council")) as events:
        async for event in events:
            if event.type == "call_finished":
                break
    (stopped,) = panel_cli.history.list_runs()
    assert stopped.status == "interrupted"
    assert stopped.calls_by_status["answered"] == 1 and stopped.calls_by_status["cancelled"] == 1


# The package ---------------------------------------------------------------------------------


@pytest.mark.subprocess
def test_importing_the_package_imports_nothing_heavy() -> None:
    code = (
        "import sys, panel_cli\n"
        "heavy = ('pydantic', 'litellm', 'rich', 'panel_cli.config', 'panel_cli.store', 'panel_cli.api')\n"
        "print(sorted({h for h in heavy for m in sys.modules if m == h or m.startswith(h + '.')}))\n"
    )
    done = run_python(code)
    assert done.stdout.strip() == "[]", done.stderr


def test_every_public_name_is_there_and_typed() -> None:
    for name in panel_cli.__all__:
        assert getattr(panel_cli, name) is not None
        assert name in dir(panel_cli)
    assert issubclass(panel_cli.UnknownOptionError, panel_cli.OptionError)
    assert all(
        issubclass(getattr(panel_cli, error), panel_cli.PanelError)
        for error in panel_cli.__all__
        if error.endswith(("Error", "Failure"))
    )
    assert (Path(panel_cli.__file__).parent / "py.typed").is_file()
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        panel_cli.nothing  # noqa: B018


def test_terminal_controls_leave_a_question_given_in_python(tmp_path) -> None:
    result = panel_cli.run(DEMO, "Tea\x1b]52;c;QUFB\x07 or \u202ecoffee?", db=tmp_path / "r.db")
    assert result.question == "Tea or coffee?"
    assert "\x1b" not in (result.final_answer or "")
