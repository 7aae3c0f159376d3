"""Panel files: YAML in, pydantic models out, and every error located by file, line and field.

`located_yaml` reads the file defensively into plain values with the line of each field;
the models here validate them, and each validation error is mapped back to its line.

A panel file is flat: the fields every protocol shares (`Panel`'s own: members, the roles a run
may call, limits, defaults, tools, attachments, weights) sit beside each protocol's own settings
(`method: majority`, `max_rounds: 3`). A protocol's settings are its spec's model
(`ProtocolSettings`, in its package's `settings.py`); the panel validates each one the file
gives by the model of the protocol the file names, else by the first protocol's that reads it,
and keeps it as given. An engine reads its own, typed and with its own defaults
(`VoteSettings.of(panel)`), so a protocol registered from Python adds settings a file may then
give, and one of another protocol's fields is a warning ("not used by …"), never an error.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Self, TypeVar, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails

from panel_cli.errors import ConfigError, ConfigProblem, UserError
from panel_cli.local_files import FileRefused, TextFileRules, read_text_file
from panel_cli.located_yaml import (
    MAX_FILE_BYTES,
    LocatedError,
    clean_loc,
    describe_error,
    field_name,
    line_for,
    parse_yaml,
    read_config_text,
    specific_errors,
)
from panel_cli.models.aliases import CREDENTIALS_IN_URL, check_api_base, resolve_model
from panel_cli.models.catalog import UnknownModel, qualify_model
from panel_cli.models.personas import PERSONAS, is_persona, oracle_problem
from panel_cli.untrusted import clean_text
from panel_cli.weights_file import MAX_WEIGHT, read_weights

# A protocol's name: any protocol the registry knows (`panel_cli.protocols.registry`).
ProtocolName = str
# When a protocol stops asking its members (docs/protocols.md#stopping-early): once the rest cannot
# change the outcome, or once the leading answer is right with at least a given probability.
StopKind = Literal["decided", "confident"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def _named_choice(value: Any) -> Any:
    """A rule's name as written in any case, with spaces or hyphens for underscores
    (`Weighted-Plurality` is `weighted_plurality`); the Literal then checks it and lists the
    valid names when it is none of them."""
    if isinstance(value, str):
        return "_".join(value.strip().casefold().replace("-", " ").split())
    return value


RuleName = BeforeValidator(_named_choice)


# Numbers a panel file may give, each bounded so that no value reaches arithmetic, the store
# or asyncio where it overflows (1e308 weights, 1e30 timeouts) or compares as nothing does (NaN).
MAX_DURATION = 86_400.0  # a day: `none` is the way to lift a limit
# MAX_WEIGHT, a member's weight: `panel_cli.weights_file`'s, where a weights file is read.
MAX_TOKENS = 10_000_000
MAX_CONCURRENCY = 1_024
MAX_RESPONSE_CHARS = 100_000_000
MAX_COST = 1e6  # US dollars
MAX_SEED = 2**63 - 1  # SQLite's INTEGER


def parse_duration(value: Any) -> float | None:
    """`90s`, `5m`, `1h`, `250ms`, a bare number of seconds, or `none` for no limit; at most a day."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError("a duration is written like 90s, 5m or none")
    if isinstance(value, int | float):
        return _bounded_seconds(value)
    text = str(value).strip().lower()
    if text in {"none", "never", "off"}:
        return None
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"'{value}' is not a duration; write it like 90s, 5m, 1h or none")
    return _bounded_seconds(float(match.group(1)) * _UNITS[match.group(2)])


def _bounded_seconds(value: float) -> float:
    if not 0 < value <= MAX_DURATION:  # NaN fails this too
        if value > MAX_DURATION:
            raise ValueError("a duration is at most a day (24h); write none for no limit")
        raise ValueError("a duration must be a positive number of seconds")
    return float(value)


Duration = Annotated[float | None, BeforeValidator(parse_duration)]
# Rounds of a protocol that goes round after round (confer, delphi, supervise's corrections).
Rounds = Annotated[int, Field(ge=1, le=50)]


@dataclass(frozen=True)
class StopRule:
    """`stop: decided`, or `stop: confident(x)` with its target x: what `Panel.stop` says."""

    kind: StopKind
    at_least: float | None = None

    def __str__(self) -> str:
        return f"confident({self.at_least:g})" if self.kind == "confident" else "decided"


_CONFIDENT = re.compile(r"^confident\s*\(\s*([^()]*?)\s*\)$")
STOP_CHOICES = "decided, confident(0.95) (any probability between 0 and 1), or all"


