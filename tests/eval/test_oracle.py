"""`demo/oracle@p`: simulated voters of known accuracy, who learn the gold answer only from
their calls' briefs, where eval puts it for its simulated members and nowhere else."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from panel_cli.config import Member, Panel, parse_panel
from panel_cli.errors import ConfigError
from panel_cli.eval.datasets import Dataset, EvalItem
from panel_cli.eval.runner import plan_eval, run_eval
from panel_cli.llm.brief import RequestBrief, SimulatedVoter, quote, simulated_voters, with_voter
from panel_cli.llm.demo_replies import demo_reply
from panel_cli.models.personas import OracleSpec, is_persona, oracle_accuracy, parse_oracle
from panel_cli.protocols.vote.ballots import read_ballot
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
    with pytest.raises(ValidationError, match=r"demo/oracle@2: an oracle's accuracy \(oracle@p\) is a probability"):
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
    reply = read_ballot("v1", json.dumps(ballot), None, list(OPTIONS), no_match="abstain")[0]
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


# Knobs: calibrated confidence, herding, persuasion ---------------------------------------------


@pytest.mark.parametrize(
    "name, spec",
    [
        ("oracle@0.6", OracleSpec(p=0.6)),
        ("oracle@0.6?herd=0.3&persuade=0.2", OracleSpec(p=0.6, herd=0.3, persuade=0.2)),
        ("oracle@0.9?confidence=p", OracleSpec(p=0.9, confidence=None)),
        ("oracle@0.9?confidence=65&noise=0.1", OracleSpec(p=0.9, confidence=65, noise=0.1)),
    ],
)
def test_oracle_knobs_are_read(name, spec):
    assert parse_oracle(name) == spec
    assert oracle_accuracy(name) == spec.p and is_persona(name)


@pytest.mark.parametrize(
    "model, problem",
    [
        ("demo/oracle@0.6?herd=2", "demo/oracle@0.6?herd=2: herd is a probability from 0 to 1, not '2'"),
        ("demo/oracle@0.6?persuade=x", "demo/oracle@0.6?persuade=x: persuade is a probability from 0 to 1, not 'x'"),
        (
            "demo/oracle@0.6?hurd=0.2",
            "demo/oracle@0.6?hurd=0.2: 'hurd' is not an oracle knob (did you mean herd?); the knobs are herd, persuade, "
            "confidence, noise",
        ),
        (
            "demo/oracle@0.7?herd=2&persuad=0.2",
            "demo/oracle@0.7?herd=2&persuad=0.2: herd is a probability from 0 to 1, not '2'; 'persuad' is not an "
            "oracle knob (did you mean persuade?); the knobs are herd, persuade, confidence, noise",
        ),
        (
            "demo/oracle@1.5?herd&noise=0.1&noise=3",
            "demo/oracle@1.5?herd&noise=0.1&noise=3: an oracle's accuracy (oracle@p) is a probability from 0 to 1, "
            "not '1.5'; the knob herd needs a value, like herd=0.3; the knob noise is given twice",
        ),
        (
            "demo/oracle@0.6?" + "&".join(["herd=2"] * 8),
            "demo/oracle@0.6?"
            + "&".join(["herd=2"] * 8)
            + ": herd is a probability from 0 to 1, not '2'; "
            + "; ".join(["the knob herd is given twice"] * 4)
            + "; and 3 more",
        ),
        ("demo/oracle@0.6?herd", "demo/oracle@0.6?herd: the knob herd needs a value, like herd=0.3"),
        ("demo/oracle@0.6?herd=0.1&herd=0.2", "demo/oracle@0.6?herd=0.1&herd=0.2: the knob herd is given twice"),
        ("demo/oracle@0.6?", "demo/oracle@0.6?: nothing follows '?'; give knobs like herd=0.3&persuade=0.2"),
        (
            "demo/oracle@0.6?confidence=high",
            "demo/oracle@0.6?confidence=high: confidence is p (the oracle's own accuracy) or a number from 0 to 100, not 'high'",
        ),
        (
            "demo/oracle@1.5?herd=0.2",
            "demo/oracle@1.5?herd=0.2: an oracle's accuracy (oracle@p) is a probability from 0 to 1, not '1.5'",
        ),
    ],
)
def test_a_bad_knob_is_a_located_error(model, problem):
    text = f'members:\n  - name: a\n    model: "demo/oracle@0.7"\n  - name: b\n    model: "{model}"\n'
    with pytest.raises(ConfigError) as caught:
        parse_panel(text, "jury.yaml")
    assert caught.value.message == f"jury.yaml, line 5: members[1].model: {problem}."
    assert oracle_accuracy(model.removeprefix("demo/")) is None and not is_persona(model.removeprefix("demo/"))


def vote_brief(block: dict[str, str], own: str, **voter: str) -> RequestBrief:
    return told(RequestBrief(task=Task.CONFER_VOTE, question=QUESTION, quoted=quote(block), own=own), **voter)


def voted(persona: str, brief: RequestBrief) -> tuple[str, str, float]:
    reply = json.loads(demo_reply(persona, brief))
    return reply["chosen_label"], first_line(reply["revised_answer"]), reply["confidence"]


# Four answers shown: Rome twice, Paris (gold) once, London once.
SHOWN = {"A": "Rome\n\n…", "B": "London\n\n…", "C": "Rome\n\n…", "D": "Paris\n\n…"}


def test_confidence_is_the_fixed_80_or_the_oracles_own_p():
    assert voted("oracle@0.6", vote_brief(SHOWN, "B"))[2] == 80
    assert voted("oracle@0.6?confidence=p", vote_brief(SHOWN, "B"))[2] == 60
    assert voted("oracle@0.6?confidence=55", vote_brief(SHOWN, "B"))[2] == 55
    ballot = RequestBrief(task=Task.BALLOT, question="Capital?", options=OPTIONS)
    assert json.loads(demo_reply("oracle@0.9?confidence=p", told(ballot)))["confidence"] == 90


def test_a_noisy_reading_is_drawn_once_per_question_and_centred_on_p():
    readings = [
        voted("oracle@0.6?confidence=p&noise=0.1", vote_brief(SHOWN, "B", key=f"0:q{i}"))[2] for i in range(400)
    ]
    assert len(set(readings)) > 100 and all(0 <= reading <= 100 for reading in readings)
    mean = sum(readings) / len(readings)
    assert abs(mean - 60) < 4 * 10 / 400**0.5
    # The same question, voter and key: the same reading, whatever the round shows.
    again = voted("oracle@0.6?confidence=p&noise=0.1", vote_brief({"A": "Paris"}, "A", key="0:q3"))[2]
    assert again == readings[3]


def test_without_knobs_an_oracle_keeps_its_own_answer():
    assert voted("oracle@0", vote_brief(SHOWN, "B")) == ("B", "London", 80)


def test_a_herding_oracle_moves_to_the_most_common_answer_shown():
    assert voted("oracle@0?herd=1", vote_brief(SHOWN, "B")) == ("A", "Rome", 80)


def test_a_herding_oracle_keeps_its_own_answer_when_it_is_among_the_most_common():
    tied = {"A": "Rome", "B": "London", "C": "Rome", "D": "London"}
    assert voted("oracle@0?herd=1", vote_brief(tied, "B")) == ("B", "London", 80)
    # Its own not among them: the one shown first.
    tied = {"A": "Rome", "B": "Berlin", "C": "London", "D": "Rome", "E": "London"}
    assert voted("oracle@0?herd=1", vote_brief(tied, "B")) == ("A", "Rome", 80)


def test_a_persuadable_oracle_moves_to_the_right_answer_when_it_is_shown():
    assert voted("oracle@0?persuade=1", vote_brief(SHOWN, "B")) == ("D", "Paris", 80)
    # No answer shown is right: nothing to be persuaded by, and it keeps its own.
    wrong = {"A": "Rome", "B": "London", "C": "Rome"}
    assert voted("oracle@0?persuade=1", vote_brief(wrong, "B")) == ("B", "London", 80)
    # Persuasion is drawn first: sure to be persuaded, it never herds.
    assert voted("oracle@0?persuade=1&herd=1", vote_brief(SHOWN, "B")) == ("D", "Paris", 80)


def test_herding_and_persuasion_happen_with_their_probability_seeded_per_question():
    def moves(persona: str) -> list[bool]:
        return [voted(persona, vote_brief(SHOWN, "B", key=f"3:q{i}"))[1] != "London" for i in range(1000)]

    herded = moves("oracle@0?herd=0.3")
    assert abs(sum(herded) / 1000 - 0.3) <= 4 * (0.3 * 0.7 / 1000) ** 0.5
    assert herded == moves("oracle@0?herd=0.3")
    persuaded = [
        voted("oracle@0?persuade=0.2", vote_brief(SHOWN, "B", key=f"3:q{i}"))[1] == "Paris" for i in range(1000)
    ]
    assert abs(sum(persuaded) / 1000 - 0.2) <= 4 * (0.2 * 0.8 / 1000) ** 0.5


def test_an_oracle_holds_its_revised_answer_in_the_next_round():
    """Its answer in a round is what it revised to (its own shown answer), not its first belief."""
    assert voted("oracle@1", vote_brief({"A": "Rome", "B": "London"}, "B")) == ("B", "London", 80)


def test_a_herding_reviewer_ranks_the_most_common_answer_first():
    shown = {"A": "Rome", "B": "Paris", "C": "Rome", "D": "London"}
    brief = told(RequestBrief(task=Task.COUNCIL_REVIEW, question=QUESTION, quoted=quote(shown)), gold="London")
    ranking = demo_reply("oracle@1?herd=1", brief).split("FINAL RANKING:\n", 1)[1].splitlines()
    assert ranking == ["1. Model A", "2. Model C", "3. Model B", "4. Model D"]
    persuaded = demo_reply("oracle@0?persuade=1", brief).split("FINAL RANKING:\n", 1)[1].splitlines()
    assert persuaded[0] == "1. Model D"


def test_a_delphi_revision_says_whether_the_oracle_moved():
    shown = {"A": "Rome", "B": "London", "C": "Rome"}
    brief = told(RequestBrief(task=Task.DELPHI_CONTRIBUTION, question=QUESTION, quoted=quote(shown), own="B"))
    moved = json.loads(demo_reply("oracle@0?herd=1", brief))
    assert (first_line(moved["analysis"]), moved["changed"]) == ("Rome", True)
    kept = json.loads(demo_reply("oracle@0", brief))
    assert (first_line(kept["analysis"]), kept["changed"]) == ("London", False)


async def test_persuadable_oracles_through_confer_reach_the_gold_whenever_one_holds_it():
    """Through the engine: five voters right half the time, sure to be persuaded by a right
    answer shown: confer is right exactly when some member first held the gold answer."""
    items = [
        EvalItem(id=f"q{i}", question=f"Question {i}?", answer=OPTIONS[i % 4], options=list(OPTIONS)) for i in range(40)
    ]
    members = [{"name": f"v{i}", "model": "demo/oracle@0.5?persuade=1"} for i in range(1, 6)]
    panel = Panel.model_validate({"name": "open", "members": members})
    plan = plan_eval(panel, Dataset(source="t", items=items), protocols="confer", baseline=None, grader=None)
    result = await run_eval(plan, store=None, secrets=[], eval_id="open", seed=4, concurrency=4)
    confer = {item.question_id: item.correct for item in result.items if item.system == "confer"}
    held = {
        item.id: any(
            first_line(demo_reply("oracle@0.5", told(answer(), voter=f"v{i}", key=f"4:{item.id}", gold=item.answer)))
            == item.answer
            for i in range(1, 6)
        )
        for item in items
    }
    assert confer == held
    assert 0 < sum(held.values()) < 40


GENERATED = [
    EvalItem(id=f"q{i}", question=f"Question {i}?", answer=OPTIONS[i % 4], options=list(OPTIONS)) for i in range(40)
]


async def confer_grades(knobs: str, answer_order: str = "parallel", seed: int = 9) -> list[bool]:
    """confer's grade on each of the 40 generated questions, five `oracle@0.5{knobs}` voting."""
    members = [{"name": f"v{i}", "model": f"demo/oracle@0.5{knobs}"} for i in range(1, 6)]
    panel = Panel.model_validate({"name": "herd", "members": members, "answer_order": answer_order})
    plan = plan_eval(panel, Dataset(source="t", items=GENERATED), protocols="confer", baseline=None, grader=None)
    result = await run_eval(plan, store=None, secrets=[], eval_id="herd", seed=seed, concurrency=4)
    return [item.correct for item in sorted(result.items, key=lambda item: item.question_id) if item.system == "confer"]


