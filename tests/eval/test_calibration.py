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
    assert optimal_weight(0.1, 4) == pytest.approx(math.log(1 / 3)), "below chance counts against what it names"
    assert optimal_weight(0.75, 2) == pytest.approx(math.log(3))


def test_each_weight_has_its_standard_error_and_few_questions_are_warned_of():
    found = calibrate(
        {"v1": ("demo/oracle@0.9", 17, 20), "v2": ("demo/oracle@0", 0, 20)},
        options=4,
        eval_id="e1",
        dataset="d.jsonl",
        dataset_sha256="ab",
        questions=20,
    )
    v1, v2 = found.members
    p = 18 / 22
    assert v1.standard_error == round(1 / math.sqrt(20 * p * (1 - p)), 6)
    # Always wrong: a weight below 0, its vote evidence against what it names.
    assert v2.accuracy == round(1 / 22, 6) and v2.weight == round(math.log(3 * (1 / 22) / (21 / 22)), 6) < 0
    warning = found.warning()
    assert warning is not None and "calibrated on 20 questions, fewer than 50" in warning
    assert "v2 is below chance" in warning and "weighted_plurality" in warning
    assert (
        found.weights_line()
        == f"v1 {v1.weight:.2f} ± {v1.standard_error:.2f}, v2 {v2.weight:.2f} ± {v2.standard_error:.2f}"
    )
    plenty = calibrate(
        {"v1": ("demo/oracle@0.9", 90, 100)}, options=4, eval_id="e", dataset="d", dataset_sha256="", questions=100
    )
    assert plenty.warning() is None


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
