"""Panel files: YAML in, pydantic models out, and every error located by file, line and field.

The YAML is composed into nodes first so each value keeps the line it came from; then
`${VAR}` is expanded, the models validate, and a validation error's location is mapped
back to the line of the offending field.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator

from panel_cli.errors import ConfigError, UserError
from panel_cli.llm.aliases import resolve_model
from panel_cli.llm.demo import PERSONAS

Protocol = Literal["confer", "council", "vote", "decide", "ensemble", "delphi", "supervise", "orchestrate"]
VoteMethod = Literal["majority", "supermajority", "unanimous", "ranked_choice", "weighted"]
EnsembleMode = Literal["fanout", "race", "consensus", "majority", "synthesize"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(value: Any) -> float | None:
    """`90s`, `5m`, `1h`, `250ms`, a bare number of seconds, or `none` for no limit."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError("a duration is written like 90s, 5m or none")
    if isinstance(value, int | float):
        if value <= 0:
            raise ValueError("a duration must be positive")
        return float(value)
    text = str(value).strip().lower()
    if text in {"none", "never", "off"}:
        return None
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"'{value}' is not a duration; write it like 90s, 5m, 1h or none")
    seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if seconds <= 0:
        raise ValueError("a duration must be positive")
    return seconds


Duration = Annotated[float | None, BeforeValidator(parse_duration)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Member(Strict):
    name: str = Field(min_length=1)
    model: str = Field(min_length=1)
    system: str | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, gt=0)
    api_base: str | None = None
    api_key_env: str | None = None
    weight: float = Field(default=1.0, ge=0)
    timeout: Duration = None
    retries: int | None = Field(default=None, ge=0, le=10)

    @field_validator("model")
    @classmethod
    def _known_persona(cls, model: str) -> str:
        if model.startswith("demo/") and model[5:] not in PERSONAS:
            raise ValueError(f"unknown demo persona '{model[5:]}'; choose one of {', '.join(PERSONAS)}")
        return model

    @model_validator(mode="after")
    def _resolve_alias(self) -> Member:
        alias = resolve_model(self.model)
        self.model = alias.model
        if self.api_base is None:
            self.api_base = alias.api_base
        return self

    @property
    def provider(self) -> str:
        return self.model.split("/", 1)[0] if "/" in self.model else "openai"


class Defaults(Strict):
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, gt=0)
    retries: int = Field(default=2, ge=0, le=10)
    timeout: Duration = None
    concurrency: int = Field(default=16, ge=1)
    # A reply longer than this is cut (and marked truncated) before it is stored or shown to
    # other members: one runaway member must not fill the disk or every other prompt.
    max_response_chars: int = Field(default=200_000, ge=1_000)


class Timeouts(Strict):
    """Per-stage limits. A stage left unset takes its protocol's default; `none` means no limit."""

    answer: Duration = None
    review: Duration = None
    synthesis: Duration = None
    vote: Duration = None

    def get(self, stage: str, default: float | None) -> float | None:
        return getattr(self, stage) if stage in self.model_fields_set else default