async def test_herding_to_the_shown_plurality_never_changes_parallel_confers_answer():
    """Herders join the most common answer shown, which confer's count already picks (in a tie,
    the one shown first, which its tie rule picks): on the same questions and seed, parallel
    confer's grades are the same with and without herding."""
    independent = await confer_grades("")
    assert await confer_grades("?herd=1") == independent
    assert 0 < sum(independent) < 40


async def test_answering_in_turn_sure_herders_all_follow_the_first_answer():
    """The cascade at its extreme: with `answer_order: sequential` every herder after the first
    takes the first answer, and so does the vote, so confer is right exactly when the first
    member first held the gold answer, and below parallel confer on the same questions."""
    cascade = await confer_grades("?herd=1", "sequential")
    first = [
        first_line(demo_reply("oracle@0.5", told(answer(), voter="v1", key=f"9:{item.id}", gold=item.answer)))
        == item.answer
        for item in sorted(GENERATED, key=lambda item: item.id)
    ]
    assert cascade == first
    assert sum(cascade) < sum(await confer_grades("?herd=1"))
    assert await confer_grades("", "sequential") == await confer_grades(""), "independent voters see and ignore"


def answer_after(block: dict[str, str], **voter: str) -> RequestBrief:
    """An answer request showing the answers given before it (`answer_order: sequential`)."""
    return told(RequestBrief(task=Task.ANSWER, question=QUESTION, quoted=quote(block)), **voter)