def read_stop(value: Any) -> StopRule | None:
    """`decided`, `confident(0.95)` (`confident(95%)` too), or `all` (ask everyone: no rule),
    in any case; anything else is a ValueError that lists what is accepted."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"write stop as {STOP_CHOICES}")
    text = value.strip().casefold()
    if text in {"all", "everyone", "none"}:
        return None
    if text == "decided":
        return StopRule("decided")
    found = _CONFIDENT.match(text)
    if found is None:
        raise ValueError(f"'{value}' is not a stopping rule; write {STOP_CHOICES}")
    figure = found.group(1)
    try:
        at_least = float(figure[:-1]) / 100 if figure.endswith("%") else float(figure)
    except ValueError:
        at_least = math.nan
    if not 0.0 < at_least < 1.0:  # NaN fails this too
        raise ValueError(f"confident takes a probability between 0 and 1, like confident(0.95), not '{figure}'")
    return StopRule("confident", at_least)


def _stop_text(value: Any) -> str | None:
    """A stopping rule as the panel keeps it: `decided`, `confident(0.95)`, or None for everyone."""
    rule = read_stop(value)
    return None if rule is None else str(rule)


StopText = Annotated[str | None, BeforeValidator(_stop_text)]


TRUTH_IS_NO_NUMBER = "write a number, not true or false"


def _no_truth(value: Any) -> Any:
    """YAML reads `true`, `yes` and `on` as booleans, and pydantic takes a boolean for 1 or 0:
    `max_rounds: yes` would be one round. A field that wants a number refuses one, as a
    duration does."""
    if isinstance(value, bool):
        raise ValueError(TRUTH_IS_NO_NUMBER)
    return value


def _wants_a_number(kind: Any) -> bool:
    """Whether a field of type `kind` takes a number and no truth value: `int`, `float | None`,
    an `Annotated` of one; not `bool | int`, nor a list or a mapping of numbers."""
    leaves: set[Any] = set()
    pending = [kind]
    while pending:
        each = pending.pop()
        if get_origin(each) in (Annotated, Union, UnionType):
            pending += list(get_args(each))
        else:
            leaves.add(each)
    return bool(leaves & {int, float}) and bool not in leaves


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _a_number_is_no_truth(cls, value: Any, info: ValidationInfo) -> Any:
        field = info.field_name
        if field is not None and _wants_a_number(cls.model_fields[field].annotation):
            return _no_truth(value)
        return value


class ProtocolSettings(Strict):
    """What one protocol reads from a panel file beyond the fields every protocol shares: its
    spec's `settings`. A file gives them flat, beside `members`; `of` reads them back typed,
    with this protocol's own defaults for what the file leaves out."""

    @classmethod
    def of(cls, panel: Panel) -> Self:
        """This protocol's settings of `panel`; ConfigError (located) for a value it refuses."""
        return panel.settings_as(cls)


SettingsModel = TypeVar("SettingsModel", bound=BaseModel)


def _command_words(value: Any) -> Any:
    """`command: python server.py` is read as the shell would split it; a list is taken as written."""
    return shlex.split(value) if isinstance(value, str) else value


# A tool server's name becomes part of the names its tools are offered under.
_SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
DEFAULT_TOOL_TIMEOUT = 30.0


class ToolServer(Strict):
    """An MCP server members may use: a `command` panel starts (stdio), or a `url` it reaches
    (streamable HTTP). Started once per run, shared by the members that name it. A stdio
    server gets only the `env` given here (plus the SDK's PATH, HOME, USER, LOGNAME, SHELL and
    TERM): no key reaches it unless named. `timeout` bounds each tool call; `cwd` defaults to
    the panel file's folder."""

    command: Annotated[list[str] | None, BeforeValidator(_command_words)] = Field(default=None, min_length=1)
    url: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    headers: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    timeout: Duration = DEFAULT_TOOL_TIMEOUT

    @field_validator("url")
    @classmethod
    def _no_credentials(cls, url: str | None) -> str | None:
        """A password in the URL would be shown and stored; a token goes in a header instead."""
        try:
            return check_api_base(url)
        except ValueError as exc:
            if str(exc) != CREDENTIALS_IN_URL:
                raise
            raise ValueError(
                "a user or password in the URL is not supported; send a token in 'headers' (Authorization: Bearer ${TOKEN})"
            ) from None

    @field_validator("command")
    @classmethod
    def _no_empty_words(cls, command: list[str] | None) -> list[str] | None:
        if command is not None and not all(word.strip() for word in command):
            raise ValueError("every word of the command must be non-empty")
        return command

    @model_validator(mode="after")
    def _one_transport(self) -> ToolServer:
        problems: list[tuple[tuple[Any, ...], str]] = []
        if (self.command is None) == (self.url is None):
            problems.append(((), "give 'command' (a server panel starts) or 'url' (a server it reaches), not both"))
        if self.url is not None and not re.match(r"^https?://", self.url):
            problems.append((("url",), "a tool server's url starts with http:// or https://"))
        if self.url is not None and self.env:
            problems.append((("env",), "only a server panel starts ('command') gets an environment"))
        if self.command is not None and self.headers:
            problems.append((("headers",), "only a server reached by 'url' takes headers"))
        if problems:
            raise LocatedError(problems)
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    @property
    def target(self) -> str:
        """What a person reads of the server: its command line, or its URL."""
        return shlex.join(self.command) if self.command is not None else str(self.url)


