"""Short model names (`gpt-4o`, `claude`, `llama`) and what they stand for.

The table shipped with the tool is `aliases.yaml` beside this file; a user extends or
overrides it with `aliases.yaml` in their config directory. An alias is either a litellm
model id or a mapping with `model` and optionally `api_base`.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict

from panel_cli.errors import UserError

SHIPPED_ALIASES = Path(__file__).with_name("aliases.yaml")


class Alias(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str
    api_base: str | None = None


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
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: the alias file is not valid YAML ({exc.problem if hasattr(exc, 'problem') else exc}).") from None
    if not isinstance(raw, dict):
        raise UserError(f"{path}: the alias file must map short names to model ids.")
    aliases: dict[str, Alias] = {}
    for name, value in raw.items():
        if isinstance(value, str):
            aliases[str(name)] = Alias(model=value)
        elif isinstance(value, dict):
            try:
                aliases[str(name)] = Alias.model_validate(value)
            except ValueError:
                raise UserError(f"{path}: alias '{name}' must have a 'model' and may have an 'api_base', nothing else.") from None
        else:
            raise UserError(f"{path}: alias '{name}' must be a model id or a mapping with 'model'.")
    return aliases


@cache
def _load_aliases(user_file: Path) -> dict[str, Alias]:
    aliases = _read_alias_file(SHIPPED_ALIASES)
    if user_file.is_file():
        aliases.update(_read_alias_file(user_file))
    return aliases


def load_aliases() -> dict[str, Alias]:
    """Shipped aliases, overridden by the user's."""
    return _load_aliases(user_alias_file())


def resolve_model(name: str) -> Alias:
    """An alias's target, or the name itself when it is already a model id."""
    return load_aliases().get(name) or Alias(model=name)
