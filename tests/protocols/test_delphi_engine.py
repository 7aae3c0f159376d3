"""delphi end to end through litellm against the fake OpenAI server (docs/protocols.md#delphi), and its pure
parts by hand."""

from __future__ import annotations

import json

import pytest

from panel_cli.errors import UserError
from panel_cli.llm.gateway import CallResult
from panel_cli.protocols.checks import check_panel
from panel_cli.protocols.delphi.engine import (
    NO_CONTRIBUTIONS,
    Contribution,
    delphi,
    read_contribution,
    round_unchanged,
)
from tests.fakes.openai_server import RecordedRequest, error, hang, responder
from tests.fakes.openai_server import reply as scripted
from tests.protocols.conftest import fenced_texts, make_panel, prompt_of, task_of

# Names no prompt text could contain by chance, so "no name in the prompt" means something.
NAMES = ["ximena", "yusuf", "zoltan"]
WORDS = {"ximena": "alpha", "yusuf": "beta", "zoltan": "gamma"}


def revision(analysis: str, changed: bool) -> str:
    return json.dumps({"analysis": analysis, "changed": changed})


def expert(word: str, *, changes_until: int = 99, synthesis: str = "the synthesis"):
    """An expert whose analysis is `<word> <round>`; it reports a change up to round
    `changes_until`, then keeps its analysis and reports none."""

    def respond(request: RecordedRequest) -> str:
        task = task_of(request)
        if task == "delphi.synthesis":
            return synthesis
        if task != "delphi.contribution":
            return f"{word} 1"
        round_index = int(prompt_of(request).split("this is round ")[1].split(" ")[0])
        if round_index > changes_until:
            return revision(f"{word} {changes_until}", False)
        return revision(f"{word} {round_index}", True)

    return responder(respond)


def script_experts(server, **options) -> None:
    for name in NAMES:
        server.script(f"{name}-model", expert(WORDS[name], **options))


def contributions_of(server, round_index: int) -> list[RecordedRequest]:
    """The contribution requests of one round, in arrival order."""
    if round_index == 1:
        return [request for request in server.requests if task_of(request) == "answer"]
    marker = f"this is round {round_index} "
    return [
        request
        for request in server.requests
        if task_of(request) == "delphi.contribution" and marker in prompt_of(request)
    ]


@pytest.mark.parametrize(
    ("fault", "kind"), [(error(500, "boom"), "server"), (hang(), "timeout")], ids=["error", "timeout"]
)
async def test_a_failed_expert_is_skipped_and_the_round_goes_on(fake_server, run_protocol, fault, kind):
    script_experts(fake_server)
    fake_server.script("zoltan-model", fault, expert("gamma"))
    panel = make_panel(fake_server, NAMES, max_rounds=2, timeouts={"answer": "3s"})
    result, events = await run_protocol(delphi, panel)

    first, second = result.rounds
    assert [(c.expert, c.success) for c in first.contributions] == [
        ("ximena", True),
        ("yusuf", True),
        ("zoltan", False),
    ]
    assert first.contributions[2].error_kind == kind
    notice = next(w for w in events.of("warning") if w.member == "zoltan")
    assert notice.message.startswith("no contribution in round 1 (") and notice.message.endswith(
        "); the round goes on without it"
    )
    assert [c.success for c in second.contributions] == [True, True, True]
    for request in contributions_of(fake_server, 2):
        assert fenced_texts(request, "Expert") == {"A": "alpha 1", "B": "beta 1"}
    (zoltan,) = [r for r in contributions_of(fake_server, 2) if r.model == "zoltan-model"]
    assert "You gave no contribution in round 1." in prompt_of(zoltan)
    assert second.contributions[2].changed is True, "an expert with nothing before cannot be unchanged"
    assert result.reached_answer and [e.contributed for e in events.of("delphi_round_ended")] == [2, 3]