class Member(Strict):
    name: str = Field(min_length=1)
    model: str = Field(min_length=1)
    system: str | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, gt=0, le=MAX_TOKENS)
    api_base: str | None = None
    api_key_env: str | None = None
    # A weight below 0 is a member below chance, its weight a log-odds: only weighted_plurality counts it.
    weight: float = Field(default=1.0, ge=-MAX_WEIGHT, le=MAX_WEIGHT, allow_inf_nan=False)
    timeout: Duration = None
    retries: int | None = Field(default=None, ge=0, le=10)
    # supervise: this worker's own part of the goal.
    task: str | None = None
    # The panel's tool servers (`tools:`) this member may use; none by default.
    tools: list[str] = Field(default_factory=list)
    # Whether this member's replies stream into the live view; false for an endpoint that
    # cannot stream (one that answers a streamed request with one whole reply).
    stream: bool = True

    _check_api_base = field_validator("api_base")(check_api_base)

    @field_validator("model")
    @classmethod
    def _known_persona(cls, model: str) -> str:
        if model.startswith("demo/") and not is_persona(model[5:]):
            problem = oracle_problem(model[5:])
            if problem is not None:
                raise ValueError(problem)
            raise ValueError(f"unknown demo persona '{model[5:]}'; choose one of {', '.join(PERSONAS)}")
        return model

    @model_validator(mode="after")
    def _resolve_model(self) -> Member:
        """An alias becomes its model (and endpoint); then the id is the one litellm routes: a
        bare name litellm knows gets its provider (`gpt-4o-mini` -> `openai/gpt-4o-mini`), one
        it does not is refused here, before any call, rather than failing every round."""
        alias = resolve_model(self.model)
        if self.api_base is None:
            self.api_base = alias.api_base
        try:
            self.model = qualify_model(alias.model, self.api_base)
        except UnknownModel as exc:
            raise LocatedError([(("model",), str(exc).rstrip("."))]) from None
        return self

    @property
    def provider(self) -> str:
        return self.model.split("/", 1)[0] if "/" in self.model else "openai"


class Defaults(Strict):
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, gt=0, le=MAX_TOKENS)
    retries: int = Field(default=2, ge=0, le=10)
    timeout: Duration = None
    concurrency: int = Field(default=16, ge=1, le=MAX_CONCURRENCY)
    # A reply longer than this is cut (and marked truncated) before it is stored or shown to
    # other members: one runaway member must not fill the disk or every other prompt.
    max_response_chars: int = Field(default=200_000, ge=1_000, le=MAX_RESPONSE_CHARS)
    # Tool calls a member may make in one stage (seed 004: three per round, so a loop cannot
    # run up the bill); then it is asked once more, without tools, for its answer.
    tool_budget: int = Field(default=3, ge=0, le=50)
    # US dollars a run may spend at most (`--max-cost` overrides it); see panel_cli.llm.budget.
    max_cost: float | None = Field(default=None, ge=0, le=MAX_COST, allow_inf_nan=False)


# A streamed reply with nothing new for this long has stalled: its call ends as a timeout.
DEFAULT_IDLE_TIMEOUT = 60.0


class Timeouts(Strict):
    """Per-stage limits. A stage left unset takes its protocol's default; `none` means no limit.
    `idle` is not a stage: it bounds the wait for a streamed reply's next piece, in every stage."""

    answer: Duration = None
    review: Duration = None
    synthesis: Duration = None
    vote: Duration = None
    plan: Duration = None
    task: Duration = None
    idle: Duration = DEFAULT_IDLE_TIMEOUT

    def get(self, stage: str, default: float | None) -> float | None:
        return getattr(self, stage) if stage in self.model_fields_set else default


