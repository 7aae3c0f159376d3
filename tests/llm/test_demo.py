"""The demo personas: deterministic, in the shape each brief asks for, marked as simulated,
and deaf to the prompt's wording."""

import json

import pytest

from panel_cli.llm.brief import Quoted, RequestBrief, quote
from panel_cli.llm.demo_replies import cite_tool_results, demo_reply, demo_tool_call
from panel_cli.models.personas import PERSONAS
from panel_cli.protocols.confer.engine import PeerVote
from panel_cli.protocols.orchestrate.plan import read_plan
from panel_cli.simulation.seeded import SIMULATED
from panel_cli.tasks import Task

LOOKUP = {
    "type": "function",
    "function": {"name": "lookup", "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}},
}


def ask(persona: str, brief: RequestBrief, seed: int = 0) -> str:
    return demo_reply(persona, brief, seed)


def test_answers_are_deterministic_simulated_and_in_voice():
    brief = RequestBrief(task=Task.ANSWER, question="Which database?")
    first = ask("skeptic", brief)
    assert first == ask("skeptic", brief)
    assert first.startswith(SIMULATED) and "Which database?" in first
    assert PERSONAS["skeptic"]["opening"] in first
    assert ask("sage", brief) != first


def test_seed_changes_the_reply():
    brief = RequestBrief(task=Task.ANSWER, question="Which database?")
    assert {ask("sage", brief, seed) for seed in range(6)} != {ask("sage", brief)}


def test_a_long_question_is_echoed_on_one_line_and_cut_visibly():
    brief = RequestBrief(task=Task.ANSWER, question="word\n" * 400)
    answer = ask("sage", brief)
    assert "\n" not in answer and " …”" in answer


def test_confer_vote_is_valid_json_for_a_label_in_the_block():
    brief = RequestBrief(
        task=Task.CONFER_VOTE,
        question="Q?",
        quoted=quote({"A": "short", "B": "a much longer and more detailed answer"}),
        own="A",
    )
    vote = PeerVote.model_validate(json.loads(ask("engineer", brief)))
    assert vote.chosen_label == "B" and 0 <= vote.confidence <= 100
    assert vote.revised_answer == "short", "a demo voter keeps its own answer as its revision"


@pytest.mark.parametrize(
    ("task", "shown", "ranking"),
    [
        (Task.COUNCIL_REVIEW, {"A": "one", "B": "two words here"}, ["1. Model B", "2. Model A"]),
        (Task.COUNCIL_REVIEW_NAMED, {"ann": "one", "bob": "two words here"}, ["1. bob", "2. ann"]),
    ],
)
def test_council_review_ends_with_a_final_ranking_of_what_it_was_shown(task, shown, ranking):
    text = ask("sage", RequestBrief(task=task, question="Q?", quoted=quote(shown)))
    assert "FINAL RANKING:" in text
    assert text.rstrip().splitlines()[-2:] == ranking


def test_ballot_names_one_of_the_briefs_options_and_prose_voters_write_prose():
    brief = RequestBrief(task=Task.BALLOT, question="Which?", options=("PostgreSQL", "MySQL"))
    ballot = json.loads(ask("pragmatist", brief))
    assert ballot["choice"] in {"PostgreSQL", "MySQL"}
    assert sorted(ballot["ranking"]) == ["MySQL", "PostgreSQL"]
    prose = ask("skeptic", brief)
    assert prose.startswith(SIMULATED) and prose.rstrip(".").endswith(("PostgreSQL", "MySQL"))


def test_the_critic_sends_back_the_weakest_deliverable_once_then_approves():
    shown = quote({"api": "a thorough deliverable with many distinct words in it", "docs": "thin"})
    first = json.loads(ask("sage", RequestBrief(task=Task.CRITIC, quoted=shown, round=1)))
    assert first["verdict"] == "REJECTED" and list(first["feedback"]) == ["docs"]
    later = json.loads(ask("sage", RequestBrief(task=Task.CRITIC, quoted=shown, round=2)))
    assert later == {"verdict": "APPROVED", "feedback": {}}


def test_a_plan_uses_the_briefs_workers_and_is_valid():
    brief = RequestBrief(task=Task.PLAN, question="Q?", workers=("scout", "judge", "scribe"))
    tasks = read_plan(ask("sage", brief), ["scout", "judge", "scribe"])
    assert [task.worker for task in tasks] == ["scout", "scout", "judge", "scribe"]
    assert tasks[-1].depends_on == ["t3", "t2"]


def test_a_subtask_output_names_its_worker_subtask_and_inputs():
    brief = RequestBrief(
        task=Task.ORCHESTRATE_TASK,
        question="Q?",
        worker="analysis",
        subtask="t3",
        title="Weigh the options",
        quoted=quote({"t1": "facts"}),
    )
    text = ask("engineer", brief)
    assert text.startswith(f"{SIMULATED} Weigh the options (t3, the analysis worker, in the voice of the engineer)")
    assert text.endswith("It builds on t1.")


def test_a_correction_corrects_the_workers_first_deliverable_as_asked():
    work = RequestBrief(task=Task.SUPERVISE_WORK, question="Goal?", assignment="Write the API")
    delivered = ask("sage", work)
    correction = RequestBrief(
        task=Task.SUPERVISE_CORRECTION, question="Goal?", assignment="Write the API", feedback="Add numbers."
    )
    corrected = ask("sage", correction)
    assert corrected.startswith(f"{SIMULATED} Corrected. {delivered.removeprefix(SIMULATED).strip()} ")
    assert "As the critic asked: Add numbers;" in corrected


def test_delphi_synthesis_reads_each_experts_latest_round():
    points = "Run a small pilot with real users before the full rollout."
    transcript = (
        Quoted(label="A", text="nothing much", round=1),
        Quoted(label="B", text="nothing much", round=1),
        Quoted(label="A", text=points, round=2),
        Quoted(label="B", text=points, round=2),
    )
    text = ask("sage", RequestBrief(task=Task.DELPHI_SYNTHESIS, question="Q?", quoted=transcript))
    assert "from 2 experts over 2 rounds" in text
    assert f"## Points of consensus\n- {points}" in text


def test_an_unknown_persona_is_refused():
    with pytest.raises(ValueError, match="unknown demo persona 'nobody'"):
        ask("nobody", RequestBrief())


def test_a_persona_looks_up_the_question_once_then_cites_what_it_found():
    brief = RequestBrief(task=Task.ANSWER, question="How do we isolate tenants?")
    call = demo_tool_call(brief, [LOOKUP], ())
    assert call is not None and (call.name, call.arguments) == ("lookup", '{"query": "How do we isolate tenants?"}')
    assert demo_tool_call(brief, None, ()) is None, "offered no tools, it answers"
    found = ["## Tenants\nUse row-level security."]
    assert demo_tool_call(brief, [LOOKUP], found) is None, "it looks up once"
    assert cite_tool_results("My answer.", found) == "My answer.\n\nFrom what I looked up: “Use row-level security.”"
    assert cite_tool_results("My answer.", ["Error: the server is gone"]) == (
        "My answer.\n\nI tried to look this up, but the tool failed (the server is gone)."
    )
    assert cite_tool_results("My answer.", ()) == "My answer."
