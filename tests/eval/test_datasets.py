"""Datasets: the shipped one, and every problem in a user's file located and listed."""

from __future__ import annotations

import json
import os
import threading
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
    with pytest.raises(UserError, match=r"^--dataset: .*nope\.jsonl does not exist; give a JSONL file\.$"):
        load_dataset(str(tmp_path / "nope.jsonl"))
    with pytest.raises(UserError, match=r"is a folder; give a JSONL file\.$"):
        load_dataset(str(tmp_path))
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b'{"question": "ok", "answer": "x"}\n\xff\xfe\n')
    with pytest.raises(ConfigError) as caught:
        load_dataset(str(binary))
    assert caught.value.message.endswith("bin.jsonl, line 2: is not UTF-8 text; save the dataset as UTF-8.")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_dataset_is_read_from_a_pipe_as_process_substitution_gives_it(tmp_path: Path):
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_text, args=('{"question": "Is 2 even?", "answer": "yes"}\n',))
    writer.start()
    dataset = load_dataset(str(fifo))
    writer.join()
    assert [(item.question, item.answer) for item in dataset.items] == [("Is 2 even?", "yes")]


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_a_device_is_refused_before_it_is_read():
    with pytest.raises(
        UserError, match=r"^--dataset: /dev/zero is a device or a socket, not a file; give a JSONL file\.$"
    ):
        load_dataset("/dev/zero")


ROW = '{{"question": "Is {n} even?", "answer": "{answer}"}}\n'


def test_a_limit_reads_only_the_questions_it_needs(tmp_path: Path):
    """`--limit 3` of a million-line dataset: the lines past the third question are never
    read as questions, so what they hold (here, not JSON at all) does not matter."""
    path = tmp_path / "big.jsonl"
    path.write_text(
        "".join(ROW.format(n=n, answer="yes" if n % 2 == 0 else "no") for n in range(3)) + "not json\n" * 1_000_000
    )
    dataset = load_dataset(str(path), limit=3)
    assert [item.question for item in dataset.items] == ["Is 0 even?", "Is 1 even?", "Is 2 even?"]
    assert len(dataset.sha256) == 64, "the file is still identified whole"
    with pytest.raises(ConfigError):
        load_dataset(str(path))


def test_without_a_limit_a_dataset_holds_at_most_as_many_questions_as_a_batch(tmp_path: Path):
    from panel_cli.local_files import QUESTION_COUNT_LIMIT

    path = tmp_path / "huge.jsonl"
    path.write_text("".join(ROW.format(n=n, answer="yes") for n in range(QUESTION_COUNT_LIMIT + 1)))
    with pytest.raises(UserError) as caught:
        load_dataset(str(path))
    assert caught.value.message == (
        f"--dataset: {path} holds more than {QUESTION_COUNT_LIMIT:,} questions; give --limit, or split it."
    )
    assert len(load_dataset(str(path), limit=5).items) == 5
    exactly = tmp_path / "exactly.jsonl"
    exactly.write_text("".join(ROW.format(n=n, answer="yes") for n in range(QUESTION_COUNT_LIMIT)))
    assert len(load_dataset(str(exactly)).items) == QUESTION_COUNT_LIMIT
