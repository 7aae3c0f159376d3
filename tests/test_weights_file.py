"""The weights file a panel names (`weights: from FILE`): read as the panel is loaded, its
weights given to the members, and every problem with it located."""

from __future__ import annotations

import pytest

from panel_cli.config import load_panel
from panel_cli.errors import ConfigError
from panel_cli.protocols.checks import check_panel
from panel_cli.weights_file import read_weights
from tests.eval.test_calibration import calibration_file
from tests.helpers import cli

PANEL = """\
name: mixed
protocol: vote
method: weighted_plurality
options: [a, b, c, d]
weights: from weights.yaml
members:
  - {name: v1, model: demo/oracle@0.9}
  - {name: v2, model: demo/oracle@0.6}
"""


def test_a_panel_takes_its_weights_from_the_file(tmp_path):
    calibration_file(tmp_path)
    (tmp_path / "panel.yaml").write_text(PANEL, encoding="utf-8")
    panel = load_panel(tmp_path / "panel.yaml")
    assert [member.weight for member in panel.members] == list(
        read_weights(tmp_path / "weights.yaml", "w").weights.values()
    )
    assert check_panel(panel, "vote") == []
    # A protocol that counts no weight says so once, at the field the file set, not per member.
    warnings = check_panel(panel, "council")
    assert [warning for warning in warnings if "weight:" in warning or "weights:" in warning] == [
        f"{tmp_path / 'panel.yaml'}, line 5: weights: not used by council."
    ]


@pytest.mark.parametrize(
    "weights, panel_edit, problems",
    [
        ("weights: {v1: 2}\n", None, ["panel.yaml, line 5: weights: weights.yaml gives no weight to 'v2'."]),
        (
            "weights: {v1: 2, v2: 1, zed: 3}\n",
            None,
            ["panel.yaml, line 5: weights: weights.yaml gives a weight to 'zed', not of this panel."],
        ),
        (
            "weights: {v1: -1, v2: .inf}\nnotes: 1\n",
            None,
            [
                "weights.yaml, line 2: notes: not a field of a weights file (weights, calibration).",
                "weights.yaml, line 1: weights.v1: a weight is a number from 0 to 1,000,000, not '-1'.",
                "weights.yaml, line 1: weights.v2: a weight is a number from 0 to 1,000,000, not 'inf'.",
            ],
        ),
        (
            "- just a list\n",
            None,
            ["weights.yaml, line 1: a weights file has 'weights:', a mapping of member names to weights."],
        ),
        (
            "weights: {v1: -1, v2: 1, zed: 3}\n",
            None,
            [
                "weights.yaml, line 1: weights.v1: a weight is a number from 0 to 1,000,000, not '-1'.",
                "panel.yaml, line 5: weights: weights.yaml gives a weight to 'zed', not of this panel.",
            ],
        ),
        (
            "weights:\n  v1: 2\n  v1: 3\n  zed: 1\n",
            ("  - {name: v1, model: demo/oracle@0.9}", "  - {name: v1, model: demo/oracle@0.9, weight: 2}"),
            [
                "weights.yaml, line 3: weights.v1: this key appears twice.",
                "panel.yaml, line 7: members[0].weight: the weights come from weights.yaml (weights:); leave this one out.",
                "panel.yaml, line 5: weights: weights.yaml gives no weight to 'v2'.",
                "panel.yaml, line 5: weights: weights.yaml gives a weight to 'zed', not of this panel.",
            ],
        ),
        (None, None, ["panel.yaml, line 5: weights: weights.yaml: no such file."]),
        (
            "weights: {v1: 2, v2: 1}\n",
            ("  - {name: v1, model: demo/oracle@0.9}", "  - {name: v1, model: demo/oracle@0.9, weight: 2}"),
            [
                "panel.yaml, line 7: members[0].weight: the weights come from weights.yaml (weights:); leave this one out."
            ],
        ),
        (
            "weights: {v1: 2, v2: 1}\n",
            ("weights: from weights.yaml", "weights: weights.yaml"),
            [
                "panel.yaml, line 5: weights: write 'weights: from FILE', naming a weights file "
                "(panel eval --calibrate writes one)."
            ],
        ),
    ],
)
def test_every_problem_with_the_weights_is_located(tmp_path, monkeypatch, weights, panel_edit, problems):
    monkeypatch.chdir(tmp_path)
    if weights is not None:
        (tmp_path / "weights.yaml").write_text(weights, encoding="utf-8")
    text = PANEL if panel_edit is None else PANEL.replace(*panel_edit)
    (tmp_path / "panel.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_panel("panel.yaml")
    assert caught.value.message.splitlines() == problems


@pytest.mark.parametrize("protocol", ["vote", "decide"])
def test_weights_from_a_file_under_a_method_that_counts_none_warn_once_at_the_field(tmp_path, protocol):
    """As a member's own `weight` does under majority: the file is named, the run counts no weight."""
    calibration_file(tmp_path)
    text = PANEL.replace("protocol: vote", f"protocol: {protocol}").replace("weighted_plurality", "majority")
    (tmp_path / "panel.yaml").write_text(text, encoding="utf-8")
    panel = load_panel(tmp_path / "panel.yaml")
    assert check_panel(panel, protocol) == [
        f"{tmp_path / 'panel.yaml'}, line 5: weights: used only by methods weighted and weighted_plurality, not majority."
    ]
    shown = cli("validate", str(tmp_path / "panel.yaml"))
    assert shown.exit_code == 0, shown.output
    assert "line 5: weights: used only by methods weighted and weighted_plurality, not majority." in shown.output
