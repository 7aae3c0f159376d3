"""`demo/oracle@p`: simulated voters of known accuracy, who learn the gold answer only from
their calls' briefs, where eval puts it for its simulated members and nowhere else."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from panel_cli.config import Member, Panel
from panel_cli.eval.datasets import Dataset, EvalItem
from panel_cli.eval.runner import plan_eval, run_eval
from panel_cli.llm.brief import RequestBrief, SimulatedVoter, quote, simulated_voters, with_voter
from panel_cli.llm.demo import demo_reply, is_persona, oracle_accuracy
from panel_cli.protocols.vote import engine as vote
from panel_cli.tasks import Task

OPTIONS = ("London", "Paris", "Rome", "Berlin")
QUESTION = "What is the capital of France?\n\nOptions:\n- London\n- Paris\n- Rome\n- Berlin"


def told(
    brief: RequestBrief,
    *,
    voter: str = "v1",
    key: str = "0:q1",
    gold: str = "Paris",
    options: tuple[str, ...] | None = None,
) -> RequestBrief:
    """The brief as eval's simulated member `voter` gets it for question `key`."""
    known = SimulatedVoter(voter=voter, key=key, gold=gold, options=OPTIONS if options is None else options)
    return brief.model_copy(update={"voter": known})


def answer(question: str = QUESTION) -> RequestBrief:
    return RequestBrief(task=Task.ANSWER, question=question)


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
    assert first_line(demo_reply("oracle@1", told(answer()))) == "Paris"
    for key in range(50):
        said = first_line(demo_reply("oracle@0", told(answer(), key=f"0:q{key}")))
        assert said in OPTIONS and said != "Paris"


def test_an_oracle_is_right_with_its_probability():
    n = 4000
    right = sum(
        first_line(demo_reply("oracle@0.7", told(answer(), key=f"7:q{index}"))) == "Paris" for index in range(n)
    )
    # 4 binomial standard errors: by chance alone, outside about once in 16,000 seeds.
    assert abs(right / n - 0.7) <= 4 * (0.7 * 0.3 / n) ** 0.5


def test_wrong_answers_are_spread_over_the_wrong_options():
    wrong = [first_line(demo_reply("oracle@0", told(answer(), key=f"0:q{index}"))) for index in range(300)]
    counts = {option: wrong.count(option) for option in ("London", "Rome", "Berlin")}
    assert sum(counts.values()) == 300
    assert all(60 <= count <= 140 for count in counts.values()), counts


def test_an_oracle_is_deterministic_and_each_voter_draws_on_its_own():
    assert demo_reply("oracle@0.5", told(answer())) == demo_reply("oracle@0.5", told(answer()))
    answers = {
        voter: [first_line(demo_reply("oracle@0.5", told(answer(), voter=voter, key=f"0:q{i}"))) for i in range(40)]
        for voter in ("v1", "v2")
    }
    assert answers["v1"] != answers["v2"]


def test_an_oracle_told_nothing_knows_nothing():
    """Without eval's word an oracle holds one of the brief's options at random, or says it
    does not know: no question text can tell it the gold answer."""
    blind = {
        json.loads(demo_reply("oracle@1", RequestBrief(task=Task.BALLOT, question=f"Q{i}?", options=("a", "b", "c"))))[
            "choice"
        ]
        for i in range(30)
    }
    assert blind == {"a", "b", "c"}
    assert first_line(demo_reply("oracle@1", answer("The gold answer is Rome. " + QUESTION))) == "I do not know."


def test_eval_tells_each_simulated_member_its_own_and_only_within_the_run():
    plain = answer()
    voters = {"v1": SimulatedVoter(voter="v1", key="0:q1", gold="Paris", options=OPTIONS)}
    assert with_voter(plain, "v1") is plain
    with simulated_voters(voters):
        assert with_voter(plain, "v1").voter == voters["v1"]
        assert with_voter(plain, "v2") is plain
    assert with_voter(plain, "v1") is plain


def test_ballot_is_the_belief_ranked_first():
    brief = RequestBrief(task=Task.BALLOT, question="What is the capital of France?", options=OPTIONS)
    ballot = json.loads(demo_reply("oracle@1", told(brief)))
    assert ballot["choice"] == "Paris"
    assert ballot["ranking"] == ["Paris", "London", "Rome", "Berlin"]
    reply = vote.read_ballot("v1", json.dumps(ballot), None, list(OPTIONS), no_match="abstain")[0]
    assert (reply.choice, reply.matched_by) == ("Paris", "structured")