class Panel(BaseModel):
    """A panel: the fields every protocol shares, declared here, and each protocol's own
    settings, which the file gives beside them and the panel keeps as given (`settings_as`).
    The roles a run may call (`chairman`, `critic`, `planner`) are members, checked against
    the members here, so every part of a run (keys, budget, the demo) sees who may be called."""

    model_config = ConfigDict(extra="allow")

    name: str = "panel"
    protocol: ProtocolName = "confer"
    question: str | None = None
    question_file: str | None = None
    members: list[Member] = Field(min_length=1)
    chairman: str | Member | list[str | Member] | None = None
    critic: str | Member | None = None
    planner: str | Member | None = None
    timeouts: Timeouts = Field(default_factory=Timeouts)
    # vote, decide, ensemble's majority and confer: ask members a few at a time and stop early
    # (`StopRule`); None asks everyone. A field beside the shared ones, as `weights` is: four
    # protocols read it, each as its rules say (`ProtocolRules.fields`).
    stop: StopText = None
    concurrency: dict[str, Annotated[int, BeforeValidator(_no_truth), Field(ge=1, le=MAX_CONCURRENCY)]] = Field(
        default_factory=dict
    )
    defaults: Defaults = Field(default_factory=Defaults)
    # MCP servers by name, and files whose text every member gets with the question.
    tools: dict[str, ToolServer] = Field(default_factory=dict)
    attach: list[str] = Field(default_factory=list)
    # `from FILE`: every member's weight from a weights file (`panel eval --calibrate` writes
    # one), read when the panel file is loaded (`load_panel`), relative to its folder.
    weights: str | None = None

    # Filled by parse_panel; kept by model_copy. A panel built from --members has none.
    _source_file: str | None = PrivateAttr(default=None)
    _lines: dict[tuple[Any, ...], int] = PrivateAttr(default_factory=dict)
    _expanded_values: list[str] = PrivateAttr(default_factory=list)
    _variables: dict[tuple[Any, ...], list[str]] = PrivateAttr(default_factory=dict)
    # The fields a command-line option (or its keyword in Python) set: the option's flag, and
    # whether it set what is inside the field too (False: it chose among the file's entries).
    _options: dict[str, tuple[str, bool]] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _with_settings(cls, data: Any, handler: ModelWrapValidatorHandler[Panel]) -> Panel:
        """The fields every protocol shares, validated here; each protocol's own, by its
        settings (`checked_settings`); every problem of both reported at once."""
        if not isinstance(data, dict):
            return handler(data)
        shared = {key: value for key, value in data.items() if key in cls.model_fields}
        settings, problems = checked_settings(
            {key: value for key, value in data.items() if key not in cls.model_fields}, data.get("protocol")
        )
        try:
            panel = handler(shared)
        except ValidationError as exc:
            raise _joined(exc.title, [*exc.errors(), *problems]) from None
        if problems:
            raise _joined(cls.__name__, problems)
        panel.__pydantic_extra__ = settings
        panel.__pydantic_fields_set__.update(settings)
        return panel

    @field_validator("protocol")
    @classmethod
    def _known_protocol(cls, name: str) -> str:
        from panel_cli.protocols.registry import is_protocol, unknown_protocol

        if not is_protocol(name):
            raise ValueError(unknown_protocol(name))
        return name

    @field_validator("weights")
    @classmethod
    def _weights_from_a_file(cls, value: str | None) -> str | None:
        if value is not None and not weights_file(value):
            raise ValueError("write 'weights: from FILE', naming a weights file (panel eval --calibrate writes one)")
        return value

    @model_validator(mode="after")
    def _check_names(self) -> Panel:
        problems: list[tuple[tuple[Any, ...], str]] = []
        seen: set[str] = set()
        for index, member in enumerate(self.members):
            if member.name in seen:
                problems.append(
                    (("members", index, "name"), f"duplicate member name '{member.name}'; names must be unique")
                )
            seen.add(member.name)
        for index, chair in enumerate(self._chair_entries()):
            if isinstance(chair, str) and chair not in seen:
                loc: tuple[Any, ...] = ("chairman",) if not isinstance(self.chairman, list) else ("chairman", index)
                problems.append((loc, f"'{chair}' is not a member; name a member or give an inline member"))
        for role in ("critic", "planner"):
            entry = getattr(self, role)
            if isinstance(entry, str) and entry not in seen:
                problems.append(((role,), f"'{entry}' is not a member; name a member or give an inline member"))
        # Calls, failures and the views tell members apart by name alone.
        for loc, entry in self._inline_roles():
            if entry.name in seen:
                problems.append(
                    ((*loc, "name"), f"'{entry.name}' is a member's name; an inline member needs a name of its own")
                )
        problems += self._tool_problems()
        if problems:
            raise LocatedError(problems)
        return self

    def _tool_problems(self) -> list[tuple[tuple[Any, ...], str]]:
        """Server names usable in tool names, and every member's `tools` naming a server."""
        problems: list[tuple[tuple[Any, ...], str]] = [
            (("tools", name), "a tool server's name is letters, digits, '_' or '-' (at most 40)")
            for name in self.tools
            if not _SERVER_NAME.match(name)
        ]
        servers = ", ".join(self.tools) or "none are declared under 'tools:'"
        holders: list[tuple[tuple[Any, ...], Member]] = [
            (("members", index), member) for index, member in enumerate(self.members)
        ]
        for loc, entry in [*holders, *self._inline_roles()]:
            for index, name in enumerate(entry.tools):
                if name not in self.tools:
                    problems.append(
                        ((*loc, "tools", index), f"'{name}' is not a tool server of this panel ({servers})")
                    )
        return problems

    def with_value(self, field: str, value: Any) -> Panel:
        """The panel with one field set as a panel file would set it: validated by this model,
        or a protocol's setting by its protocol's settings, so the command line refuses what
        the file would (pydantic's ValidationError)."""
        if field in type(self).model_fields:
            changed = self.model_copy()
            type(self).__pydantic_validator__.validate_assignment(changed, field, value)
            return changed
        model = reader_of(field, self.protocol)
        if model is None:
            raise ValueError(f"'{field}' is not a field of a panel")
        kept = {name: held for name, held in self.settings_given.items() if name in model.model_fields}
        validated = model.model_validate({**kept, field: value})
        return self.model_copy(update={field: getattr(validated, field)})

    @property
    def settings_given(self) -> dict[str, Any]:
        """The protocols' settings the file (or an option) gives, by field, as validated."""
        return dict(self.__pydantic_extra__ or {})

    def settings_as(self, model: type[SettingsModel]) -> SettingsModel:
        """The settings `model` reads (a protocol's `ProtocolSettings`): what the panel gives of
        its fields, its own defaults for the rest. A value it refuses is a ConfigError located
        at the field, as the file's own errors are (UserError for a panel without a file)."""
        given = {name: value for name, value in self.settings_given.items() if name in model.model_fields}
        try:
            return model.model_validate(given)
        except ValidationError as exc:
            problems = [
                (clean_loc(tuple(error["loc"])), describe_error(dict(error))) for error in specific_errors(exc.errors())
            ]
            raise self.located(problems) from None

    def setting(self, field: str) -> Any:
        """A field's value as this panel's protocol reads it: a setting with its default, or a
        field every protocol shares."""
        model = settings_model(self.protocol)
        if model is not None and field in model.model_fields:
            return getattr(self.settings_as(model), field)
        return getattr(self, field)

    def located(self, problems: Sequence[tuple[tuple[Any, ...], str]]) -> UserError:
        """Problems at fields of this panel as one error: located in its file (ConfigError), or
        `field: problem.` for a panel without one."""
        if self._source_file is None:
            return UserError("\n".join(f"{field_name(loc) or 'panel'}: {problem}." for loc, problem in problems))
        return ConfigError.listing(
            [
                ConfigProblem(self._source_file, self.line_of(loc), field_name(loc) or None, problem)
                for loc, problem in problems
            ]
        )

    def with_stage_limits(self, stages: Sequence[str], seconds: float | None) -> Panel:
        """The same time limit (None: none) for each of `stages`, the file's other stage limits kept."""
        limits = Timeouts.model_validate(
            {**self.timeouts.model_dump(exclude_unset=True), **dict.fromkeys(stages, seconds)}
        )
        return self.model_copy(update={"timeouts": limits})

    def with_attachments(self, paths: list[Path] | None) -> Panel:
        """The panel with more files attached (`--attach`), each as an absolute path, so a
        resumed run finds them wherever it is started."""
        if not paths:
            return self
        added = [os.path.abspath(path) for path in paths]
        return self.model_copy(update={"attach": [*self.attach, *added]})

    @property
    def stop_rule(self) -> StopRule | None:
        """The stopping rule `stop` names; None asks every member."""
        return read_stop(self.stop)

    @property
    def source_file(self) -> str | None:
        """The panel file this came from, as its errors name it."""
        return self._source_file

    @property
    def expanded_values(self) -> list[str]:
        """The values the file's `${VAR}`s expanded to: they may be secrets, so output hides them."""
        return list(self._expanded_values)

    def variables_of(self, loc: tuple[Any, ...]) -> list[str]:
        """The environment variables the file's value at `loc` names (`${TOKEN}`), in order:
        where a value panel hides came from, which a person may be told."""
        return list(self._variables.get(loc, []))

    def line_of(self, loc: tuple[Any, ...]) -> int | None:
        """The line of a field in the panel file (`("members", 2, "model")`), or of the nearest
        field around it that the file gives; None for a panel that has no file."""
        return line_for(loc, self._lines) if self._lines else None

    def set_by_option(self, fields: Sequence[str], flag: str, *, whole: bool = True) -> Panel:
        """The panel noting that the option `flag` set these fields: a problem with one is
        then the option's (`option_for`), not a line of the file that the option overrode.
        `whole=False`: the option only chose among the file's entries (`--members` of a file),
        which keep their lines."""
        noted = self.model_copy()
        noted._options = {**self._options, **dict.fromkeys(fields, (flag, whole))}
        return noted

    def option_for(self, loc: tuple[Any, ...]) -> str | None:
        """The flag of the option that gave the field at `loc`, or None."""
        flag, whole = self._options.get(loc[0], (None, False)) if loc else (None, False)
        return flag if whole or len(loc) == 1 else None

    def in_file(self, loc: tuple[Any, ...]) -> bool:
        """Whether the panel file itself gives this field (an `attach:` entry, not an `--attach`)."""
        return loc in self._lines

    def _inline_roles(self) -> list[tuple[tuple[Any, ...], Member]]:
        """Each role given as an inline member, with its location in the file."""
        entries: list[tuple[tuple[Any, ...], str | Member | None]] = [
            (("critic",), self.critic),
            (("planner",), self.planner),
        ]
        if isinstance(self.chairman, list):
            entries += [(("chairman", index), chair) for index, chair in enumerate(self.chairman)]
        else:
            entries.append((("chairman",), self.chairman))
        return [(loc, entry) for loc, entry in entries if isinstance(entry, Member)]

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

    def role(self, name: Literal["critic", "planner"]) -> Member | None:
        """The member a role names (`critic: gpt`), or the inline member it declares."""
        entry = getattr(self, name)
        return self.member(entry, role=name) if isinstance(entry, str) else entry

    def callable_members(self) -> list[Member]:
        """Everyone a run may call: the members, then any chairman, critic or planner declared inline."""
        inline = [*self.chairmen(), self.role("critic"), self.role("planner")]
        extra: list[Member] = []
        for member in inline:
            if member is not None and member not in self.members and member not in extra:
                extra.append(member)
        return self.members + extra

    def with_members(self, names: list[str], option: str = "--agents") -> Panel:
        """Only the named members, in the order given (the `--agents` subset). A name given
        twice is refused: two copies of one member would share its name in every vote."""
        seen: set[str] = set()
        for name in names:
            if name in seen:
                raise UserError(f"{option}: '{name}' is given twice.")
            seen.add(name)
        chosen = [self.member(name) for name in names]
        subset = self.model_copy(update={"members": chosen})
        # Member lines follow the members to their new places, so warnings still point at them.
        new_index = {self.member_names.index(name): index for index, name in enumerate(names)}
        lines: dict[tuple[Any, ...], int] = {}
        for loc, line in self._lines.items():
            if loc[:1] != ("members",) or len(loc) == 1:
                lines[loc] = line
            elif loc[1] in new_index:
                lines[("members", new_index[loc[1]], *loc[2:])] = line
        subset._lines = lines
        return subset

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
        # Only what was set is updated, so a check still sees which fields the file set.
        update: dict[str, Any] = {"members": members}
        if chairman is not None:
            update["chairman"] = chairman
        for offset, role in enumerate(("critic", "planner"), start=len(self.members) + len(self._chair_entries())):
            entry = getattr(self, role)
            if isinstance(entry, Member):
                update[role] = demo(entry, offset)
        return self.model_copy(update=update)


