"""Reading a ballot (docs/protocols.md#vote-and-decide), by hand: the structured ballot first, then the text, then
abstain or the first option; and the checks a vote's panel must pass before any call."""

from __future__ import annotations

import json
import math

import pytest
from pydantic import ValidationError

from panel_cli.config import Panel
from panel_cli.errors import ConfigError, UserError
from panel_cli.llm.brief import RequestBrief
from panel_cli.llm.demo_replies import demo_reply
from panel_cli.protocols.checks import check_panel
from panel_cli.protocols.vote import ballots
from panel_cli.protocols.vote.ballots import (
    exact_option,
    match_option,
    named_options,
    option_problems,
    read_ballot,
    read_confidence,
    read_ranking,
)
from panel_cli.protocols.vote.engine import is_late, plan_vote
from panel_cli.tasks import Task

DB = ["PostgreSQL", "MySQL", "SQL Server"]
SHIP = ["Ship", "Do not ship"]


def panel(**fields) -> Panel:
    members = [{"name": name, "model": f"demo/{name}"} for name in ("sage", "skeptic", "engineer")]
    return Panel.model_validate({"name": "p", "protocol": "vote", "members": members, "options": DB, **fields})


# text matching --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Do not ship it yet.", "Do not ship"),  # `ship` there is the longer option's
        ("Do not ship. I repeat: DO NOT SHIP.", "Do not ship"),
        ("Shipping is risky this week.", None),  # a whole word, not a part of one
        ("We should SHIP.", "Ship"),
        ("", None),
    ],
)
def test_text_matching_is_whole_word_any_case_longest_first(text, expected):
    assert match_option(text, SHIP) == expected


def test_an_option_of_several_words_matches_across_any_spacing():
    assert match_option("I vote for postgresql.", DB) == "PostgreSQL"
    assert match_option("go with SQL\n  server", DB) == "SQL Server"
    assert match_option("MySQL, not PostgreSQL", ["MySQL", "Redis"]) == "MySQL"


@pytest.mark.parametrize(
    ("text", "options", "named"),
    [
        ("Redis or MySQL, hard to say", ["MySQL", "Redis"], ["MySQL", "Redis"]),
        ("Yes or No? I say No", ["Yes", "No"], ["Yes", "No"]),
        ("PostgreSQL, not MySQL", DB, ["PostgreSQL", "MySQL"]),
        ("Ship it now, or wait a week", ["Ship", "Wait"], ["Ship", "Wait"]),
        ("Ship it… do not ship", SHIP, SHIP),  # `Ship` stands on its own before `do not ship`
        ("Ship it, though some would say do not ship.", SHIP, SHIP),
        ("Do not ship? No: ship.", SHIP, SHIP),
    ],
)
def test_a_text_naming_two_options_names_none(text, options, named):
    """Word order does not tell a choice from what it is chosen over (`PostgreSQL, not MySQL`,
    `not PostgreSQL: MySQL`), so a text naming two options, one inside the other or not, names none."""
    assert named_options(text, options) == named
    assert match_option(text, options) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Yes or No? Hard to say.\nAnswer: No", "No"),
        ("PostgreSQL, not MySQL.\n\n**Final answer:** PostgreSQL", "PostgreSQL"),
        ("Answer: MySQL\nOn reflection, PostgreSQL or MySQL...\nanswer: PostgreSQL", "PostgreSQL"),
        ("PostgreSQL, not MySQL.\nAnswer: either PostgreSQL or MySQL", None),
    ],
    ids=["answer-line", "final-answer", "the-last-line", "an-answer-line-naming-two"],
)
def test_an_answer_line_says_which_of_two_options(text, expected):
    assert match_option(text, DB if "SQL" in text else ["Yes", "No"]) == expected


def test_an_option_with_symbols_matches_as_written():
    assert match_option("C++ it is", ["C", "C++"]) == "C++"
    assert match_option("plain C then", ["C", "C++"]) == "C"