def test_confer_vote_picks_the_first_answer_that_gives_the_belief():
    block = {"A": "Rome\n\n[simulated] …", "B": "Paris\n\n[simulated] …", "C": "Paris\n\n[simulated] …"}
    brief = RequestBrief(task=Task.CONFER_VOTE, question=QUESTION, quoted=quote(block), own="C")
    vote_reply = json.loads(demo_reply("oracle@1", told(brief)))
    assert vote_reply["chosen_label"] == "B"
    assert first_line(vote_reply["revised_answer"]) == "Paris"
    assert vote_reply["confidence"] == 80
    # No answer gives its belief: it keeps its own.
    brief = RequestBrief(task=Task.CONFER_VOTE, question=QUESTION, quoted=quote({"A": "Rome", "B": "London"}), own="B")
    assert json.loads(demo_reply("oracle@1", told(brief)))["chosen_label"] == "B"


def test_council_review_ranks_agreeing_answers_first():
    shown = {"A": "Rome", "B": "Paris", "C": "London", "D": "Paris"}
    review = demo_reply(
        "oracle@1", told(RequestBrief(task=Task.COUNCIL_REVIEW, question=QUESTION, quoted=quote(shown)))
    )
    assert review.split("FINAL RANKING:\n", 1)[1].splitlines() == [
        "1. Model B",
        "2. Model D",
        "3. Model A",
        "4. Model C",
    ]
    named = RequestBrief(
        task=Task.COUNCIL_REVIEW_NAMED, question=QUESTION, quoted=quote({"ann": "Rome", "bob": "Paris"})
    )
    assert demo_reply("oracle@1", told(named)).split("FINAL RANKING:\n", 1)[1].splitlines() == ["1. bob", "2. ann"]


def test_council_chairman_reports_the_top_ranked_answer_whatever_it_holds():
    brief = RequestBrief(
        task=Task.COUNCIL_SYNTHESIS,
        question=QUESTION,
        quoted=quote({"A": "Rome\n\n[simulated]", "B": "Paris\n\n[simulated]"}),
        ranking=("B", "A"),
    )
    # A chairman that holds a wrong answer still reports the panel's choice.
    assert first_line(demo_reply("oracle@0", told(brief))) == "Paris"


def test_an_oracle_judge_compares_with_the_reference():
    def judged(text: str) -> str:
        brief = RequestBrief(
            task=Task.JUDGE, question="Capital of France?", reference="Paris", quoted=quote({"x": text})
        )
        return json.loads(demo_reply("oracle@0.5", brief))["verdict"]

    assert judged("Paris\n\nIt is Paris.") == "CORRECT"
    assert judged("Rome") == "INCORRECT"


def test_a_short_answer_oracle_answers_the_gold_or_admits_it_does_not_know():
    brief = answer("What is 6 × 7?")
    assert first_line(demo_reply("oracle@1", told(brief, gold="42", options=()))) == "42"
    assert first_line(demo_reply("oracle@0", told(brief, gold="42", options=()))) == "I do not know."


async def test_certain_oracles_are_right_through_every_protocols_engine():
    """Through the engines and the gateway: each engine's briefs carry what an oracle needs
    (its own answer's label, the answers shown, the aggregate ranking, the options), so five
    voters who always hold the gold answer are always right, whatever the protocol."""
    items = [
        EvalItem(id=f"q{i}", question=f"Question {i}?", answer=OPTIONS[i % 4], options=list(OPTIONS)) for i in range(6)
    ]
    panel = Panel.model_validate(
        {"name": "sure", "members": [{"name": f"v{i}", "model": "demo/oracle@1"} for i in range(1, 6)]}
    )
    plan = plan_eval(
        panel, Dataset(source="t", items=items), protocols="confer,council,vote", baseline=None, grader=None
    )
    result = await run_eval(plan, store=None, secrets=[], eval_id="sure", seed=1, concurrency=3)
    assert {system.system: system.accuracy for system in result.systems} == {
        "baseline": 1.0,
        "confer": 1.0,
        "council": 1.0,
        "vote": 1.0,
    }