# Each protocol's settings ------------------------------------------------------------------------


def settings_models() -> dict[str, type[BaseModel]]:
    """Each protocol's settings model (its spec's `settings`), by protocol, in the registry's
    order: the built-in protocols, then those registered from Python."""
    from panel_cli.protocols.registry import names

    found = {name: settings_model(name) for name in names()}
    return {name: model for name, model in found.items() if model is not None}


def settings_model(protocol: str) -> type[BaseModel] | None:
    """The settings model of the protocol called `protocol`; None for one with none (or no such protocol)."""
    from panel_cli.protocols.registry import is_protocol, resolve, spec

    if not is_protocol(protocol):
        return None
    ref = spec(protocol).settings
    model: type[BaseModel] | None = None if ref is None else resolve(ref)
    return model


def reader_of(field: Any, protocol: Any, models: dict[str, type[BaseModel]] | None = None) -> type[BaseModel] | None:
    """The settings model that validates `field` of a panel for `protocol`: that protocol's own
    when it reads the field, else the first protocol's that does (of `models`, every
    protocol's by default); None when none does."""
    models = settings_models() if models is None else models
    own = models.get(protocol) if isinstance(protocol, str) else None
    if own is not None and field in own.model_fields:
        return own
    return next((model for model in models.values() if field in model.model_fields), None)


