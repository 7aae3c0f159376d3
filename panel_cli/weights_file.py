"""The weights file a panel names (`weights: from FILE`), which `panel eval --calibrate`
writes (`panel_cli.eval.calibration`): member -> weight, read with every problem located by
file and line.

It is read while the panel file is loaded, so it sits beside `panel_cli.config` and imports
nothing but the YAML reader: a mapping of names to numbers loads no eval, gateway or engine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from panel_cli.errors import ConfigError, ConfigProblem
from panel_cli.located_yaml import parse_yaml, read_config_text

# A member's weight, from this file or its own `weight:`: bounded so that no sum of weights
# overflows or compares as nothing does (NaN).
MAX_WEIGHT = 1e6
FILE_KEYS = ("weights", "calibration")


def read_weights(path: Path, shown: str) -> dict[str, float]:
    """member -> weight from a weights file; every problem located in it (file, line, field)."""
    tree = parse_yaml(read_config_text(path, shown, kind="weights file"), shown, expand_env=False)
    data = tree.data
    if not isinstance(data, dict) or not isinstance(data.get("weights"), dict):
        line = tree.line_of(("weights",)) if isinstance(data, dict) else 1
        raise ConfigError(shown, line, None, "a weights file has 'weights:', a mapping of member names to weights")
    problems = [
        ConfigProblem(shown, tree.line_of((key,)), str(key), f"not a field of a weights file ({', '.join(FILE_KEYS)})")
        for key in data
        if key not in FILE_KEYS
    ]
    weights: dict[str, float] = {}
    for name, value in data["weights"].items():
        number = _weight(value)
        if number is None:
            problems.append(
                ConfigProblem(
                    shown,
                    tree.line_of(("weights", name)),
                    f"weights.{name}",
                    f"a weight is a number from 0 to {MAX_WEIGHT:,.0f}, not '{value}'",
                )
            )
        else:
            weights[str(name)] = number
    if problems:
        raise ConfigError.listing(problems)
    return weights


def _weight(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # a whole number too large for a float
        return None
    return number if 0 <= number <= MAX_WEIGHT else None  # NaN fails this too