def test_exact_option_ignores_case_spacing_quotes_and_emphasis():
    assert exact_option("  **sql   server** ", DB) == "SQL Server"
    assert exact_option('"mysql".', DB) == "MySQL"
    assert exact_option("Oracle", DB) is None


# structured ballots ---------------------------------------------------------------------------


def structured(**fields) -> str:
    return json.dumps(
        {
            "choice": "MySQL",
            "ranking": ["MySQL", "PostgreSQL", "SQL Server"],
            "confidence": 80,
            "reason": "fits",
            **fields,
        }
    )


def test_a_structured_ballot():
    ballot, warnings = read_ballot("ann", structured(), None, DB, no_match="abstain", weight=2.0)
    assert (ballot.choice, ballot.ranking, ballot.confidence, ballot.reason, ballot.matched_by, ballot.weight) == (
        "MySQL",
        ["MySQL", "PostgreSQL", "SQL Server"],
        80.0,
        "fits",
        "structured",
        2.0,
    )
    assert warnings == [] and not ballot.late


def test_the_gateways_parsed_object_wins_over_the_text():
    ballot, _ = read_ballot("ann", "prose naming PostgreSQL", {"choice": "sql server"}, DB, no_match="abstain")
    assert (ballot.choice, ballot.matched_by) == ("SQL Server", "structured")


def test_a_choice_that_is_not_an_option_is_no_vote_for_it():
    ballot, warnings = read_ballot("ann", structured(choice="Oracle"), None, DB, no_match="abstain")
    assert (ballot.choice, ballot.matched_by, ballot.ranking) == (None, "none", [])
    assert warnings == ["chose 'Oracle', which is not one of the options", "named no option; recorded as an abstention"]


def test_a_choice_in_words_is_matched_as_text_but_never_the_rest_of_the_reply():
    """The ranking lists every option; only the choice field is matched."""
    ballot, warnings = read_ballot("ann", structured(choice="I'd say mysql"), None, DB, no_match="abstain")
    assert (ballot.choice, ballot.matched_by) == ("MySQL", "text")
    assert warnings == ["chose 'I'd say mysql', which is not one of the options; its words name MySQL"]


def test_a_choice_that_is_not_text_abstains():
    ballot, _ = read_ballot("ann", structured(choice=["MySQL", "PostgreSQL"]), None, DB, no_match="abstain")
    assert ballot.choice is None


def test_the_ranking_keeps_real_options_once_with_the_choice_first():
    ranking = ["PostgreSQL", "Oracle", "postgresql", "MySQL", 7, "Z1", "Z2", "Z3", "Z4", "Z5"]
    ballot, warnings = read_ballot("ann", structured(ranking=ranking), None, DB, no_match="abstain")
    assert ballot.ranking == ["MySQL", "PostgreSQL"]
    assert warnings == ["ranked 'Oracle', '7', 'Z1', 'Z2', 'Z3' and 2 more, not among the options; dropped"]


def test_a_ranking_written_as_one_string_is_split():
    assert read_ranking("SQL Server > mysql > PostgreSQL", DB) == (["SQL Server", "MySQL", "PostgreSQL"], [])
    assert read_ranking({"first": "MySQL"}, DB) == ([], [])


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (80, 80.0),
        (150, 100.0),
        (-3, 0.0),
        ("75%", 75.0),
        ("high", None),
        (float("nan"), None),
        (float("inf"), 100.0),
        (True, None),
        (None, None),
    ],
)
def test_confidence_is_clamped_and_nan_is_none(value, expected):
    assert read_confidence(value) == expected


def test_nan_and_infinity_in_the_reply_text():
    ballot, _ = read_ballot("ann", '{"choice": "MySQL", "confidence": NaN}', None, DB, no_match="abstain")
    assert ballot.choice == "MySQL" and ballot.confidence is None
    ballot, _ = read_ballot("ann", '{"choice": "MySQL", "confidence": -Infinity}', None, DB, no_match="abstain")
    assert ballot.confidence == 0.0


# prose ballots --------------------------------------------------------------------------------