def field_choices(field: str, protocol: str | None = None) -> list[str]:
    """The values a panel's `field` may take when it is a choice (`method`: majority,
    supermajority, …), read from its `Literal` type in the model that reads it (`reader_of`, else
    the fields every protocol shares); [] for a field that is no choice. The command line's
    completion and the MCP tools' schemas offer exactly what a panel file may say."""
    model = reader_of(field, protocol) or (Panel if field in Panel.model_fields else None)
    if model is None:
        return []
    choices: list[str] = []
    pending = [model.model_fields[field].annotation]
    while pending:  # through `X | None`, `Annotated` and aliases of Literals
        kind = pending.pop()
        if get_origin(kind) is Literal:
            choices += [value for value in get_args(kind) if isinstance(value, str)]
        else:
            pending += list(get_args(kind))
    return choices


def checked_settings(given: dict[str, Any], protocol: Any) -> tuple[dict[str, Any], list[Any]]:
    """The protocols' settings a panel gives, each validated by its reader (`reader_of`), as
    validated; and pydantic's errors for those refused, and for a field no protocol reads
    (with the closest field of any, when it looks like a slip)."""
    models = settings_models() if given else {}
    groups: dict[type[BaseModel], dict[str, Any]] = {}
    problems: list[Any] = []
    for field, value in given.items():
        model = reader_of(field, protocol, models)
        if model is None:
            problems.append(_unknown(field, value, models))
        else:
            groups.setdefault(model, {})[field] = value
    settings: dict[str, Any] = {}
    for model, fields in groups.items():
        try:
            validated = model.model_validate(fields)
        except ValidationError as exc:
            problems += exc.errors()
            continue
        settings.update((field, getattr(validated, field)) for field in fields)
    return settings, problems