class Panel(Strict):
    name: str = "panel"
    protocol: Protocol = "confer"
    question: str | None = None
    question_file: str | None = None
    members: list[Member] = Field(min_length=1)
    chairman: str | Member | list[str | Member] | None = None
    anonymize: bool = True
    timeouts: Timeouts = Field(default_factory=Timeouts)
    max_rounds: int = Field(default=3, ge=1, le=50)
    until_convergence: bool = True
    method: VoteMethod = "majority"
    threshold: float = 0.667
    quorum: int = Field(default=1, ge=1)
    options: list[str] = Field(default_factory=list)
    no_match: Literal["abstain", "first"] = "abstain"
    leader: str | None = None
    max_voters: int = Field(default=10, ge=1)
    mode: EnsembleMode = "fanout"
    scorer: str = "length"
    aggregator: str | None = None
    shuffle: bool = False
    self_review: bool = True
    seed: int | None = None
    concurrency: dict[str, int] = Field(default_factory=dict)
    defaults: Defaults = Field(default_factory=Defaults)

    @model_validator(mode="after")
    def _check_names(self) -> Panel:
        seen: set[str] = set()
        for index, member in enumerate(self.members):
            if member.name in seen:
                raise _LocatedError(("members", index, "name"), f"duplicate member name '{member.name}'; names must be unique")
            seen.add(member.name)
        for index, chair in enumerate(self._chair_entries()):
            if isinstance(chair, str) and chair not in seen:
                loc: tuple[Any, ...] = ("chairman",) if not isinstance(self.chairman, list) else ("chairman", index)
                raise _LocatedError(loc, f"'{chair}' is not a member; name a member or give an inline member")
        return self

    def _chair_entries(self) -> list[str | Member]:
        if self.chairman is None:
            return []
        return list(self.chairman) if isinstance(self.chairman, list) else [self.chairman]

    def member(self, name: str, role: str | None = None) -> Member:
        """The member called `name`; `role` (judge, aggregator, …) names it in the error."""
        for member in self.members:
            if member.name == name:
                return member
        who = f"The {role} '{name}'" if role else f"'{name}'"
        raise UserError(f"{who} is not a member of panel '{self.name}' (members: {', '.join(self.member_names)}).")

    @property
    def member_names(self) -> list[str]:
        return [member.name for member in self.members]

    def chairmen(self) -> list[Member]:
        """The chairman and its backups, in order; the first member when none is named."""
        entries = self._chair_entries()
        if not entries:
            return [self.members[0]]
        return [self.member(entry) if isinstance(entry, str) else entry for entry in entries]

    def callable_members(self) -> list[Member]:
        """Everyone a run may call: the members, then any chairman declared inline."""
        return self.members + [chair for chair in self.chairmen() if chair not in self.members]

    def with_members(self, names: list[str]) -> Panel:
        """Only the named members, in the order given (the `--agents` subset)."""
        chosen = [self.member(name) for name in names]
        return self.model_copy(update={"members": chosen})

    def as_demo(self) -> Panel:
        """Every model replaced by a demo persona, for trying a panel with no key."""

        personas = list(PERSONAS)

        def demo(member: Member, index: int) -> Member:
            persona = personas[index % len(personas)]
            return member.model_copy(update={"model": f"demo/{persona}", "api_base": None, "api_key_env": None})

        chairman = self.chairman
        if isinstance(chairman, Member):
            chairman = demo(chairman, len(self.members))
        elif isinstance(chairman, list):
            chairman = [demo(c, len(self.members) + i) if isinstance(c, Member) else c for i, c in enumerate(chairman)]
        members = [demo(m, i) for i, m in enumerate(self.members)]
        return self.model_copy(update={"members": members, "chairman": chairman})


class _LocatedError(ValueError):
    """Raised inside validators that know which field is wrong, so the line can be found."""

    def __init__(self, loc: tuple[Any, ...], message: str) -> None:
        super().__init__(message)
        self.loc, self.message = loc, message


_SCALARS = yaml.SafeLoader("")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _expand(text: str, line: int, file: str, field: str) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise ConfigError(file, line, field, f"environment variable {name} is not set")
        return os.environ[name]

    return _VAR.sub(replace, text)


def _field_name(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _walk(node: yaml.Node, path: tuple[Any, ...], lines: dict[tuple[Any, ...], int], file: str) -> Any:
    """Node -> plain value, recording each path's line, expanding `${VAR}`, refusing duplicate keys."""
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _SCALARS.construct_object(key_node)
            if key in result:
                raise ConfigError(file, key_node.start_mark.line + 1, _field_name(path + (key,)), "this key appears twice")
            result[key] = _walk(value_node, path + (key,), lines, file)
            lines[path + (key,)] = key_node.start_mark.line + 1
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_walk(item, path + (index,), lines, file) for index, item in enumerate(node.value)]
    value = _SCALARS.construct_object(node)
    if isinstance(value, str):
        return _expand(value, node.start_mark.line + 1, file, _field_name(path))
    return value


def _line_for(loc: tuple[Any, ...], lines: dict[tuple[Any, ...], int]) -> int | None:
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None


def _clean_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """Drop pydantic's union branch names (`str`, `Member`, `list[...]`) from a location."""
    return tuple(part for part in loc if isinstance(part, int) or not re.match(r"^(str|Member|list\[|function-)", str(part)))


