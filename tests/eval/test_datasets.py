"""Datasets: the shipped one, and every problem in a user's file located and listed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from panel_cli.errors import ConfigError, UserError
from panel_cli.eval.datasets import builtin_names, list_builtin, load_dataset, parse_dataset
from panel_cli.protocols.vote.ballots import match_option


def test_the_shipped_dataset_is_sixty_or_more_multiple_choice_questions():
    dataset = load_dataset("builtin:general")
    assert len(dataset.items) >= 60
    assert dataset.multiple_choice
    assert len({item.id for item in dataset.items}) == len(dataset.items)
    assert len({item.question for item in dataset.items}) == len(dataset.items)
    topics = {item.about for item in dataset.items}
    assert topics == {"general knowledge", "arithmetic", "reasoning"}
    for item in dataset.items:
        assert item.options is not None and len(item.options) == 4
        assert item.answer in item.options
        # Each option read alone names itself and no other, so grading by option is unambiguous.
        for option in item.options:
            assert match_option(option, item.options) == option, (item.id, option)


def test_list_builtin_gives_sizes():
    (general,) = list_builtin()
    assert general.name == "builtin:general"
    assert general.size == len(load_dataset("builtin:general").items)
    assert general.description.startswith("multiple choice: ")
    assert builtin_names() == ["general"]


def test_an_unknown_builtin_names_the_ones_there_are():
    with pytest.raises(UserError) as caught:
        load_dataset("builtin:trivia")
    assert (
        caught.value.message
        == "--dataset: there is no built-in dataset 'trivia'; the built-ins are general (panel eval --list-datasets)."
    )


def test_a_jsonl_file_with_short_answers_and_numbers(tmp_path: Path):
    path = tmp_path / "mine.jsonl"
    rows = [
        {"question": "What is 6 × 7?", "answer": 42},
        {"id": "tower", "question": "What is the tall tower in Paris?", "answer": "Eiffel Tower"},
        {"question": "Pick the prime.", "options": [4, 7, 9], "answer": "7"},
    ]
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n\n", encoding="utf-8")
    dataset = load_dataset(str(path))
    assert [(item.id, item.answer, item.options) for item in dataset.items] == [
        ("1", "42", None),
        ("tower", "Eiffel Tower", None),
        ("3", "7", ["4", "7", "9"]),
    ]
    assert not dataset.multiple_choice


def test_a_gold_answer_is_read_as_the_option_it_names():
    (item,) = parse_dataset(
        json.dumps({"question": "Which?", "options": ["PostgreSQL", "MySQL"], "answer": " postgresql "}), "d.jsonl"
    )
    assert item.answer == "PostgreSQL"


def test_every_problem_is_located_and_listed_at_once():
    lines = [
        "not json",
        json.dumps({"question": "No answer here"}),
        json.dumps({"question": "Which?", "options": ["a", "b"], "answer": "c"}),
        json.dumps({"question": "Which?", "options": ["a", "A"], "answer": "a"}),
        json.dumps({"question": "Which?", "options": ["only"], "answer": "only"}),
        json.dumps({"question": "Q", "answer": "x", "gold": "x"}),
        json.dumps(["a", "list"]),
        json.dumps({"id": "same", "question": "Q1", "answer": "x"}),
        json.dumps({"id": "same", "question": "Q2", "answer": "y"}),
    ]
    with pytest.raises(ConfigError) as caught:
        parse_dataset("\n".join(lines), "d.jsonl")
    assert caught.value.message.splitlines() == [
        "d.jsonl, line 1: not JSON (Expecting value); a dataset has one JSON object a line.",
        "d.jsonl, line 2: answer: missing or empty; every row needs its gold answer.",
        "d.jsonl, line 3: answer: 'c' is not one of the options.",
        "d.jsonl, line 4: options: 'A' is given twice (options match in any case).",
        "d.jsonl, line 5: options: a multiple-choice question needs at least two options.",
        "d.jsonl, line 6: gold: not a dataset field (question, answer, options, id, about).",
        "d.jsonl, line 7: a row is a JSON object with 'question' and 'answer'.",
        "d.jsonl, line 9: id: 'same' is also the id on line 8.",
    ]


def test_an_empty_dataset_is_refused():
    with pytest.raises(UserError) as caught:
        parse_dataset("\n\n", "d.jsonl")
    assert caught.value.message == "--dataset: d.jsonl holds no questions."


def test_files_that_are_not_datasets(tmp_path: Path):
    with pytest.raises(UserError, match=r"^--dataset: .*nope\.jsonl: no such file\.$"):
        load_dataset(str(tmp_path / "nope.jsonl"))
    with pytest.raises(UserError, match=r"is a folder; give a JSONL file\.$"):
        load_dataset(str(tmp_path))
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b'{"question": "ok", "answer": "x"}\n\xff\xfe\n')
    with pytest.raises(ConfigError) as caught:
        load_dataset(str(binary))
    assert caught.value.message.endswith("bin.jsonl, line 2: is not UTF-8 text; save the dataset as UTF-8.")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_refused_without_blocking(tmp_path: Path):
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match=r"is not a regular file; give a JSONL file\.$"):
        load_dataset(str(fifo))