def _unknown(field: Any, value: Any, models: dict[str, type[BaseModel]]) -> dict[str, Any]:
    known = [*Panel.model_fields, *(name for model in models.values() for name in model.model_fields)]
    close = difflib.get_close_matches(str(field), known, n=1, cutoff=0.7)
    problem = f"unknown field (did you mean '{close[0]}'?)" if close else "unknown field"
    loc = field if isinstance(field, str | int) else str(field)
    return {"type": "value_error", "loc": (loc,), "input": value, "ctx": {"error": ValueError(problem)}}


def _joined(title: str, errors: Sequence[Any]) -> ValidationError:
    """One ValidationError of pydantic's errors from several validations, as if from one."""
    return ValidationError.from_exception_data(
        title,
        [_detail(error) for error in errors],
    )


def _detail(error: Any) -> InitErrorDetails:
    """One of pydantic's errors as it is handed back, with its context when it has one."""
    detail: InitErrorDetails = {"type": error["type"], "loc": tuple(error["loc"]), "input": error["input"]}
    if "ctx" in error:
        detail["ctx"] = error["ctx"]
    return detail


# Panel files -----------------------------------------------------------------------------------


def load_panel(path: str | Path) -> Panel:
    """Read and validate a panel file; every problem becomes a ConfigError naming file, line and field."""
    file = str(path)
    panel = parse_panel(read_config_text(Path(path), file), file, default_name=Path(path).stem)
    return _anchored(panel, Path(os.path.abspath(path)).parent)


def _anchored(panel: Panel, folder: Path) -> Panel:
    """Paths in a panel file are relative to the file's folder: attachments and a started
    server's working folder become absolute (a started server runs in that folder unless it
    names another), so the run's config, and a run resumed from it, find them from anywhere.
    A weights file is read from there too, its weights given to the members."""
    for server in panel.tools.values():
        if server.command is not None:
            server.cwd = str(folder / server.cwd) if server.cwd else str(folder)
    if panel.attach:
        panel.attach = [str(folder / entry) for entry in panel.attach]
    if panel.weights is not None:
        panel = with_weights_file(panel, folder)
    return panel


def weights_file(value: str) -> str | None:
    """The file `weights: from FILE` names; None when the value is not written that way."""
    head, _, rest = value.strip().partition(" ")
    return rest.strip() or None if head == "from" else None


def with_weights_file(panel: Panel, folder: Path) -> Panel:
    """The panel with each member's weight from its weights file. Every member needs one and
    every name in the file must be a member; a member that sets its own `weight` is refused,
    since two sources for one weight would leave the reader to guess which counts. Every
    problem, in the weights file and in the panel, is reported at once."""
    assert panel.weights is not None
    named = weights_file(panel.weights) or ""
    file = panel.source_file or panel.name
    line = panel.line_of(("weights",))
    path = Path(named) if Path(named).is_absolute() else folder / named
    try:
        found = read_weights(path, named)
    except FileRefused as refused:
        raise ConfigError(file, line, "weights", f"{named}: {refused}") from None
    problems = [*found.problems]
    problems += [
        ConfigProblem(file, panel.line_of(("members", index, "weight")), f"members[{index}].weight", problem)
        for index, member in enumerate(panel.members)
        if "weight" in member.model_fields_set
        for problem in [f"the weights come from {named} (weights:); leave this one out"]
    ]
    missing = [name for name in panel.member_names if name not in found.named]
    strangers = [name for name in found.named if name not in panel.member_names]
    if missing:
        listed = ", ".join(f"'{name}'" for name in missing)
        problems.append(ConfigProblem(file, line, "weights", f"{named} gives no weight to {listed}"))
    if strangers:
        listed = ", ".join(f"'{name}'" for name in strangers)
        problems.append(ConfigProblem(file, line, "weights", f"{named} gives a weight to {listed}, not of this panel"))
    if problems:
        raise ConfigError.listing(problems)
    members = []
    for member in panel.members:
        weighted = member.model_copy(update={"weight": found.weights[member.name]})
        # The panel's `weights` field is what the file set: a protocol that counts no weight
        # warns about it once, not once per member.
        weighted.__pydantic_fields_set__.discard("weight")
        members.append(weighted)
    return panel.model_copy(update={"members": members})


