"""The weights file a panel names (`weights: from FILE`), which `panel eval --calibrate`
writes (`panel_cli.eval.calibration`): member -> weight, read with every problem located by
file and line.

It is read while the panel file is loaded, so it sits beside `panel_cli.config` and imports
nothing but the file and YAML readers: a mapping of names to numbers loads no eval, gateway
or engine. The file is read with the refusals of every local file a panel names
(`panel_cli.local_files`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from panel_cli.errors import ConfigError, ConfigProblem
from panel_cli.local_files import TextFileRules, read_text_file
from panel_cli.located_yaml import MAX_FILE_BYTES, parse_yaml

# A member's weight, from this file or its own `weight:`: bounded so that no sum of weights
# overflows or compares as nothing does (NaN).
MAX_WEIGHT = 1e6
FILE_KEYS = ("weights", "calibration")
WEIGHTS_FILE = TextFileRules(
    limit=MAX_FILE_BYTES,
    too_big="too big for a weights file",
    binary="a weights file is YAML text",
    not_utf8="save it as UTF-8",
    not_regular="name the file panel eval --calibrate wrote",
)


class WeightsFile(NamedTuple):
    """A weights file as read: the weights it gives (member -> weight), every member it names
    (one with a bad weight too), and every problem in it, located, for the panel to report
    along with its own: a file with a bad weight and a stranger in it takes one fix, not two."""

    weights: dict[str, float]
    named: list[str]
    problems: list[ConfigProblem]


def read_weights(path: Path, shown: str) -> WeightsFile:
    """The weights file at `path` (`shown` as the panel names it). Raises FileRefused when it
    cannot be read (none there, a folder; a FIFO or a device, refused before it is opened, as
    a question file is, so nothing waits on a pipe), ConfigError when it is no YAML or holds no
    `weights:` mapping; any other problem is in the result."""
    tree = parse_yaml(read_text_file(path, WEIGHTS_FILE), shown, expand_env=False)
    data = tree.data
    if not isinstance(data, dict) or not isinstance(data.get("weights"), dict):
        line = tree.line_of(("weights",)) if isinstance(data, dict) else 1
        raise ConfigError(shown, line, None, "a weights file has 'weights:', a mapping of member names to weights")
    problems = [entry for _, entry in tree.problems]
    problems += [
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
    return WeightsFile(weights, [str(name) for name in data["weights"]], problems)


def _weight(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # a whole number too large for a float
        return None
    return number if 0 <= number <= MAX_WEIGHT else None  # NaN fails this too
