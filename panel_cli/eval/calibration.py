"""Calibrated weights: each member's accuracy measured on questions with known answers, turned
into the weight that makes "most weight wins" the best count of independent votes.

A member right with probability p on questions of K options, wrong ones spread evenly, makes
its choice (K − 1)p/(1 − p) times likelier to be right than any one other option; adding the
logs of those odds and taking the option with the most is the Nitzan–Paroush rule, the optimum
(`method: weighted_plurality`). p is not known, only counted: `right` of `questions`, read with
an add-one prior (Laplace's rule of succession, p = (right + 1)/(questions + 2)), so a member
right on every question of a small sample gets a large weight, not an infinite one. A member
at or below chance (p ≤ 1/K) would count against what it names; a weight cannot be negative,
so it gets 0 and says so.

The weights go to a YAML file a panel names (`weights: from FILE`), read back by
`panel_cli.weights_file`. `--split` holds out questions: a seeded shuffle of the ids
(`split_items`), so a dataset sorted by topic splits evenly, and the same seed splits alike.

Pure but for the file's text: tested by hand.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence

import yaml
from pydantic import BaseModel

from panel_cli.errors import UserError
from panel_cli.eval.datasets import Dataset, EvalItem

PRIOR = "add-one (Laplace): p = (right + 1) / (questions + 2)"
DIGITS = 6


class MemberCalibration(BaseModel):
    """One member's count and what it makes: `accuracy` is p with the prior, `weight` its
    log-odds over the dataset's K options (0 at or below chance)."""

    member: str
    model: str
    right: int
    questions: int
    accuracy: float
    weight: float


class Calibration(BaseModel):
    """What `--calibrate` measured: on which questions (`questions` of `dataset`, `options`
    each), with which prior, and every member's weight."""

    eval_id: str
    dataset: str
    dataset_sha256: str
    options: int
    questions: int
    prior: str = PRIOR
    members: list[MemberCalibration]

    def weights(self) -> dict[str, float]:
        return {entry.member: entry.weight for entry in self.members}


def calibrated_accuracy(right: int, questions: int) -> float:
    """p with the add-one prior: (right + 1) / (questions + 2); 1/2 with no question."""
    if questions < 0 or not 0 <= right <= questions:
        raise ValueError(f"{right} right out of {questions} is not a count")
    return (right + 1) / (questions + 2)


def optimal_weight(p: float, options: int) -> float:
    """log((K − 1)p/(1 − p)) for K `options`, never below 0 (a weight is not negative)."""
    if options < 2:
        raise ValueError("a weight needs at least two options to choose between")
    if not 0.0 < p < 1.0:
        raise ValueError(f"{p} is not a probability strictly between 0 and 1")
    return max(0.0, math.log((options - 1) * p / (1 - p)))


def dataset_options(dataset: Dataset | Sequence[EvalItem], source: str = "the dataset") -> int:
    """K, the number of options every question has; a UserError when some question has none
    or they differ, since one weight cannot be right for both."""
    items = dataset.items if isinstance(dataset, Dataset) else list(dataset)
    counts = sorted({len(item.options) if item.options else 0 for item in items})
    if not items:
        raise UserError(f"--calibrate: {source} has no question to calibrate on.")
    if counts[0] == 0:
        raise UserError(
            f"--calibrate: every question needs options (K in log((K − 1)p/(1 − p))); some of {source} have none."
        )
    if len(counts) > 1:
        listed = ", ".join(str(count) for count in counts)
        raise UserError(
            f"--calibrate: the questions of {source} have {listed} options; one weight per member needs the same K for all."
        )
    return counts[0]


def calibrate(
    counts: Mapping[str, tuple[str, int, int]],
    *,
    options: int,
    eval_id: str,
    dataset: str,
    dataset_sha256: str,
    questions: int,
) -> Calibration:
    """Every member's weight from its count: member -> (model, right, questions)."""
    members = []
    for member, (model, right, asked) in counts.items():
        p = calibrated_accuracy(right, asked)
        members.append(
            MemberCalibration(
                member=member,
                model=model,
                right=right,
                questions=asked,
                accuracy=round(p, DIGITS),
                weight=round(optimal_weight(p, options), DIGITS),
            )
        )
    return Calibration(
        eval_id=eval_id,
        dataset=dataset,
        dataset_sha256=dataset_sha256,
        options=options,
        questions=questions,
        members=members,
    )


def split_items(items: Sequence[EvalItem], share: float, seed: int) -> tuple[list[EvalItem], list[EvalItem]]:
    """(calibration, held out): the questions ranked by a hash of the seed and their id, the
    first `share` of them to calibrate on; each part keeps the dataset's order."""
    if not 0.0 < share < 1.0:
        raise UserError(
            f"--split takes the share of questions to calibrate on, between 0 and 1 (like 0.5), not {share:g}."
        )
    cut = round(share * len(items))
    if cut < 1 or cut >= len(items):
        raise UserError(
            f"--split {share:g} of {len(items)} questions leaves "
            f"{'nothing to calibrate on' if cut < 1 else 'nothing held out'}; give more questions or another share."
        )
    ranked = sorted(items, key=lambda item: hashlib.sha256(f"{seed}\x00{item.id}".encode()).hexdigest())
    chosen = {item.id for item in ranked[:cut]}
    return [item for item in items if item.id in chosen], [item for item in items if item.id not in chosen]


# The weights file --------------------------------------------------------------------------------


def weights_yaml(calibration: Calibration) -> str:
    """The file `--calibrate` writes: `weights` (member -> weight, what a panel reads) and
    `calibration` (how they were measured), after a comment saying how to use it."""
    about = calibration.model_dump(mode="json", exclude={"members"})
    about["members"] = {
        entry.member: {key: value for key, value in entry.model_dump(mode="json").items() if key != "member"}
        for entry in calibration.members
    }
    document = {"weights": calibration.weights(), "calibration": about}
    header = (
        f"# Weights calibrated by panel eval {calibration.eval_id} on {calibration.dataset}: for each member\n"
        f"# log((K - 1)p / (1 - p)) with K = {calibration.options} options and p its accuracy, {PRIOR}.\n"
        "# Name this file in a panel (weights: from FILE) and vote with method: weighted_plurality.\n"
    )
    return header + yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
