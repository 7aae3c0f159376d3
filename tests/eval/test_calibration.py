"""Calibrated weights: the arithmetic by hand, the split, and the weights file written as it is read."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from panel_cli.errors import UserError
from panel_cli.eval.calibration import (
    calibrate,
    calibrated_accuracy,
    dataset_options,
    optimal_weight,
    split_items,
    weights_yaml,
)
from panel_cli.eval.datasets import EvalItem
from panel_cli.weights_file import read_weights


def items(n: int, options: int = 4) -> list[EvalItem]:
    listed = [f"o{index}" for index in range(options)]
    return [EvalItem(id=f"q{i}", question=f"Q{i}?", answer="o0", options=listed) for i in range(n)]


def test_add_one_accuracy_by_hand():
    assert calibrated_accuracy(9, 10) == 10 / 12
    assert calibrated_accuracy(0, 0) == 0.5
    assert calibrated_accuracy(10, 10) == 11 / 12, "right every time is not certain"
    with pytest.raises(ValueError):
        calibrated_accuracy(11, 10)


def test_optimal_weight_by_hand():
    assert optimal_weight(0.9, 4) == pytest.approx(math.log(27))
    assert optimal_weight(0.6, 4) == pytest.approx(math.log(4.5))
    assert optimal_weight(0.25, 4) == 0.0, "chance among four is worth nothing"
    assert optimal_weight(0.1, 4) == 0.0, "below chance is held at 0, never negative"
    assert optimal_weight(0.75, 2) == pytest.approx(math.log(3))


def test_calibrate_counts_into_weights():
    found = calibrate(
        {"v1": ("demo/oracle@0.9", 44, 50), "v2": ("demo/oracle@0.6", 30, 50)},
        options=4,
        eval_id="e1",
        dataset="d.jsonl",
        dataset_sha256="ab",
        questions=50,
    )
    v1, v2 = found.members
    assert (v1.right, v1.questions, v1.accuracy) == (44, 50, round(45 / 52, 6))
    assert v1.weight == round(math.log(3 * (45 / 52) / (7 / 52)), 6)
    assert v2.weight == round(math.log(3 * (31 / 52) / (21 / 52)), 6)
    assert found.weights() == {"v1": v1.weight, "v2": v2.weight}


def test_k_comes_from_the_dataset_and_must_be_one_number():
    assert dataset_options(items(3)) == 4
    with pytest.raises(UserError, match="have 3, 4 options"):
        dataset_options([*items(2), *items(2, options=3)], "mixed.jsonl")
    short = [EvalItem(id="s", question="2+2?", answer="4")]
    with pytest.raises(UserError, match="every question needs options"):
        dataset_options(short)


def test_split_is_seeded_disjoint_and_keeps_the_order():
    listed = items(100)
    first, held = split_items(listed, 0.5, seed=1)
    assert len(first) == len(held) == 50
    assert {item.id for item in first}.isdisjoint(item.id for item in held)
    assert [item.id for item in first] == sorted((item.id for item in first), key=lambda name: int(name[1:]))
    assert split_items(listed, 0.5, seed=1) == (first, held)
    assert split_items(listed, 0.5, seed=2)[0] != first
    # Not the first half: a dataset sorted by topic splits evenly.
    assert first != listed[:50]


@pytest.mark.parametrize(
    "share, n, message",
    [
        (1.0, 10, "--split takes the share of questions to calibrate on, between 0 and 1 (like 0.5), not 1."),
        (
            0.01,
            10,
            "--split 0.01 of 10 questions leaves nothing to calibrate on; give more questions or another share.",
        ),
        (0.99, 10, "--split 0.99 of 10 questions leaves nothing held out; give more questions or another share."),
    ],
)
def test_a_split_that_leaves_nothing_is_refused(share, n, message):
    with pytest.raises(UserError) as caught:
        split_items(items(n), share, seed=0)
    assert caught.value.message == message


def calibration_file(tmp_path: Path) -> Path:
    found = calibrate(
        {"v1": ("demo/oracle@0.9", 45, 50), "v2": ("demo/oracle@0.6", 30, 50)},
        options=4,
        eval_id="e1",
        dataset="d.jsonl",
        dataset_sha256="ab",
        questions=50,
    )
    path = tmp_path / "weights.yaml"
    path.write_text(weights_yaml(found), encoding="utf-8")
    return path


def test_the_file_written_is_the_file_read(tmp_path):
    path = calibration_file(tmp_path)
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# Weights calibrated by panel eval e1 on d.jsonl")
    assert "add-one (Laplace): p = (right + 1) / (questions + 2)" in text
    assert read_weights(path, "weights.yaml").weights == {
        "v1": round(math.log(3 * (46 / 52) / (6 / 52)), 6),
        "v2": round(math.log(3 * (31 / 52) / (21 / 52)), 6),
    }