def _most_specific(errors: list[Any]) -> Any:
    """The error deepest in the file: for a union (`chairman: str | Member | list`) that is
    the branch the user meant, not the alternatives it failed to be."""
    return max(errors, key=lambda error: len(_clean_loc(tuple(error["loc"]))))


def _problem(error: dict[str, Any]) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown field"
    if error["type"] == "missing":
        return "this field is required"
    message = str(error["msg"])
    message = message.removeprefix("Value error, ")
    return message[0].lower() + message[1:] if message else message


def load_panel(path: str | Path) -> Panel:
    """Read and validate a panel file; every problem becomes a ConfigError naming file, line and field."""
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{file}: no such file.") from None
    except OSError as exc:
        raise UserError(f"{file}: cannot be read ({exc.strerror}).") from None
    return parse_panel(text, file, default_name=Path(path).stem)


def parse_panel(text: str, file: str = "<panel>", default_name: str = "panel") -> Panel:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise ConfigError(file, line, None, f"not valid YAML ({exc.problem or exc.context})") from None
    if node is None:
        raise ConfigError(file, None, None, "the file is empty; a panel needs at least 'members'")
    lines: dict[tuple[Any, ...], int] = {}
    data = _walk(node, (), lines, file)
    if not isinstance(data, dict):
        raise ConfigError(file, 1, None, "a panel file is a mapping of fields such as 'members' and 'question'")
    data.setdefault("name", default_name)
    try:
        return Panel.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        first = _most_specific(errors)
        context = first.get("ctx", {}).get("error")
        if isinstance(context, _LocatedError):
            raise ConfigError(file, _line_for(context.loc, lines), _field_name(context.loc), context.message) from None
        loc = _clean_loc(tuple(first["loc"]))
        others = {_clean_loc(tuple(error["loc"])) for error in errors} - {loc}
        more = len({other for other in others if loc[: len(other)] != other})
        problem = _problem(first) + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else "")
        raise ConfigError(file, _line_for(loc, lines), _field_name(loc) or None, problem) from None


def resolve_question(panel: Panel, base_dir: Path | None, given: str | None, stdin_text: str | None) -> str:
    """The question from the command line, stdin, `question` or `question_file`, in that order."""
    for candidate in (given, stdin_text, panel.question):
        if candidate and candidate.strip():
            return candidate.strip()
    if panel.question_file:
        path = Path(panel.question_file)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        try:
            return path.read_text(encoding="utf-8").strip()
        except OSError:
            raise UserError(f"question_file {path} cannot be read.") from None
    raise UserError("No question: give one with -q/--question, on stdin, or as 'question' in the panel file.")


def panel_from_members(
    names: list[str], chairman: list[str] | None = None, protocol: Protocol = "council", **fields: Any
) -> Panel:
    """A panel for a run without a file: `--members gpt-4o,claude` (aliases or model ids).

    Each member is named as typed, so `--chairman gpt-4o` or `--aggregator gpt-4o` finds it.
    The same model twice gives two members, `gpt-4o` and `gpt-4o-2`: members are told apart
    by name, never by model. A chairman that is not among the members joins as an inline
    member on that model (with a unique name too), so any model can chair."""
    taken: set[str] = set()

    def unique(base: str) -> str:
        name, count = base, 1
        while name in taken:
            count += 1
            name = f"{base}-{count}"
        taken.add(name)
        return name

    members = [{"name": unique(typed), "model": typed} for typed in names]
    member_names = [member["name"] for member in members]
    chairs: list[str | dict[str, str]] = [
        typed if typed in member_names else {"name": unique(typed), "model": typed} for typed in chairman or []
    ]
    data: dict[str, Any] = {"name": protocol, "protocol": protocol, "members": members, **fields}
    if chairs:
        data["chairman"] = chairs[0] if len(chairs) == 1 else chairs
    try:
        return Panel.model_validate(data)
    except ValidationError as exc:
        error = _most_specific(exc.errors())
        loc = _clean_loc(tuple(error["loc"]))
        where = _field_name(loc)
        if loc[:1] == ("members",) and len(loc) > 1:
            where = f"member '{names[loc[1]]}'"
        elif loc[:1] == ("chairman",) and chairman:
            where = f"chairman '{chairman[loc[1] if len(loc) > 1 and isinstance(loc[1], int) else 0]}'"
        raise UserError(f"{where}: {_problem(dict(error))}.") from None
