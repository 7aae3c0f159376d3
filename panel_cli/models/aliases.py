"""Short model names (`gpt-4o`, `claude`, `llama`) and what they stand for.

The table shipped with the tool is `aliases.yaml` beside this file; a user extends or
overrides it with `aliases.yaml` in their config directory. An alias is either a litellm
model id or a mapping with `model` and optionally `api_base`. A name with a provider
prefix (`openai/gpt-4o`, `demo/sage`) is a model id already, so it never reads the table:
a broken user alias file only matters to a panel that uses a short name.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from urllib.parse import SplitResult, urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from panel_cli.located_yaml import parse_yaml, read_config_text

SHIPPED_ALIASES = Path(__file__).with_name("aliases.yaml")

CREDENTIALS_IN_URL = "a user or password in the URL is not supported; put the key in an environment variable and name it with api_key_env"


def split_url(url: str) -> SplitResult:
    """A URL's parts as the HTTP client reads them; one without a scheme (`localhost:11434`,
    `//host/v1`) is read as starting with its host, not as a scheme called `localhost`."""
    return urlsplit(url if "://" in url or url.startswith("//") else f"//{url}")


def check_api_base(url: str | None) -> str | None:
    """Refuse a user or password in the URL (`http://user:pass@host`): the URL is shown,
    stored and sent in error reports, so a password in it would leak. The URL is read as the
    HTTP client will read it (the URL library), so a password cannot hide: a `/`, `?` or `#`
    in it ends the authority early and leaves a port that is no number, and a URL without a
    scheme (`//user:pass@host`, `user:pass@host`) is read as the authority it starts with.
    The message never repeats the URL."""
    if url is None:
        return None
    parts = split_url(url)
    if "@" in parts.netloc:
        raise ValueError(CREDENTIALS_IN_URL)
    try:
        parts.port  # noqa: B018  # urllib checks the port only when it is read
    except ValueError:
        raise ValueError(CREDENTIALS_IN_URL if "@" in url else "the port in the URL is not a number") from None
    return url


class Alias(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1)
    api_base: str | None = None

    _check_api_base = field_validator("api_base")(check_api_base)


def config_dir() -> Path:
    """Where the user's own files live; `PANEL_CONFIG_DIR` moves it (tests, portable setups)."""
    override = os.environ.get("PANEL_CONFIG_DIR")
    if override:
        return Path(override)
    from platformdirs import user_config_dir

    return Path(user_config_dir("panel", appauthor=False))


def user_alias_file() -> Path:
    return config_dir() / "aliases.yaml"


def _read_alias_file(path: Path) -> dict[str, Alias]:
    """Every problem in the file, located like a panel file's (file, line, alias name)."""
    file = str(path)
    tree = parse_yaml(read_config_text(path, file, kind="file of aliases"), file, expand_env=False)
    if tree.data is None:
        return {}
    if not isinstance(tree.data, dict):
        tree.add_problem((), "an alias file maps short names to model ids, like 'gpt: openai/gpt-4o'", line=1)
        raise tree.error()
    aliases: dict[str, Alias] = {}
    for name, value in tree.data.items():
        loc = (name,)
        if tree.covers(loc):
            continue
        if "/" in str(name):
            tree.add_problem(
                loc, "an alias is a short name without '/'; a name with a provider prefix is a model id already"
            )
        elif not isinstance(value, str | dict):
            tree.add_problem(loc, "an alias is a model id, or a mapping with 'model' and optionally 'api_base'")
        else:
            try:
                aliases[str(name)] = Alias.model_validate({"model": value} if isinstance(value, str) else value)
            except ValidationError as exc:
                tree.add_validation_errors(exc, Alias, prefix=loc)
    if tree.problems:
        raise tree.error()
    return aliases


@cache
def _load_aliases(user_file: Path) -> dict[str, Alias]:
    aliases = _read_alias_file(SHIPPED_ALIASES)
    if user_file.exists():  # a folder or a device there is refused by name, not passed over
        aliases.update(_read_alias_file(user_file))
    return aliases


def load_aliases() -> dict[str, Alias]:
    """Shipped aliases, overridden by the user's; a broken user file is a located ConfigError."""
    return _load_aliases(user_alias_file())


def resolve_model(name: str) -> Alias:
    """An alias's target, or the name itself when it is already a model id."""
    if "/" in name:
        return Alias(model=name)
    return load_aliases().get(name) or Alias(model=name)
