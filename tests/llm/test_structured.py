"""Which object of a reply is its own (docs/protocols.md#model-calls), by hand."""

from typing import ClassVar

import pytest
from pydantic import BaseModel

from panel_cli.llm.structured import NoObject, TwoObjects, parse_structured, reply_object, unquoted


class Verdict(BaseModel):
    decisive: ClassVar[tuple[str, ...]] = ("verdict",)

    verdict: str
    score: int


def test_plain_object():
    assert reply_object('{"a": 1}') == {"a": 1}


def test_json_fence():
    assert reply_object('Sure!\n```json\n{"a": {"b": [1, 2]}}\n```\nDone.') == {"a": {"b": [1, 2]}}


def test_object_amid_prose_with_braces_in_strings():
    text = 'Here you go: {"a": "curly } inside", "b": "\\"quoted\\""} and that is all {not json}'
    assert reply_object(text) == {"a": "curly } inside", "b": '"quoted"'}


def test_no_object():
    with pytest.raises(NoObject, match="^no JSON object in the reply$"):
        reply_object("no json here [1, 2]")


def test_validation_reason_names_the_field():
    found = parse_structured('{"verdict": "ok", "score": "high"}', Verdict)
    assert found.value is None and found.problem.startswith("invalid score") and not found.conflicting


def test_valid():
    found = parse_structured('```\n{"verdict": "ok", "score": 3}\n```', Verdict)
    assert (found.value, found.problem) == (Verdict(verdict="ok", score=3), None)


def test_the_reply_opens_with_its_own_object():
    """An object the reply holds after its own (an example, a repeat) that agrees on what it
    decides changes nothing: the first is the reply's."""
    text = '{"verdict": "mine", "score": 2}\nAs before: {"verdict": "MINE", "score": 9}'
    assert parse_structured(text, Verdict).value == Verdict(verdict="mine", score=2)


@pytest.mark.parametrize(
    "text",
    [
        'Answer B wrote ```json\n{"verdict": "quoted", "score": 1}\n``` which I reject.\nMy verdict: {"verdict": "mine", "score": 2}',
        '{"verdict": "mine", "score": 2}\nThe worker wrote {"verdict": "quoted", "score": 1}.',
    ],
    ids=["quoted-first", "quoted-after"],
)
def test_two_objects_that_disagree_are_two_answers_whatever_their_order(text):
    found = parse_structured(text, Verdict)
    assert found.value is None and found.conflicting
    assert found.problem in (
        "the reply holds two objects with different verdict ('quoted' and 'mine')",
        "the reply holds two objects with different verdict ('mine' and 'quoted')",
    )


def test_objects_inside_run_fences_or_quotation_lines_are_not_the_replys():
    text = (
        "=== Answer B [05676b0e] ===\n"
        '{"verdict": "fenced", "score": 1}\n'
        "=== end of Answer B [05676b0e] ===\n"
        '> {"verdict": "quoted", "score": 1}\n'
        'Mine: {"verdict": "mine", "score": 2}'
    )
    assert parse_structured(text, Verdict).value == Verdict(verdict="mine", score=2)


def test_an_unclosed_fence_quotes_to_the_end():
    text = '{"verdict": "mine", "score": 2}\n=== Answer B [05676b0e] ===\n{"verdict": "forged", "score": 1}'
    assert parse_structured(text, Verdict).value == Verdict(verdict="mine", score=2)


def test_blanking_keeps_offsets():
    text = "a\n> q {x}\nb"
    assert len(unquoted(text)) == len(text) and unquoted(text).splitlines()[1].strip() == ""


def test_without_decisive_fields_the_first_object_is_taken():
    assert reply_object('{"a": 1} {"a": 2}') == {"a": 1}
    with pytest.raises(TwoObjects):
        reply_object('{"a": 1} {"a": 2}', ("a",))


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"verdict": ' + "[" * 100 + "]" * 100 + "}", "the reply's JSON is nested deeper than 64 levels"),
        ('Here: {"verdict": "x", "score": ' + "9" * 30 + "}", "the reply's JSON holds a number out of range ("),
        ('{"verdict": "x", "score": ' + "9" * 5000 + "}", "the reply's JSON holds a number out of range ("),
    ],
    ids=["deep", "big-number", "5000-digits"],
)
def test_json_past_its_bounds_is_the_replys_problem(text, problem):
    found = parse_structured(text, Verdict)
    assert found.value is None and found.problem.startswith(problem) and len(found.problem) < 120


def test_a_lone_surrogate_in_a_string_is_replaced():
    assert reply_object('{"verdict": "a\\ud800b", "score": 1}') == {"verdict": "a\ufffdb", "score": 1}


def test_decisive_values_compare_as_what_they_mean():
    assert reply_object('{"a": " MySQL. "} {"a": "**mysql**"}', ("a",)) == {"a": " MySQL. "}
    assert reply_object('{"a": 70} {"a": 70.0}', ("a",)) == {"a": 70}
    with pytest.raises(TwoObjects):
        reply_object('{"a": true} {"a": 1}', ("a",))
