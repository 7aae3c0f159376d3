"""`demo/oracle@p`: simulated voters of known accuracy, who learn the gold answer only from the
marker eval puts in their system message."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from panel_cli.config import Member
from panel_cli.llm.demo import demo_reply, is_persona, oracle_accuracy, oracle_marker
from panel_cli.protocols.confer import engine as confer
from panel_cli.protocols.council import engine as council
from panel_cli.protocols.council.ranking import RankedMember
from panel_cli.protocols.vote import engine as vote
from panel_cli.tasks import fence_tag

OPTIONS = ["London", "Paris", "Rome", "Berlin"]
QUESTION = "What is the capital of France?\n\nOptions:\n- London\n- Paris\n- Rome\n- Berlin"


def marked(
    prompt: str, *, voter: str = "v1", key: str = "0:q1", gold: str = "Paris", options: list[str] | None = None
) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": oracle_marker(voter, key, gold, OPTIONS if options is None else options)},
        {"role": "user", "content": prompt},
    ]


def first_line(text: str) -> str:
    return text.splitlines()[0]


@pytest.mark.parametrize("name, p", [("oracle@0.7", 0.7), ("oracle@1", 1.0), ("oracle@0", 0.0), ("oracle@.25", 0.25)])
def test_oracle_names(name, p):
    assert oracle_accuracy(name) == p
    assert is_persona(name)


@pytest.mark.parametrize(
    "name", ["oracle@", "oracle@1.5", "oracle@-0.1", "oracle@nan", "oracle@x", "oracle", "sage@0.7"]
)
def test_not_oracle_names(name):
    assert oracle_accuracy(name) is None
    assert not is_persona(name)


def test_a_member_may_be_an_oracle_and_not_an_impossible_one():
    assert Member(name="v", model="demo/oracle@0.7").model == "demo/oracle@0.7"
    with pytest.raises(ValidationError, match="unknown demo persona 'oracle@2'"):
        Member(name="v", model="demo/oracle@2")


def test_a_certain_oracle_answers_the_gold_and_a_hopeless_one_never_does():
    prompt = confer.answer_prompt(QUESTION)
    assert first_line(demo_reply("oracle@1", marked(prompt))) == "Paris"
    for key in range(50):
        answer = first_line(demo_reply("oracle@0", marked(prompt, key=f"0:q{key}")))
        assert answer in OPTIONS and answer != "Paris"


def test_an_oracle_is_right_with_its_probability():
    prompt = confer.answer_prompt(QUESTION)
    n = 4000
    right = sum(
        first_line(demo_reply("oracle@0.7", marked(prompt, key=f"7:q{index}"))) == "Paris" for index in range(n)
    )
    # 4 binomial standard errors: by chance alone, outside about once in 16,000 seeds.
    assert abs(right / n - 0.7) <= 4 * (0.7 * 0.3 / n) ** 0.5


def test_wrong_answers_are_spread_over_the_wrong_options():
    prompt = confer.answer_prompt(QUESTION)
    wrong = [first_line(demo_reply("oracle@0", marked(prompt, key=f"0:q{index}"))) for index in range(300)]
    counts = {option: wrong.count(option) for option in ("London", "Rome", "Berlin")}
    assert sum(counts.values()) == 300
    assert all(60 <= count <= 140 for count in counts.values()), counts


def test_an_oracle_is_deterministic_and_each_voter_draws_on_its_own():
    prompt = confer.answer_prompt(QUESTION)
    assert demo_reply("oracle@0.5", marked(prompt)) == demo_reply("oracle@0.5", marked(prompt))
    answers = {
        voter: [first_line(demo_reply("oracle@0.5", marked(prompt, voter=voter, key=f"0:q{i}"))) for i in range(40)]
        for voter in ("v1", "v2")
    }
    assert answers["v1"] != answers["v2"]


def test_a_marker_outside_the_system_message_is_ignored():
    """Question text (or a quoted answer) cannot forge a marker: without its system marker an
    oracle knows nothing, and a forged line beside the real one changes nothing."""
    forged = oracle_marker("v1", "0:q1", "Rome", OPTIONS)
    prompt = confer.answer_prompt(f"{QUESTION}\n{forged}")
    assert first_line(demo_reply("oracle@1", marked(prompt))) == "Paris"
    unmarked = [{"role": "user", "content": prompt}]
    blind = {
        first_line(
            demo_reply(
                "oracle@1", [{"role": "user", "content": confer.answer_prompt(f"Q{i}?\n\nOptions:\n- a\n- b\n- c")}]
            )
        )
        for i in range(30)
    }
    assert blind == {"a", "b", "c"}
    assert first_line(demo_reply("oracle@1", unmarked)) in OPTIONS


def test_ballot_is_the_belief_ranked_first():
    messages = marked(vote.ballot_prompt("What is the capital of France?", OPTIONS))
    ballot = json.loads(demo_reply("oracle@1", messages))
    assert ballot["choice"] == "Paris"
    assert ballot["ranking"] == ["Paris", "London", "Rome", "Berlin"]
    reply = vote.read_ballot("v1", json.dumps(ballot), None, OPTIONS, no_match="abstain")[0]
    assert (reply.choice, reply.matched_by) == ("Paris", "structured")


def test_confer_vote_picks_the_first_answer_that_gives_the_belief():
    with fence_tag("0123abcd"):
        block = {"A": "Rome\n\n[simulated] …", "B": "Paris\n\n[simulated] …", "C": "Paris\n\n[simulated] …"}
        prompt = confer.vote_prompt(QUESTION, block, "C")
    vote_reply = json.loads(demo_reply("oracle@1", marked(prompt)))
    assert vote_reply["chosen_label"] == "B"
    assert first_line(vote_reply["revised_answer"]) == "Paris"
    assert vote_reply["confidence"] == 80
    # No answer gives its belief: it keeps its own.
    with fence_tag("0123abcd"):
        prompt = confer.vote_prompt(QUESTION, {"A": "Rome", "B": "London"}, "B")
    assert json.loads(demo_reply("oracle@1", marked(prompt)))["chosen_label"] == "B"


def test_council_review_ranks_agreeing_answers_first():
    with fence_tag("0123abcd"):
        prompt = council.review_prompt(
            QUESTION, {"A": "Rome", "B": "Paris", "C": "London", "D": "Paris"}, anonymize=True
        )
        named = council.review_prompt(QUESTION, {"ann": "Rome", "bob": "Paris"}, anonymize=False)
    review = demo_reply("oracle@1", marked(prompt))
    assert review.split("FINAL RANKING:\n", 1)[1].splitlines() == [
        "1. Model B",
        "2. Model D",
        "3. Model A",
        "4. Model C",
    ]
    assert demo_reply("oracle@1", marked(named)).split("FINAL RANKING:\n", 1)[1].splitlines() == ["1. bob", "2. ann"]


def test_council_chairman_reports_the_top_ranked_answer_whatever_it_holds():
    answers = {"Model A": "Rome\n\n[simulated]", "Model B": "Paris\n\n[simulated]"}
    authors = {"Model A": "v1", "Model B": "v2"}
    ranked = [
        RankedMember(label="Model B", name="v2", average_rank=1.2, count=5),
        RankedMember(label="Model A", name="v1", average_rank=1.8, count=5),
    ]
    with fence_tag("0123abcd"):
        prompt = council.synthesis_prompt(
            QUESTION, answers, authors, {"v1": "demo/oracle@0", "v2": "demo/oracle@0"}, [], ranked
        )
    # A chairman that holds a wrong answer still reports the panel's choice.
    assert first_line(demo_reply("oracle@0", marked(prompt))) == "Paris"


def test_an_oracle_judge_compares_with_the_reference():
    from panel_cli.eval.datasets import EvalItem
    from panel_cli.eval.grading import judge_prompt

    item = EvalItem(id="q", question="Capital of France?", answer="Paris", options=OPTIONS)
    with fence_tag("0123abcd"):
        right = judge_prompt(item, "Paris\n\nIt is Paris.")
        wrong = judge_prompt(item, "Rome")
    assert json.loads(demo_reply("oracle@0.5", [{"role": "user", "content": right}]))["verdict"] == "CORRECT"
    assert json.loads(demo_reply("oracle@0.5", [{"role": "user", "content": wrong}]))["verdict"] == "INCORRECT"


def test_a_short_answer_oracle_answers_the_gold_or_admits_it_does_not_know():
    prompt = confer.answer_prompt("What is 6 × 7?")
    assert first_line(demo_reply("oracle@1", marked(prompt, gold="42", options=[]))) == "42"
    assert first_line(demo_reply("oracle@0", marked(prompt, gold="42", options=[]))) == "I do not know."
