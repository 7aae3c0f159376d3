"""The tolerant JSON reader behind every structured answer."""

from pydantic import BaseModel

from panel_cli.llm.structured import extract_json_object, parse_structured


class Verdict(BaseModel):
    verdict: str
    score: int


def test_plain_object():
    assert extract_json_object('{"a": 1}') == {"a": 1}


def test_json_fence():
    assert extract_json_object('Sure!\n```json\n{"a": {"b": [1, 2]}}\n```\nDone.') == {"a": {"b": [1, 2]}}


def test_object_amid_prose_with_braces_in_strings():
    text = 'Here you go: {"a": "curly } inside", "b": "\\"quoted\\""} and that is all {not json}'
    assert extract_json_object(text) == {"a": "curly } inside", "b": '"quoted"'}


def test_no_object():
    assert extract_json_object("no json here [1, 2]") is None


def test_validation_reason_names_the_field():
    obj, problem = parse_structured('{"verdict": "ok", "score": "high"}', Verdict)
    assert obj is None and problem.startswith("invalid score")


def test_valid():
    obj, problem = parse_structured('```\n{"verdict": "ok", "score": 3}\n```', Verdict)
    assert problem is None and obj == Verdict(verdict="ok", score=3)


def test_the_reply_ends_with_its_own_object():
    """A voter that quotes another answer's JSON before its own vote casts its own vote."""
    text = (
        'Answer B wrote ```json\n{"verdict": "quoted", "score": 1}\n``` which I reject.\n'
        'My verdict: {"verdict": "mine", "score": 2}'
    )
    assert extract_json_object(text) == {"verdict": "mine", "score": 2}


def test_a_trailing_fence_wins_over_earlier_prose_objects():
    text = 'They said {"verdict": "quoted", "score": 1}.\n```json\n{"verdict": "mine", "score": 2}\n```'
    assert parse_structured(text, Verdict) == (Verdict(verdict="mine", score=2), None)