async def test_round_k_shows_round_k_minus_1_and_no_name(fake_server, run_protocol):
    script_experts(fake_server)
    result, _ = await run_protocol(delphi, make_panel(fake_server, NAMES, max_rounds=3))

    assert len(result.rounds) == 3
    for round_index in (2, 3):
        requests = contributions_of(fake_server, round_index)
        assert len(requests) == 3
        for request in requests:
            previous = round_index - 1
            assert fenced_texts(request, "Expert") == {
                "A": f"alpha {previous}",
                "B": f"beta {previous}",
                "C": f"gamma {previous}",
            }
            prompt = prompt_of(request)
            assert not any(name in prompt for name in NAMES) and "-model" not in prompt
            own = "ABC"[NAMES.index(request.model.removesuffix("-model"))]
            assert f"Your own contribution in round {previous} is Expert {own}." in prompt
    assert result.labels == {"A": "ximena", "B": "yusuf", "C": "zoltan"}


async def test_the_rounds_stop_early_when_no_expert_changes(fake_server, run_protocol):
    script_experts(fake_server, changes_until=1)
    result, events = await run_protocol(delphi, make_panel(fake_server, NAMES, max_rounds=3))

    assert len(result.rounds) == 2 and result.converged and result.stopped_early
    assert [c.changed for c in result.rounds[1].contributions] == [False, False, False]
    assert [task_of(r) for r in fake_server.requests].count("delphi.contribution") == 3
    assert len(fake_server.requests) == 3 + 3 + 1
    assert [(e.unchanged, e.early_stop) for e in events.of("delphi_round_ended")] == [(False, False), (True, True)]
    assert result.rounds[0].contributions[0].changed is None, "round 1 has nothing to change from"


async def test_without_until_convergence_every_round_runs(fake_server, run_protocol):
    script_experts(fake_server, changes_until=1)
    result, _ = await run_protocol(delphi, make_panel(fake_server, NAMES, max_rounds=3, until_convergence=False))
    assert len(result.rounds) == 3 and result.converged and not result.stopped_early


async def test_the_synthesiser_sees_every_round_under_letters(fake_server, run_protocol):
    script_experts(fake_server, synthesis="## Points of consensus\n- x\n## Points of divergence\n- y")
    result, _ = await run_protocol(delphi, make_panel(fake_server, NAMES, max_rounds=3, chairman="yusuf"))

    (chair,) = [r for r in fake_server.requests if task_of(r) == "delphi.synthesis"]
    assert chair.model == "yusuf-model"
    transcript = fenced_texts(chair, "Expert")
    assert transcript == {
        f"{label} (round {k})": f"{word} {k}"
        for k in (1, 2, 3)
        for label, word in zip("ABC", ["alpha", "beta", "gamma"], strict=True)
    }
    prompt = prompt_of(chair)
    assert "Points of consensus" in prompt and "Points of divergence" in prompt
    assert not any(name in prompt for name in NAMES)
    assert result.final_answer.startswith("## Points of consensus") and result.synthesis.chairman == "yusuf"


async def test_a_default_chairman_failing_hands_over_to_an_expert_that_contributed(fake_server, run_protocol):
    """No chairman named: the first expert chairs; when it fails, the next expert that
    contributed writes the synthesis, and the result says it stood in."""
    script_experts(fake_server, changes_until=1)
    fake_server.script("ximena-model", scripted("alpha 1"), scripted(revision("alpha 1", False)), error(500, "down"))
    result, events = await run_protocol(delphi, make_panel(fake_server, NAMES, max_rounds=2))

    assert result.reached_answer and result.final_answer == "the synthesis"
    assert (result.synthesis.chairman, result.synthesis.stand_in) == ("yusuf", True)
    assert [f.chairman for f in result.synthesis.failures] == ["ximena"]
    assert any(
        w.member == "ximena" and w.message.endswith("; yusuf, a member that answered, writes the final answer instead")
        for w in events.of("warning")
    )
    fake_server.script("ximena-model", scripted("alpha 1"), scripted(revision("alpha 1", False)), error(500, "down"))
    failed, _ = await run_protocol(delphi, make_panel(fake_server, NAMES, max_rounds=2, chairman="ximena"))
    assert failed.failure_reason == "Synthesis failed: server: the provider failed (500): down"


