"""Question files: the three formats, their keys, and one located sentence for every way a
file a person wrote can be wrong; the slices of a sharded batch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from panel_cli.batch.questions import QUESTION_LIMIT, parse_shard, read_questions, shard
from panel_cli.errors import UserError


def write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def problem(path: Path) -> str:
    with pytest.raises(UserError) as caught:
        read_questions(path)
    return caught.value.message


def test_jsonl_keeps_ids_options_and_lines_and_skips_blank_lines(tmp_path):
    path = write(
        tmp_path / "q.jsonl",
        '{"id": "q1", "question": " Tea or coffee? ", "options": ["Tea", " Coffee "]}\n\n{"id": 7, "question": "Why?", "extra": 1}\n',
    )
    first, second = read_questions(path)
    assert (first.key, first.id, first.question, first.options, first.line) == (
        "q1",
        "q1",
        "Tea or coffee?",
        ["Tea", "Coffee"],
        1,
    )
    assert (second.key, second.id, second.options, second.line, second.label) == ("7", 7, None, 3, 7)


def test_text_questions_are_keyed_by_their_text_and_a_repeat_gets_its_own_key(tmp_path):
    questions = read_questions(write(tmp_path / "q.txt", "Why?\n\n  How?  \nWhy?\n"))
    assert [(q.question, q.line, q.id, q.label) for q in questions] == [
        ("Why?", 1, None, 1),
        ("How?", 3, None, 3),
        ("Why?", 4, None, 4),
    ]
    why, how, again = (q.key for q in questions)
    assert why.startswith("#") and len(why) == 17 and how != why and again == why + "~2"
    # The key follows the text, not its line: a line added above changes no key.
    moved = read_questions(write(tmp_path / "moved.txt", "New?\nWhy?\nHow?\n"))
    assert [q.key for q in moved][1:] == [why, how]


def test_csv_reads_the_question_and_id_columns_in_any_case_and_multiline_cells(tmp_path):
    path = write(tmp_path / "q.csv", '\ufeffID,Question,note\na1,"Two\nlines?",x\n,,\n,Plain?,y\n')
    first, second = read_questions(path)
    assert (first.key, first.question, first.line) == ("a1", "Two\nlines?", 2)
    assert (second.id, second.question, second.line) == (None, "Plain?", 5)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "q.jsonl",
            '{"question": "ok"}\n{"question": "ok",\n',
            "q.jsonl, line 2: not valid JSON (Expecting property name enclosed in double quotes, column 19).",
        ),
        (
            "q.jsonl",
            '["Why?"]\n',
            'q.jsonl, line 1: each line must be a JSON object, like {"id": "q1", "question": "…"}.',
        ),
        ("q.jsonl", '{"id": "a"}\n', "q.jsonl, line 1: question: missing."),
        ("q.jsonl", '{"question": 3}\n', "q.jsonl, line 1: question: must be text."),
        ("q.jsonl", '{"question": "  "}\n', "q.jsonl, line 1: question: empty."),
        ("q.jsonl", '{"id": true, "question": "Why?"}\n', "q.jsonl, line 1: id: must be text or a whole number."),
        ("q.jsonl", '{"id": 1.5, "question": "Why?"}\n', "q.jsonl, line 1: id: must be text or a whole number."),
        (
            "q.jsonl",
            '{"id": "a", "question": "x"}\n{"id": "b", "question": "y"}\n{"id": "a", "question": "z"}\n',
            "q.jsonl, line 3: id: 'a' is also the id on line 1; ids must be unique.",
        ),
        (
            "q.jsonl",
            '{"id": 1, "question": "x"}\n{"id": "1", "question": "y"}\n',
            "q.jsonl, line 2: id: '1' is also the id on line 1; ids must be unique.",
        ),
        (
            "q.jsonl",
            '{"question": "x", "options": "A, B"}\n',
            'q.jsonl, line 1: options: must be a list of texts, like ["Yes", "No"].',
        ),
        (
            "q.jsonl",
            '{"question": "x", "options": ["A"]}\n',
            "q.jsonl, line 1: options: needs at least two options to choose between.",
        ),
        (
            "q.jsonl",
            '{"question": "x", "options": ["Ship", "ship"]}\n',
            "q.jsonl, line 1: options: 'ship' is given twice (options match in any case).",
        ),
        (
            "q.csv",
            "id,text\n1,Why?\n",
            "q.csv, line 1: a CSV file needs a 'question' column (and may have an 'id' column).",
        ),
        ("q.csv", 'question\n"Why?\n', "q.csv, line 2: not valid CSV (unexpected end of data)."),
        ("q.csv", "id,question\n1,\n", "q.csv, line 2: question: empty."),
        ("q.txt", "\n  \n", "q.txt holds no questions."),
        (
            "q.json",
            '[{"question": "Why?"}]',
            "q.json: a batch reads JSONL (one JSON object a line, named .jsonl), CSV or text, not a .json file.",
        ),
    ],
)
def test_every_mistake_is_one_located_sentence(tmp_path, name, text, message):
    path = write(tmp_path / name, text)
    assert problem(path) == f"{tmp_path}/{message}"


def test_a_file_that_is_not_utf8_names_the_line_of_the_first_bad_byte(tmp_path):
    path = write(tmp_path / "q.txt", "Why?\nHow?\ncaf\xe9?\n".encode("latin-1"))
    assert problem(path) == f"{path}, line 3: not UTF-8 text."


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_a_device_is_refused_before_it_is_read():
    """/dev/zero never ends: read whole, it filled memory until the run died of it."""
    assert problem(Path("/dev/zero")) == (
        "/dev/zero is a device or a socket, not a file; give a questions file (JSONL, CSV, or text with one question a line)."
    )


def test_missing_files_folders_and_overlong_questions(tmp_path):
    assert (
        problem(tmp_path / "none.txt")
        == f"{tmp_path}/none.txt does not exist; give a questions file (JSONL, CSV, or text with one question a line)."
    )
    assert (
        problem(tmp_path)
        == f"{tmp_path} is a folder; give a questions file (JSONL, CSV, or text with one question a line)."
    )
    path = write(tmp_path / "q.jsonl", json.dumps({"question": "x" * (QUESTION_LIMIT + 1)}) + "\n")
    assert problem(path) == f"{path}, line 1: question: longer than {QUESTION_LIMIT:,} characters."


@pytest.mark.parametrize("count", [1, 2, 3, 7, 40])
def test_shards_cover_every_question_exactly_once(tmp_path, count):
    questions = read_questions(write(tmp_path / "q.txt", "".join(f"Question {n}?\n" for n in range(25))))
    slices = [shard(questions, index, count) for index in range(1, count + 1)]
    keys = [question.key for part in slices for question in part]
    assert sorted(keys) == sorted(question.key for question in questions)
    assert len(keys) == len(set(keys))
    assert max(map(len, slices)) - min(map(len, slices)) <= 1


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("2", "--shard: '2' is not a slice; give it as I/N, like 2/5 (the second of five)."),
        ("0/3", "--shard: the slice must be between 1 and 3, like 1/3."),
        ("4/3", "--shard: the slice must be between 1 and 3, like 1/3."),
        ("1/0", "--shard: the number of slices must be between 1 and 10,000."),
    ],
)
def test_a_bad_shard_is_one_sentence(value, message):
    with pytest.raises(UserError) as caught:
        parse_shard(value)
    assert caught.value.message == message
    assert parse_shard(" 2 / 5 ") == (2, 5)