def test_an_oracle_answering_after_others_herds_or_is_persuaded_as_a_voter_does():
    alone = first_line(demo_reply("oracle@0", told(answer())))
    assert alone == "Rome"  # its own belief: a wrong option
    shown = {"A": "London\n\n…", "B": "London\n\n…", "C": "Paris\n\n…"}
    assert first_line(demo_reply("oracle@0?herd=1", answer_after(shown))) == "London"
    assert first_line(demo_reply("oracle@0?persuade=1", answer_after(shown))) == "Paris"
    assert first_line(demo_reply("oracle@0?persuade=1&herd=1", answer_after(shown))) == "Paris"
    assert first_line(demo_reply("oracle@0", answer_after(shown))) == alone, "no knobs: it answers its own"
    # The first to answer is shown nothing, and answers its own belief whatever its knobs.
    assert first_line(demo_reply("oracle@0?herd=1&persuade=1", answer_after({}))) == alone

    # Drawn once per question, voter and answers shown: the same request, the same move.
    def moves() -> list[bool]:
        return [
            first_line(demo_reply("oracle@0?herd=0.5", answer_after(shown, key=f"5:q{i}")))
            != first_line(demo_reply("oracle@0", answer_after(shown, key=f"5:q{i}")))
            for i in range(200)
        ]

    assert moves() == moves() and 0 < sum(moves()) < 200
