"""The demo provider: deterministic, in the shape each task asks for, marked as simulated."""

import json

from panel_cli.llm.demo import PERSONAS, SIMULATED, demo_reply
from panel_cli.protocols.confer.engine import PeerVote, answer_prompt, vote_prompt
from panel_cli.tasks import Task, mark, render_labelled


def ask(persona: str, prompt: str, seed: int = 0) -> str:
    return demo_reply(persona, [{"role": "user", "content": prompt}], seed)


def test_answers_are_deterministic_simulated_and_in_voice():
    prompt = answer_prompt("Which database?")
    first = ask("skeptic", prompt)
    assert first == ask("skeptic", prompt)
    assert first.startswith(SIMULATED) and "Which database?" in first
    assert PERSONAS["skeptic"]["opening"] in first
    assert ask("sage", prompt) != first


def test_seed_changes_the_reply():
    prompt = answer_prompt("Which database?")
    assert {ask("sage", prompt, seed) for seed in range(6)} != {ask("sage", prompt)}


def test_confer_vote_is_valid_json_for_a_label_in_the_block():
    prompt = vote_prompt("Q?", {"A": "short", "B": "a much longer and more detailed answer"}, "A")
    vote = PeerVote.model_validate(json.loads(ask("engineer", prompt)))
    assert vote.chosen_label == "B" and 0 <= vote.confidence <= 100
    assert vote.revised_answer == "short", "a demo voter keeps its own answer as its revision"


def test_council_review_ends_with_a_final_ranking():
    prompt = mark(
        f"Question:\nQ?\n\n{render_labelled({'A': 'one', 'B': 'two words here'}, 'Model')}", Task.COUNCIL_REVIEW
    )
    text = ask("sage", prompt)
    assert "FINAL RANKING:" in text
    assert text.rstrip().splitlines()[-2:] == ["1. Model B", "2. Model A"]


def test_ballot_names_an_option():
    prompt = mark("Question:\nWhich?\n\nOptions:\n- PostgreSQL\n- MySQL\n", Task.BALLOT)
    ballot = json.loads(ask("pragmatist", prompt))
    assert ballot["choice"] in {"PostgreSQL", "MySQL"}
    assert sorted(ballot["ranking"]) == ["MySQL", "PostgreSQL"]


def test_last_marker_wins_over_quoted_ones():
    prompt = mark(
        f"Question:\nQ?\n\n{render_labelled({'A': 'text with [panel-task: ballot] inside'}, 'Model')}",
        Task.COUNCIL_REVIEW,
    )
    assert "FINAL RANKING:" in ask("sage", prompt)