def parse_panel(text: str, file: str = "<panel>", default_name: str = "panel") -> Panel:
    tree = parse_yaml(text, file)
    if tree.data is None and not tree.problems:
        raise ConfigError(file, None, None, "the file is empty; a panel needs at least 'members'")
    if not isinstance(tree.data, dict):
        raise ConfigError(file, 1, None, "a panel file is a mapping of fields such as 'members' and 'question'")
    data = tree.data
    if "question" in data and "question_file" in data:
        later = max(("question",), ("question_file",), key=lambda loc: tree.lines.get(loc, 0))
        tree.add_problem(later, "give 'question' or 'question_file', not both")
    data.setdefault("name", default_name)
    try:
        panel = Panel.model_validate(data)
    except ValidationError as exc:
        tree.add_validation_errors(exc, Panel)
        raise tree.error() from None
    if tree.problems:
        raise tree.error()
    panel._source_file = file
    panel._lines = tree.lines
    panel._expanded_values = tree.expanded_values
    panel._variables = tree.variables
    return panel


# Questions -------------------------------------------------------------------------------------


QUESTION_FILE = TextFileRules(
    limit=MAX_FILE_BYTES,
    too_big="too big for a question",
    binary="a question is text",
    not_utf8="save it as UTF-8",
    not_regular="put the question in a file",
)


def read_question_text(path: Path, *, file: str, line: int | None, base_dir: Path | None = None) -> str:
    """The text of a question file named at `file`, `line` (relative paths resolve against
    `base_dir`, the panel file's folder), refused as an attachment would be
    (`panel_cli.local_files`)."""
    shown = str(path)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    try:
        return read_text_file(path, QUESTION_FILE)
    except FileRefused as refused:
        raise ConfigError(file, line, "question_file", f"{shown}: {refused}") from None


def read_question_file(panel: Panel, base_dir: Path | None) -> str:
    """The question in the panel's `question_file`, errors located at that field."""
    if panel.question_file is None:
        raise ValueError("the panel has no question_file")
    file = panel.source_file or panel.name
    line = panel.line_of(("question_file",))
    text = clean_question(read_question_text(Path(panel.question_file), file=file, line=line, base_dir=base_dir))
    if not text:
        raise ConfigError(file, line, "question_file", f"{panel.question_file}: the file is empty")
    return text


def clean_question(text: str | None) -> str:
    """A question from outside the panel file (`-q`, stdin, a `question_file`, Python) as a
    file's own `question` is read: without what a terminal would obey (`clean_text`), which
    every view, every reply quoting it and every export would otherwise carry; trimmed."""
    return clean_text(text).strip() if text else ""


def resolve_question(panel: Panel, base_dir: Path | None, given: str | None, stdin: Callable[[], str | None]) -> str:
    """The question from `-q`, else the file's `question`, else its `question_file`, else
    stdin. `stdin` is called only when it is needed, so a panel file with its own question
    never waits on a pipe that stays open (`sleep 30 | panel confer demo.yaml`)."""
    if given == "-":
        piped = clean_question(stdin())
        if not piped:
            raise UserError("-q -: nothing was piped on stdin.")
        return piped
    if given is not None:
        if not clean_question(given):
            raise UserError("-q: the question is empty; give one, or leave -q out to ask the panel's own.")
        return clean_question(given)
    if panel.question and panel.question.strip():
        return panel.question.strip()
    if panel.question_file:
        return read_question_file(panel, base_dir)
    piped = clean_question(stdin())
    if piped:
        return piped
    raise UserError("No question: give one with -q, as 'question' or 'question_file' in the panel file, or on stdin.")


def parse_names(value: str | None, option: str) -> list[str] | None:
    """`gpt, claude` -> ['gpt', 'claude'], as `--members` and its kin take names; None when not given."""
    if value is None:
        return None
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        raise UserError(f"{option} needs at least one name, separated by commas.")
    return names


def panel_from_members(
    names: list[str], chairman: list[str] | None = None, protocol: ProtocolName = "council", **fields: Any
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
        error = max(specific_errors(exc.errors()), key=lambda error: len(clean_loc(tuple(error["loc"]))))
        loc = clean_loc(tuple(error["loc"]))
        where = field_name(loc)
        if loc[:1] == ("members",) and len(loc) > 1:
            where = f"member '{names[loc[1]]}'"
        elif loc[:1] == ("chairman",) and chairman:
            where = f"chairman '{chairman[loc[1] if len(loc) > 1 and isinstance(loc[1], int) else 0]}'"
        raise UserError(f"{where}: {describe_error(dict(error))}.") from None