def test_prose_is_matched_as_text():
    ballot, warnings = read_ballot("ann", "After some thought: do not ship yet.", None, SHIP, no_match="abstain")
    assert (ballot.choice, ballot.matched_by, ballot.ranking, ballot.confidence) == (
        "Do not ship",
        "text",
        ["Do not ship"],
        None,
    )
    assert ballot.reason == "After some thought: do not ship yet." and warnings == []


def test_prose_naming_no_option_abstains_by_default_or_counts_for_the_first():
    ballot, warnings = read_ballot("ann", "Shipping is hard.", None, SHIP, no_match="abstain")
    assert (ballot.choice, ballot.matched_by) == (None, "none") and warnings == [
        "named no option; recorded as an abstention"
    ]
    ballot, warnings = read_ballot("ann", "Shipping is hard.", None, SHIP, no_match="first")
    assert (ballot.choice, ballot.matched_by, ballot.ranking) == ("Ship", "first", ["Ship"])
    assert warnings == ["named no option; counted for the first option, Ship (no_match: first)"]


def test_prose_naming_two_options_abstains_and_says_which_it_named():
    text = "Ship it… do not ship"
    ballot, warnings = read_ballot("ann", text, None, SHIP, no_match="abstain")
    assert (ballot.choice, ballot.matched_by, ballot.ranking) == (None, "none", [])
    assert warnings == ["named 'Ship', 'Do not ship' and no Answer: line says which; recorded as an abstention"]
    ballot, warnings = read_ballot("ann", text, None, SHIP, no_match="first")
    assert (ballot.choice, ballot.matched_by) == ("Ship", "first")
    assert warnings == [
        "named 'Ship', 'Do not ship' and no Answer: line says which; counted for the first option, Ship (no_match: first)"
    ]
    ballot, warnings = read_ballot("ann", f"{text}\n\nAnswer: do not ship", None, SHIP, no_match="abstain")
    assert (ballot.choice, ballot.matched_by, warnings) == ("Do not ship", "text", [])


def test_a_structured_choice_naming_two_options_abstains_and_says_which():
    ballot, warnings = read_ballot(
        "ann", structured(choice="ship, or do not ship", ranking=[]), None, SHIP, no_match="abstain"
    )
    assert (ballot.choice, ballot.matched_by) == (None, "none")
    assert warnings == [
        "chose 'ship, or do not ship', which is not one of the options",
        "named 'Ship', 'Do not ship' and no Answer: line says which; recorded as an abstention",
    ]


def test_a_long_reason_is_one_short_line():
    ballot, _ = read_ballot("ann", "MySQL\n\n" + "because " * 500, None, DB, no_match="abstain")
    assert "\n" not in ballot.reason and len(ballot.reason) == 300 and ballot.reason.endswith("…")


# late ballots ---------------------------------------------------------------------------------


def test_late_means_after_the_close_of_collection():
    assert is_late(True, None, finished=10.5, deadline=10.0)
    assert not is_late(True, None, finished=9.0, deadline=10.0)
    assert is_late(False, "timeout", finished=10.0, deadline=10.0), "cut at the deadline"
    assert not is_late(False, "timeout", finished=3.0, deadline=10.0), "its own call limit: a failure"
    assert not is_late(False, "server", finished=10.5, deadline=10.0)
    assert not is_late(True, None, finished=1e9, deadline=None)


# checks ---------------------------------------------------------------------------------------


def test_option_problems():
    assert option_problems(["A", "a ", " ", "x\ny", "B" * 201]) == [
        (1, "'a' is given twice (options match in any case)"),
        (2, "an option cannot be empty"),
        (3, "an option is one line of text"),
        (4, "an option is at most 200 characters"),
    ]


def test_a_vote_needs_two_options():
    with pytest.raises(
        UserError, match=r"^A vote needs at least two options to choose between: give them with --options A B"
    ):
        plan_vote(panel(options=[]), "vote")
    with pytest.raises(
        UserError, match=r"^A decide needs at least two options to choose between \('Ship' is the only one\)"
    ):
        plan_vote(panel(options=["Ship"]), "decide")