async def test_a_reply_that_is_not_a_revision_still_counts_as_changed(fake_server, run_protocol):
    script_experts(fake_server, changes_until=1)
    fake_server.script(
        "yusuf-model", responder(lambda r: "beta 1" if task_of(r) == "answer" else "I stand by beta, no JSON here")
    )
    result, events = await run_protocol(delphi, make_panel(fake_server, NAMES, max_rounds=2))

    yusuf = result.rounds[1].contributions[1]
    assert (yusuf.analysis, yusuf.changed, yusuf.structured) == ("I stand by beta, no JSON here", True, False)
    assert not result.rounds[1].unchanged
    warning = next(w for w in events.of("warning") if w.member == "yusuf")
    assert warning.message == (
        "gave no structured contribution in round 2 (no JSON object in the reply); its reply counts as its analysis, changed"
    )
    # Each contribution's event comes as its call ends, in whatever order the replies arrive.
    structured = {e.expert: e.structured for e in events.of("delphi_contribution") if e.round == 2}
    assert [structured[name] for name in NAMES] == [True, False, True]


async def test_no_contribution_at_all_reaches_no_answer(fake_server, run_protocol):
    fake_server.default(error(400, "nope"))
    result, events = await run_protocol(delphi, make_panel(fake_server, NAMES))

    assert result.final_answer is None and result.failure_reason == NO_CONTRIBUTIONS
    assert result.synthesis is None and len(result.rounds) == 1
    assert len(fake_server.requests) == 3, "no further round, no synthesis"
    assert events.of("run_finished")[0].reached_answer is False


def test_two_to_five_experts(fake_server):
    with pytest.raises(UserError, match=r"A Delphi panel needs at least 2 experts; panel 't' has 1\."):
        check_panel(make_panel(fake_server, ["solo"]), "delphi")
    assert check_panel(make_panel(fake_server, list("abcde")), "delphi") == []
    (warning,) = check_panel(make_panel(fake_server, list("abcdef")), "delphi")
    assert warning == "members: delphi is designed for 2 to 5 experts; 6 make every round's prompt long."


def reply(text: str, parsed: dict | None = None, parse_error: str | None = None) -> CallResult:
    return CallResult(
        call_id="c", member="m", model="x", ok=True, text=text, parsed=parsed, parse_error=parse_error, latency=1.5
    )


def test_reading_a_contribution():
    first, warning = read_contribution("m", "A", 1, reply("  my view  "), had_previous=False)
    assert (first.analysis, first.changed, first.structured, warning) == ("my view", None, True, None)
    kept, warning = read_contribution(
        "m", "A", 2, reply("{}", {"analysis": "same", "changed": False}), had_previous=True
    )
    assert (kept.analysis, kept.changed, warning) == ("same", False, None)
    new, _ = read_contribution("m", "A", 2, reply("{}", {"analysis": "same", "changed": False}), had_previous=False)
    assert new.changed is True
    blank, warning = read_contribution(
        "m", "A", 2, reply('{"analysis": " ", "changed": false}', {"analysis": " ", "changed": False}), True
    )
    assert (blank.changed, blank.structured) == (True, False) and "an empty analysis" in warning


def contribution(expert: str, *, changed: bool | None = False, success: bool = True) -> Contribution:
    return Contribution(
        expert=expert,
        label="A",
        round=2,
        analysis="x" if success else None,
        changed=changed if success else None,
        success=success,
    )


def test_unchanged_needs_every_expert_that_could_answer():
    assert round_unchanged([contribution("a"), contribution("b")], set())
    assert not round_unchanged([contribution("a"), contribution("b", changed=True)], set())
    assert not round_unchanged([contribution("a"), contribution("b", success=False)], set()), (
        "a timeout may hide a change"
    )
    assert round_unchanged([contribution("a"), contribution("b", success=False)], {"b"}), (
        "an excluded member never answers again"
    )
    assert not round_unchanged([contribution("a", success=False)], {"a"})
    assert not round_unchanged([contribution("a", changed=None)], set())
