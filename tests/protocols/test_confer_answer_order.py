"""confer's `answer_order: sequential`: members answer one after another, each shown the answers
given before its turn (docs/protocols.md#confer), through litellm against the fake server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from panel_cli.llm.brief import Quoted, RequestBrief
from panel_cli.llm.gateway import Gateway
from panel_cli.protocols.confer.engine import answer_prompt, confer, earlier_answers
from panel_cli.store.reader import TranscriptReader
from panel_cli.tasks import Task
from tests.fakes.openai_server import error, hang, responder
from tests.helpers import cli, cli_json, cli_ok, cli_refused
from tests.protocols.conftest import fenced_texts, make_panel, prompt_of, task_of, vote_json

NAMES = ["ann", "bob", "cy", "dee"]


def answers_then_votes(label: str = "A"):
    """Answer `<model> answer`; vote `label`, keeping the answer shown."""

    def answer(request):
        if task_of(request) == "confer.vote":
            return vote_json(label, 70, f"{request.model} revised")
        return f"{request.model} answer"

    return responder(answer)


@pytest.fixture
def briefs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, RequestBrief]]:
    """Every (member, brief) the engine hands the gateway, in the order of the calls."""
    seen: list[tuple[str, RequestBrief]] = []
    call = Gateway.call

    async def noted(self: Gateway, member: Any, messages: list[dict[str, Any]], **kwargs: Any):
        seen.append((member.name, kwargs["brief"]))
        return await call(self, member, messages, **kwargs)

    monkeypatch.setattr(Gateway, "call", noted)
    return seen


async def test_each_member_answers_in_turn_shown_the_earlier_answers_labelled_as_the_vote_labels_them(
    fake_server, run_protocol, briefs
):
    for name in NAMES:
        fake_server.script(f"{name}-model", answers_then_votes())
    panel = make_panel(fake_server, NAMES, answer_order="sequential", max_rounds=1)
    result, events = await run_protocol(confer, panel)

    answers = [request for request in fake_server.requests if task_of(request) == "answer"]
    assert [request.model for request in answers] == [f"{name}-model" for name in NAMES]
    assert fake_server.requests[: len(NAMES)] == answers, "every answer comes before the first vote"
    given = {label: f"{name}-model answer" for label, name in zip("ABCD", NAMES, strict=True)}
    for turn, request in enumerate(answers):
        assert fenced_texts(request, "Answer") == dict(list(given.items())[:turn])
    assert "build on these answers or disagree" in prompt_of(answers[1])
    assert "build on" not in prompt_of(answers[0]), "the first answers as in a parallel stage"
    votes = [request for request in fake_server.requests if task_of(request) == "confer.vote"]
    assert all(fenced_texts(request, "Answer") == given for request in votes)
    assert result.rounds[0].authors == dict(zip("ABCD", NAMES, strict=True))
    assert len(fake_server.requests) == events.envelope.calls == 2 * len(NAMES)
    stages = [(event.stage, event.round, event.members) for event in events.of("stage_started")]
    assert stages == [("answer", 0, NAMES), ("vote", 1, NAMES)], "one answer stage, as in parallel"

    answer_briefs = [(name, brief) for name, brief in briefs if brief.task == Task.ANSWER]
    assert [name for name, _ in answer_briefs] == NAMES
    for turn, (_, brief) in enumerate(answer_briefs):
        assert brief.quoted == tuple(Quoted(label=label, text=text) for label, text in list(given.items())[:turn])


async def test_a_failed_member_is_skipped_and_the_next_still_answers(fake_server, run_protocol):
    for name in ("ann", "cy"):
        fake_server.script(f"{name}-model", answers_then_votes())
    fake_server.script("bob-model", error(500, "boom"), answers_then_votes())
    panel = make_panel(fake_server, ["ann", "bob", "cy"], answer_order="sequential", max_rounds=1)
    result, _ = await run_protocol(confer, panel)

    answers = [request for request in fake_server.requests if task_of(request) == "answer"]
    assert [request.model for request in answers] == ["ann-model", "bob-model", "cy-model"]
    assert fenced_texts(answers[2], "Answer") == {"A": "ann-model answer"}, "bob's failure is not shown"
    assert result.initial_answers == {"ann": "ann-model answer", "cy": "cy-model answer"}
    assert result.rounds[0].authors == {"A": "ann", "B": "cy"}
    assert [(failure.member, failure.round, failure.kind) for failure in result.failures] == [("bob", 0, "server")]
    assert len(fake_server.requests) == 3 + 3


async def test_each_answer_has_the_whole_time_limit_of_its_own(fake_server, run_protocol):
    """ann hangs until the answer limit ends it; bob, after her, still has the whole limit
    (a deadline shared from the stage's start would leave him none)."""
    fake_server.script("ann-model", hang())
    fake_server.script("bob-model", answers_then_votes())
    panel = make_panel(
        fake_server, ["ann", "bob"], answer_order="sequential", max_rounds=1, timeouts={"answer": "2s", "vote": "5s"}
    )
    result, _ = await run_protocol(confer, panel)
    assert [failure.kind for failure in result.failures[:1]] == ["timeout"]
    assert result.initial_answers == {"bob": "bob-model answer"}
    assert result.final_answer == "bob-model answer"


async def test_parallel_is_the_default_and_shows_no_answer(fake_server, run_protocol, briefs):
    for name in NAMES[:3]:
        fake_server.script(f"{name}-model", answers_then_votes())
    result, _ = await run_protocol(confer, make_panel(fake_server, NAMES[:3], max_rounds=1))
    answers = [request for request in fake_server.requests if task_of(request) == "answer"]
    assert len(answers) == 3 and all(fenced_texts(request, "Answer") == {} for request in answers)
    assert all(brief.quoted == () for _, brief in briefs if brief.task == Task.ANSWER)
    assert result.rounds[0].authors == {"A": "ann", "B": "bob", "C": "cy"}


def test_the_earlier_answers_are_labelled_over_the_members_that_answered():
    class Reply:
        def __init__(self, member: str, text: str, ok: bool = True) -> None:
            self.member, self.text, self.ok = member, text, ok

    before = [Reply("ann", " one "), Reply("bob", "", ok=False), Reply("cy", "three")]
    assert earlier_answers(NAMES, before) == {"A": "one", "B": "three"}  # type: ignore[arg-type]
    assert earlier_answers(NAMES, []) == {}
    assert answer_prompt("Q?", {}) == answer_prompt("Q?")


# From the command line and the panel file --------------------------------------------------------


def test_answer_order_sequential_from_the_command_line(tmp_path):
    db = str(tmp_path / "runs.db")
    args = ("confer", "configs/demo.yaml", "--max-rounds", "1", "--json", "--db", db, "-q", "Tea or coffee?")
    result = cli_json(*args, "--answer-order", "Sequential")
    assert result["calls"] == 8
    with TranscriptReader.open(db) as reader:
        assert reader.get_run(result["run_id"]).config["answer_order"] == "sequential"
        answers = [call for call in reader.run_calls(result["run_id"]) if call.stage == "answer"]
    assert [call.member for call in answers] == ["sage", "skeptic", "pragmatist", "engineer"]
    shown = [str(call.messages[-1]["content"]).count("=== end of Answer ") for call in answers]
    assert shown == [0, 1, 2, 3]
    assert "answer_order: parallel" in cli_ok("validate", "configs/demo.yaml")


def test_a_bad_answer_order_is_one_sentence():
    message = cli_refused("confer", "configs/demo.yaml", "--answer-order", "turns", "-q", "Tea?")
    assert message == "--answer-order: 'turns' is not a known answer order; choose parallel or sequential."


def test_only_confer_reads_answer_order(tmp_path):
    file = tmp_path / "vote.yaml"
    file.write_text(
        "protocol: vote\noptions: [tea, coffee]\nanswer_order: sequential\nmembers:\n"
        "  - {name: a, model: demo/sage}\n  - {name: b, model: demo/skeptic}\n"
    )
    checked = cli("validate", str(file))
    assert checked.exit_code == 0
    assert f"warning: {file}, line 3: answer_order: not used by vote." in checked.stderr
    refused = cli("vote", str(file), "--answer-order", "sequential", "-q", "Tea?")
    assert refused.exit_code == 2 and "No such option: --answer-order" in refused.stderr
    file.write_text("answer_ordr: sequential\nmembers:\n  - {name: a, model: demo/sage}\n")
    typo = cli("validate", str(file))
    assert typo.exit_code == 2
    assert typo.stderr == f"panel: {file}, line 1: answer_ordr: unknown field (did you mean 'answer_order'?).\n"


def test_an_estimate_counts_the_same_calls_and_the_earlier_answers_each_turn_may_quote(tmp_path):
    sequential = tmp_path / "sequential.yaml"
    sequential.write_text(Path("configs/demo.yaml").read_text() + "answer_order: sequential\n")
    at_once = cli_json("estimate", "configs/demo.yaml", "-q", "Tea or coffee?")
    in_turn = cli_json("estimate", str(sequential), "-q", "Tea or coffee?")
    assert (in_turn["calls_low"], in_turn["calls_high"]) == (at_once["calls_low"], at_once["calls_high"]) == (8, 16)
    # Answering in turn, the k-th answer may quote k − 1 replies at their longest (4,096 tokens each).
    assert in_turn["prompt_tokens_high"] - at_once["prompt_tokens_high"] > (1 + 2 + 3) * 4096
