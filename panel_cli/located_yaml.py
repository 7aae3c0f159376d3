"""Reading a YAML config that may be hostile: plain values, the line of every field, and
every problem located by file, line and field.

The YAML is composed into nodes first so each value keeps the line it came from; then
`${VAR}` is expanded, and a pydantic validation error's location can be mapped back to
the line of the offending field. Every problem is collected, so one report lists them all.

The file may be hostile (a downloaded panel, a typo'd path to /dev/zero): its size, nesting
depth and alias expansion are capped before anything is built, and only plain YAML values
are accepted, so no input can end in a traceback, a hang or a memory blow-up.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
from collections.abc import Callable
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from yaml.composer import ComposerError
from yaml.reader import ReaderError

from panel_cli.errors import ConfigError, ConfigProblem, PanelFileError
from panel_cli.untrusted import clean_text


class LocatedError(ValueError):
    """Raised inside validators that know which fields are wrong, so their lines can be found."""

    def __init__(self, problems: list[tuple[tuple[Any, ...], str]]) -> None:
        super().__init__("; ".join(message for _, message in problems))
        self.problems = problems


MAX_FILE_BYTES = 1024 * 1024
MAX_DEPTH = 100
MAX_ALIAS_VALUES = 10_000
# PyYAML's pure-Python parser takes about 30 µs a value: a 1 MiB file of `[0,0,0,…]`
# would take over ten seconds, and no panel comes near this many values.
MAX_VALUES = 50_000
MAX_PROBLEMS = 50

_STANDARD = "tag:yaml.org,2002:"
_SCALAR_KINDS = {
    "null": "null",
    "bool": "true or false",
    "int": "an integer",
    "float": "a number",
    "str": "text",
    "timestamp": "a date",
}
_SCALAR_CONSTRUCTOR = yaml.SafeLoader("")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def bad_byte_line(data: bytes, error: UnicodeDecodeError) -> int:
    return data.count(b"\n", 0, error.start) + 1


def decode_utf8(data: bytes) -> str:
    return data.decode("utf-8").removeprefix("\ufeff")


def read_config_text(path: Path, file: str, kind: str = "panel file") -> str:
    """A YAML file's text, refused before parsing when it is too big to be a config (so
    `/dev/zero` or a huge file cannot exhaust memory: at most one byte past the limit is
    read) or not UTF-8."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise PanelFileError(f"{file}: no such file{_nearby(path)}.") from None
    except IsADirectoryError:
        raise PanelFileError(f"{file}: is a folder, not a {kind}.") from None
    except OSError as exc:
        raise PanelFileError(f"{file}: cannot be read ({exc.strerror}).") from None
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(
            file, None, None, f"the file is larger than {size_text(MAX_FILE_BYTES)}, too big for a {kind}"
        )
    try:
        return decode_utf8(data)
    except UnicodeDecodeError as exc:
        byte = data[exc.start]
        raise ConfigError(
            file, bad_byte_line(data, exc), None, f"the file is not UTF-8 text (byte 0x{byte:02x}); save it as UTF-8"
        ) from None