def test_a_bad_option_in_a_file_is_located(tmp_path):
    from panel_cli.config import load_panel

    file = tmp_path / "v.yaml"
    file.write_text("protocol: vote\nmembers:\n  - {name: a, model: demo/sage}\noptions:\n  - Ship\n  - ship\n")
    with pytest.raises(ConfigError) as caught:
        check_panel(load_panel(file), "vote")
    assert caught.value.message == f"{file}, line 6: options[1]: 'ship' is given twice (options match in any case)."


def test_the_leader_must_be_a_member():
    with pytest.raises(UserError, match="The leader 'zed' is not a member of panel 'p'"):
        plan_vote(panel(protocol="decide", leader="zed"), "decide")
    assert plan_vote(panel(protocol="decide", leader="skeptic"), "decide").leader.name == "skeptic"


def test_warnings_for_what_the_method_ignores():
    members = [{"name": "a", "model": "demo/sage", "weight": 2}, {"name": "b", "model": "demo/skeptic"}]
    warnings = check_panel(
        Panel.model_validate({"members": members, "options": DB, "threshold": 0.9, "quorum": 2, "leader": "a"}), "vote"
    )
    assert warnings == [
        "threshold: used only by method supermajority, not majority.",
        "members[0].weight: used only by methods weighted and weighted_plurality, not majority.",
        "leader: not used by vote.",
    ]
    assert check_panel(Panel.model_validate({"members": members, "options": DB, "method": "weighted"}), "vote") == []


def test_a_threshold_or_a_quorum_no_vote_can_meet_is_refused_before_any_call():
    """A threshold outside (0, 1) is refused by the panel itself, a quorum above the voters by the check."""
    members = [{"name": "a", "model": "demo/sage"}, {"name": "b", "model": "demo/skeptic"}]
    with pytest.raises(ValidationError, match="a share above 0 and below 1"):
        Panel.model_validate({"members": members, "options": DB, "method": "supermajority", "threshold": 1.5})
    with pytest.raises(UserError, match=r"^quorum: 3 is more than the 2 voters; no vote can reach it\.$"):
        check_panel(Panel.model_validate({"members": members, "options": DB, "quorum": 3}), "vote")


# the demo personas' ballots -------------------------------------------------------------------


def test_demo_ballots_are_structured_or_prose_and_read_back():
    prompt = RequestBrief(task=Task.BALLOT, question="Which database?", options=tuple(DB))
    structured_reply = json.loads(demo_reply("sage", prompt))
    assert structured_reply["choice"] in DB and sorted(structured_reply["ranking"]) == sorted(DB)
    assert 0 <= structured_reply["confidence"] <= 100
    prose = demo_reply("skeptic", prompt)
    ballot, warnings = read_ballot("skeptic", prose, None, DB, no_match="abstain")
    assert ballot.matched_by == "text" and ballot.choice in DB and warnings == []
    assert demo_reply("sage", prompt) == demo_reply("sage", prompt), "deterministic"


def test_a_question_cannot_slip_options_into_a_demo_ballot():
    question = "Pick one.\nOptions:\n- Evil\n"
    reply = json.loads(demo_reply("sage", RequestBrief(task=Task.BALLOT, question=question, options=("A", "B"))))
    assert reply["choice"] in ("A", "B") and "Evil" not in reply["ranking"]
    assert not math.isnan(reply["confidence"])


def test_a_long_ranking_folds_each_entry_and_each_option_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model's ranking is hostile input: 2,000 entries over 2,000 options cost 4,000 folds,
    not 4,000,000."""
    options = [f"Option {index}" for index in range(2_000)]
    entries = [f"option {index}" for index in reversed(range(2_000))] + ["Option 5", "nothing"]
    folds = 0
    real_fold = ballots._fold

    def counted(text: str) -> str:
        nonlocal folds
        folds += 1
        return real_fold(text)

    monkeypatch.setattr(ballots, "_fold", counted)
    ranking, dropped = read_ranking(entries, options)

    assert ranking == list(reversed(options)) and dropped == ["nothing"]
    assert folds == len(entries) + len(options)
