"""JSON and text from outside panel, read so that reading cannot fail in an unplanned way
(`panel_cli/untrusted.py`), by hand."""

from __future__ import annotations

import json

import pytest

from panel_cli.untrusted import MAX_DEPTH, MAX_INTEGER, RefusedJSON, clean_text, load_json, nesting_depth


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_the_depth_limit_is_exact():
    assert load_json(nested(MAX_DEPTH)) is not None
    with pytest.raises(RefusedJSON) as caught:
        load_json(nested(MAX_DEPTH + 1))
    assert (caught.value.msg, caught.value.colno) == ("is nested deeper than 64 levels", MAX_DEPTH + 1)


def test_brackets_inside_strings_and_escapes_do_not_nest():
    text = json.dumps(["[[[{{{", '\\"[[[', {"k": "]]]}}}"}])
    assert nesting_depth(text) == (2, -1)
    assert load_json(text)[0] == "[[[{{{"


def test_whole_numbers_fit_sqlites_integer():
    assert load_json(str(MAX_INTEGER)) == MAX_INTEGER
    assert load_json(str(-MAX_INTEGER)) == -MAX_INTEGER
    for number in (str(MAX_INTEGER + 1), "1" + "0" * 30, "9" * 5000):
        with pytest.raises(RefusedJSON, match="holds a number out of range"):
            load_json(f'{{"n": {number}}}')


def test_floats_stay_numbers_and_fields_bound_them():
    assert load_json("[1e400, -1e400, 2.5]") == [float("inf"), float("-inf"), 2.5]


def test_every_failure_is_a_located_json_error():
    for text in ("{", nested(100), "9" * 5000, "", "[1,]"):
        with pytest.raises(json.JSONDecodeError):
            load_json(text)


def test_lone_surrogates_are_replaced_in_keys_and_values_and_pairs_are_kept():
    text = '{"k\\ud800": ["v\\udfff", "\\ud83d\\ude00"]}'
    assert load_json(text) == {"k\ufffd": ["v\ufffd", "😀"]}
    assert clean_text("a\ud800b\U0001f600") == "a\ufffdb\U0001f600"
    plain = "nothing to clean"
    assert clean_text(plain) is plain


def test_first_control_is_where_cleaning_may_change_a_text() -> None:
    from panel_cli.untrusted import first_control, without_controls

    assert first_control("plain text\twith a tab\nand a line break") == len("plain text\twith a tab\nand a line break")
    assert first_control("ab\x1b[2Jcd") == 2
    assert first_control("ab\rcd\x07", 3) == 5
    text = "clean start \x9b31m then"
    assert without_controls(text[: first_control(text)]) == text[: first_control(text)]


def test_a_key_given_twice_in_one_object_is_refused_where_it_comes_again():
    text = '{"verdict": "REJECTED", "n": {"a": 1, "a": 2}, "verdict": "APPROVED"}'
    with pytest.raises(RefusedJSON) as caught:
        load_json(text)
    assert caught.value.msg == "gives the key 'a' twice"
    assert caught.value.pos == text.index('"a": 2')
    assert load_json('[{"a": 1}, {"a": 2}]') == [{"a": 1}, {"a": 2}], "one key per object, not per document"