def size_text(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit // 1024} KiB"


def _nearby(path: Path) -> str:
    """` (there is configs/x.yaml)` when the user probably meant the example folder."""
    candidates = [Path("configs") / path.name]
    if not path.is_absolute():
        candidates.insert(0, Path("configs") / path)
    for candidate in candidates:
        if candidate != path and candidate.is_file():
            return f" (there is {candidate})"
    return ""


class _GuardedComposer(yaml.SafeLoader):
    """PyYAML's composer with limits on nesting, values and aliases, checked as each node
    is composed.

    The composer recurses once per nesting level, so 2000 `[` end in RecursionError unless
    the depth is capped here. And an alias shares its anchor's node, so a 'billion laughs'
    file composes in microseconds and explodes only when walked: each node's expanded size
    and depth are measured as it is composed, and every alias adds its target's size to a
    budget, so such a file is refused at the alias that crosses it, before any expansion."""

    def __init__(self, text: str, file: str) -> None:
        super().__init__(text)
        self.file = file
        self.depth = 0
        self.values = 0
        self.repeated = 0
        self.measures: dict[int, tuple[int, int]] = {}

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event = self.peek_event()
        line = event.start_mark.line + 1
        if isinstance(event, yaml.AliasEvent):
            target = self.anchors.get(event.anchor)
            if target is not None and event.anchor is not None:
                self._count_alias(event.anchor, target, line)
            return super().compose_node(parent, index)
        self.values += 1
        if self.values > MAX_VALUES:
            raise ConfigError(
                self.file,
                line,
                None,
                f"the file holds more than {MAX_VALUES} values by here, far more than a panel needs",
            )
        if isinstance(event, yaml.CollectionStartEvent):
            if self.depth >= MAX_DEPTH:
                raise self._too_deep(line)
            self.depth += 1
            node = super().compose_node(parent, index)
            self.depth -= 1
        else:
            node = super().compose_node(parent, index)
        if node is not None:
            self.measures[id(node)] = self._measure(node)
        return node

    def _measure(self, node: yaml.Node) -> tuple[int, int]:
        """(values, nesting depth) of the node once every alias inside it is expanded."""
        if isinstance(node, yaml.ScalarNode):
            return 1, 0
        children = (
            [child for pair in node.value for child in pair] if isinstance(node, yaml.MappingNode) else node.value
        )
        measures = [self.measures[id(child)] for child in children]
        return 1 + sum(size for size, _ in measures), 1 + max((depth for _, depth in measures), default=0)

    def _count_alias(self, anchor: str, target: yaml.Node, line: int) -> None:
        measure = self.measures.get(id(target))
        if measure is None:
            raise ConfigError(
                self.file, line, None, f"the alias *{anchor} is used inside the value it names, which would never end"
            )
        size, depth = measure
        self.repeated += size
        if self.repeated > MAX_ALIAS_VALUES:
            raise ConfigError(
                self.file,
                line,
                None,
                f"the alias *{anchor} takes the values repeated through aliases past {MAX_ALIAS_VALUES}, the most a file may repeat",
            )
        if self.depth + depth > MAX_DEPTH:
            raise self._too_deep(line)

    def _too_deep(self, line: int) -> ConfigError:
        return ConfigError(self.file, line, None, f"values are nested more than {MAX_DEPTH} levels deep here")


def _compose(text: str, file: str) -> yaml.Node | None:
    try:
        loader = _GuardedComposer(text, file)
    except ReaderError as exc:
        raise _reader_error(exc, text, file) from None
    try:
        return loader.get_single_node()
    except ReaderError as exc:
        raise _reader_error(exc, text, file) from None
    except yaml.MarkedYAMLError as exc:
        raise _syntax_error(exc, text, file) from None
    finally:
        loader.dispose()


def _reader_error(exc: ReaderError, text: str, file: str) -> ConfigError:
    character = exc.character if isinstance(exc.character, int) else ord(exc.character)
    line = text.count("\n", 0, exc.position) + 1
    return ConfigError(
        file, line, None, f"not valid YAML: the character #x{character:04x} is not allowed in a YAML file"
    )


_SCANNING = re.compile(r"^while (?:parsing|scanning) (?:an? )?")


def _syntax_error(exc: yaml.MarkedYAMLError, text: str, file: str) -> ConfigError:
    """Where the broken construct starts (PyYAML's context mark) and where the parser gave
    up (its problem mark), in one sentence. The problem mark alone misleads: an unclosed
    quote is reported at the end of the file, past its last line."""
    last_line = max(1, len(text.splitlines()))

    def line_of(mark: yaml.Mark) -> int:
        return min(mark.line + 1, last_line)

    problem = exc.problem or "the YAML is broken"
    context = exc.context or ""
    problem_line = line_of(exc.problem_mark) if exc.problem_mark else None
    at_end = "end of stream" in problem or "<stream end>" in problem
    gave_up = "the parser reached the end of the file" if at_end else f"the parser gave up at line {problem_line}"
    if isinstance(exc, ComposerError):
        return ConfigError(file, problem_line, None, f"not valid YAML: {_composer_problem(exc, line_of)}")
    if exc.context_mark is None:
        return ConfigError(file, problem_line, None, f"not valid YAML: {_plain_problem(problem)}")
    start = line_of(exc.context_mark)
    openers = {
        "flow sequence": "the '[' opened here",
        "flow mapping": "the '{' opened here",
        "quoted scalar": "the quote opened here",
    }
    construct = _SCANNING.sub("", context)
    if construct in openers and (at_end or problem.startswith("expected ',' or")):
        what = f"{openers[construct]} is never closed"
    elif construct == "flow node" and at_end:
        return ConfigError(file, start, None, "not valid YAML: the file ends inside a '[' or '{' that is never closed")
    elif construct == "simple key" and problem == "could not find expected ':'":
        what = "the key that starts here has no ':' after it"
    elif construct.startswith("block ") and problem.startswith("expected <block end>"):
        problem = f"line {problem_line} does not fit the block that starts here; check its indentation"
        return ConfigError(file, start, None, f"not valid YAML: {problem}")
    else:
        what = f"{problem}, in the {construct} that starts here"
    return ConfigError(file, start, None, f"not valid YAML: {what} ({gave_up})")


def _plain_problem(problem: str) -> str:
    if problem == "mapping values are not allowed here":
        return "': ' cannot appear here; put quotes around a value that contains ': '"
    if problem.startswith("found character '\\t'"):
        return "a tab cannot indent YAML; use spaces"
    return problem


def _composer_problem(exc: yaml.MarkedYAMLError, line_of: Callable[[yaml.Mark], int]) -> str:
    problem, context = exc.problem or "", exc.context or ""
    undefined = re.match(r"found undefined alias '(.*)'", problem)
    if undefined:
        return f"the alias *{undefined.group(1)} is used before an anchor &{undefined.group(1)} defines it"
    duplicate = re.match(r"found duplicate anchor '(.*)'", context)
    if duplicate and exc.context_mark is not None:
        return f"the anchor &{duplicate.group(1)} is defined twice (first at line {line_of(exc.context_mark)})"
    if context.startswith("expected a single document"):
        return "a second YAML document starts here; a file holds one"
    return f"{context} {problem}".strip()


def field_name(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def line_for(loc: tuple[Any, ...], lines: dict[tuple[Any, ...], int]) -> int | None:
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None


class _Skip(Exception):
    """A value that was refused (its problem is recorded) and is left out."""


@dataclasses.dataclass
class YamlTree:
    """A YAML file as plain values, with the line of every field and every problem found.

    Problems are collected rather than raised, so one report lists them all; a
    validation error under a field that already has a problem is not reported twice."""

    file: str
    expand_env: bool = True
    data: Any = None
    lines: dict[tuple[Any, ...], int] = dataclasses.field(default_factory=dict)
    problems: list[tuple[tuple[Any, ...], ConfigProblem]] = dataclasses.field(default_factory=list)
    expanded_values: list[str] = dataclasses.field(default_factory=list)
    variables: dict[tuple[Any, ...], list[str]] = dataclasses.field(default_factory=dict)
    """The environment variables each field's value was expanded from, by the field's path."""
    _seen: set[ConfigProblem] = dataclasses.field(default_factory=set, init=False, repr=False)
    _problem_locs: set[tuple[Any, ...]] = dataclasses.field(default_factory=set, init=False, repr=False)

    def line_of(self, loc: tuple[Any, ...]) -> int | None:
        return line_for(loc, self.lines)

    def add_problem(
        self, loc: tuple[Any, ...], problem: str, line: int | None = None, *, covering: bool = True
    ) -> None:
        """`line` defaults to the field's; `covering=False` for a problem about one part of a
        mapping (a bad key), which must not hide the problems of the mapping's other fields."""
        entry = ConfigProblem(
            self.file, line if line is not None else self.line_of(loc), field_name(loc) or None, problem
        )
        if entry not in self._seen:
            self._seen.add(entry)
            if covering:
                self._problem_locs.add(loc)
            self.problems.append((loc, entry))

    def covers(self, loc: tuple[Any, ...]) -> bool:
        """Whether a problem is already reported at `loc` or at a field that contains it."""
        return any(loc[:end] in self._problem_locs for end in range(len(loc) + 1))

    def error(self) -> ConfigError:
        """Every problem, in the order of the file; past MAX_PROBLEMS, a count of the rest
        (a hostile file can hold a hundred thousand)."""
        ordered = sorted((entry for _, entry in self.problems), key=lambda entry: (entry.line is None, entry.line or 0))
        if len(ordered) > MAX_PROBLEMS:
            rest = len(ordered) - MAX_PROBLEMS
            ordered = [*ordered[:MAX_PROBLEMS], ConfigProblem(self.file, None, None, f"and {rest} more problems")]
        return ConfigError.listing(ordered)

    def add_validation_errors(self, exc: ValidationError, model: type[BaseModel], prefix: tuple[Any, ...] = ()) -> None:
        """Each of pydantic's errors as a located problem; for a union only the branch the
        user meant (see specific_errors), and an unknown field with the closest known one."""
        for error in specific_errors(exc.errors()):
            loc = prefix + clean_loc(tuple(error["loc"]))
            context = error.get("ctx", {}).get("error")
            if isinstance(context, LocatedError):
                for inner, message in context.problems:
                    self._add_unless_covered(loc + inner, message)
            elif error["type"] == "extra_forbidden":
                self._add_unless_covered(loc, _unknown_field(loc[-1], _model_at(model, loc[len(prefix) : -1])))
            else:
                self._add_unless_covered(loc, describe_error(error))

    def _add_unless_covered(self, loc: tuple[Any, ...], problem: str) -> None:
        if not self.covers(loc):
            self.add_problem(loc, problem)

    def walk(self, node: yaml.Node, path: tuple[Any, ...]) -> Any:
        """Node -> plain value, recording each path's line, expanding `${VAR}`, refusing
        duplicate keys and any tag beyond plain YAML values (so `!!python/…` is just refused)."""
        self.lines[path] = node.start_mark.line + 1
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node, path)
        if node.tag not in (_STANDARD + "map", _STANDARD + "seq"):
            self._refuse_tag(node, path)
        if isinstance(node, yaml.SequenceNode):
            return [self._value_or_none(item, path + (index,)) for index, item in enumerate(node.value)]
        assert isinstance(node, yaml.MappingNode)  # the one kind of node left
        return self._mapping(node, path)

    def _value_or_none(self, node: yaml.Node, path: tuple[Any, ...]) -> Any:
        try:
            return self.walk(node, path)
        except _Skip:
            return None

    def _mapping(self, node: yaml.MappingNode, path: tuple[Any, ...]) -> dict[Any, Any]:
        merge = _STANDARD + "merge"
        # Merged keys are walked first, so the keys written in this mapping keep their own lines.
        merged: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == merge:
                for key, value in self._merge_source(value_node, path).items():
                    merged.setdefault(key, value)
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == merge:
                continue
            key_line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                self.add_problem(
                    path, "a key must be a plain name, not a list or a mapping", line=key_line, covering=False
                )
                continue
            try:
                key = self._scalar(key_node, path, expand=False)
            except _Skip:
                continue
            if key in result:
                self.add_problem(path + (key,), "this key appears twice", line=key_line)
                continue
            result[key] = self._value_or_none(value_node, path + (key,))
            self.lines[path + (key,)] = key_line
        for key, value in merged.items():
            result.setdefault(key, value)
        self.lines[path] = node.start_mark.line + 1
        return result

    def _merge_source(self, node: yaml.Node, path: tuple[Any, ...]) -> dict[Any, Any]:
        """`<<: *defaults` (or a list of them, the first winning): YAML's merge key."""
        sources = node.value if isinstance(node, yaml.SequenceNode) else [node]
        merged: dict[Any, Any] = {}
        for source in sources:
            if not isinstance(source, yaml.MappingNode):
                self.add_problem(
                    path,
                    "'<<' merges a mapping, or a list of mappings, into this one",
                    line=source.start_mark.line + 1,
                    covering=False,
                )
                continue
            for key, value in (self._value_or_none(source, path) or {}).items():
                merged.setdefault(key, value)
        return merged

    def _scalar(self, node: yaml.ScalarNode, path: tuple[Any, ...], expand: bool = True) -> Any:
        kind = node.tag.removeprefix(_STANDARD)
        if not node.tag.startswith(_STANDARD) or kind not in _SCALAR_KINDS:
            self._refuse_tag(node, path)
        try:
            value = yaml.SafeLoader.yaml_constructors[node.tag](_SCALAR_CONSTRUCTOR, node)
        except (ValueError, KeyError, AttributeError, TypeError, OverflowError, yaml.YAMLError):
            shown = node.value if len(node.value) <= 40 else node.value[:40] + "…"
            self.add_problem(
                path,
                f"'{shown}' cannot be read as {_SCALAR_KINDS[kind]}; put it in quotes to keep it as text",
                line=node.start_mark.line + 1,
            )
            raise _Skip from None
        if not isinstance(value, str):
            return value
        # A `\ud800` escape (or a variable's undecodable bytes) makes a lone surrogate, which no
        # UTF-8 writer takes: the store, the terminal, an export (`panel_cli.untrusted`).
        if expand and self.expand_env:
            return clean_text(self._expand(value, node.start_mark.line + 1, path))
        return clean_text(value)

    def _refuse_tag(self, node: yaml.Node, path: tuple[Any, ...]) -> None:
        shown = "!!" + node.tag.removeprefix(_STANDARD) if node.tag.startswith(_STANDARD) else node.tag
        self.add_problem(
            path,
            f"the tag '{shown}' is not supported; a panel file holds plain YAML values",
            line=node.start_mark.line + 1,
        )
        raise _Skip

    def _expand(self, text: str, line: int, path: tuple[Any, ...]) -> str:
        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            value = os.environ.get(name)
            if value is None:
                self.add_problem(path, f"environment variable {name} is not set", line=line)
                return match.group(0)
            if value and value not in self.expanded_values:
                self.expanded_values.append(value)
            named = self.variables.setdefault(path, [])
            if name not in named:
                named.append(name)
            return value

        return _VAR.sub(replace, text)


def variables_in(text: str) -> list[str]:
    """The environment variables a value written in a file names (`${VAR}`), each once, in order."""
    return list(dict.fromkeys(_VAR.findall(text)))


def parse_yaml(text: str, file: str, *, expand_env: bool = True) -> YamlTree:
    """Compose with the limits above and walk into plain values. Structural problems (syntax,
    depth, aliases) raise at once; problems with single values are collected in the tree."""
    tree = YamlTree(file, expand_env=expand_env)
    node = _compose(text, file)
    if node is not None:
        try:
            tree.data = tree.walk(node, ())
        except _Skip:
            raise tree.error() from None
    return tree


def clean_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """Drop pydantic's union branch names (`str`, `Member`, `list[...]`) from a location."""
    return tuple(part for part in loc if not _is_branch(part))


def _is_branch(part: Any) -> bool:
    return isinstance(part, str) and re.match(r"^(str|Member|list\[|function-)", part) is not None


def specific_errors(errors: list[Any], start: int = 0) -> list[Any]:
    """For a union (`chairman: str | Member | list`) only the errors of the branch the user
    meant: the one whose errors reach deepest into the file, not the alternatives it failed
    to be. Nested unions (a list of `str | Member`) are narrowed the same way."""
    kept: list[Any] = []
    branches: dict[tuple[Any, ...], dict[str, list[Any]]] = {}
    for error in errors:
        loc = tuple(error["loc"])
        split = next((index for index in range(start, len(loc)) if _is_branch(loc[index])), None)
        if split is None:
            kept.append(error)
        else:
            branches.setdefault(loc[:split], {}).setdefault(loc[split], []).append(error)
    for prefix, options in branches.items():
        best = max(options.values(), key=lambda group: max(len(clean_loc(tuple(error["loc"]))) for error in group))
        kept.extend(specific_errors(best, len(prefix) + 1))
    return kept


def describe_error(error: dict[str, Any]) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown field"
    if error["type"] == "missing":
        return "this field is required"
    message = str(error["msg"])
    message = message.removeprefix("Value error, ")
    return message[0].lower() + message[1:] if message else message


def _unknown_field(name: Any, model: type[BaseModel] | None) -> str:
    close = difflib.get_close_matches(str(name), list(model.model_fields), n=1, cutoff=0.7) if model else []
    return f"unknown field (did you mean '{close[0]}'?)" if close else "unknown field"


def _alternatives(annotation: Any) -> tuple[Any, ...]:
    return get_args(annotation) if get_origin(annotation) in (Union, UnionType) else (annotation,)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    for option in _alternatives(annotation):
        if get_origin(option) is None and isinstance(option, type) and issubclass(option, BaseModel):
            return option
    return None


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model whose fields are expected at `loc` (for `members[0]`, Member)."""
    annotation: Any = model
    for part in loc:
        if isinstance(part, int):
            annotation = next(
                (get_args(option)[0] for option in _alternatives(annotation) if get_origin(option) is list), None
            )
        else:
            found = _model_in(annotation)
            if found is None or part not in found.model_fields:
                return None
            annotation = found.model_fields[part].annotation
    return _model_in(annotation)
