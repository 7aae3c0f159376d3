"""Which providers and models litellm knows, read from its installed files without importing it.

Importing litellm takes about six seconds, and `panel validate` must answer at once, so an
unknown model id has to be caught before litellm loads, not by the first call of a run.
litellm keeps what its provider lookup needs in plain files beside its code: the provider
names of its `LlmProviders` enum (`types/utils.py`), the OpenAI-compatible providers it
configures from `llms/openai_like/providers.json`, and its offline model table
(`model_prices_and_context_window_backup.json`: each model's `litellm_provider`, and the
routing rules that send new Claude ids to Anthropic). This module reads those files as text
and answers as `litellm.get_llm_provider` would, so the id a member is called with is
decided before any call.

A provider prefix is trusted without its model being listed: new models appear every week
and litellm passes them through. Only a name without a known provider has to be in the
table. If a litellm release moves these files, nothing here blocks a user: the model is
passed on unchanged and the run's own check (`check_with_litellm`) decides.
"""

from __future__ import annotations

import datetime
import difflib
import importlib.util
import json
import re
from collections.abc import Container
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

from panel_cli.models.personas import PERSONAS
from panel_cli.models.routes import is_demo

PROVIDER_DOCS = "https://docs.litellm.ai/docs/providers"
MODELS_HINT = "panel models lists the short names"

# A bare name is resolved through these of the table's `litellm_provider` values, in
# litellm's own words (litellm/__init__.py `_populate_provider_model_sets` and the bare-name
# branch of `get_llm_provider`); every other value only prices an id that carries a prefix.
BARE_NAME_PROVIDERS: dict[str, str] = {
    "openai": "openai",
    "text-completion-openai": "text-completion-openai",
    "anthropic": "anthropic",
    "cohere": "cohere",
    "cohere_chat": "cohere_chat",
    "openrouter": "openrouter",
    "vertex_ai-text-models": "vertex_ai",
    "vertex_ai-code-text-models": "vertex_ai",
    "vertex_ai-language-models": "vertex_ai",
    "vertex_ai-vision-models": "vertex_ai",
    "vertex_ai-chat-models": "vertex_ai",
    "vertex_ai-code-chat-models": "vertex_ai",
    "vertex_ai-embedding-models": "vertex_ai",
    "vertex_ai-image-models": "vertex_ai",
    "vertex_ai-video-models": "vertex_ai",
    "ai21": "ai21_chat",
    "aleph_alpha": "aleph_alpha",
    "baseten": "baseten",
    "nlp_cloud": "nlp_cloud",
    "bedrock": "bedrock",
    "bedrock_converse": "bedrock",
    "watsonx": "watsonx",
    "empower": "empower",
    "gradient_ai": "gradient_ai",
}
# For a hint only: the APIs of the makers themselves, before the many services reselling them.
SUGGESTED_PROVIDERS = (
    "openai",
    "anthropic",
    "gemini",
    "xai",
    "mistral",
    "deepseek",
    "cohere_chat",
    "perplexity",
    "groq",
    "together_ai",
    "fireworks_ai",
    "ollama",
)
# Claude ids litellm sends to Anthropic's old text-completion route.
ANTHROPIC_TEXT_MODELS = frozenset({"claude-2", "claude-instant-1"})
# Rows litellm keeps only to price a call, never to route a bare name: retired models of
# these providers, and Bedrock's per-region and commitment rows.
RETIRED_HIDDEN_PROVIDERS = frozenset({"baseten"})
BEDROCK_PRICING_ONLY = re.compile(r"^bedrock/[a-zA-Z0-9_-]+/.+$")
REPLICATE_VERSION_LENGTH = 64
# Table keys that are not models.
RESERVED_KEYS = frozenset({"sample_spec", "fallback_generalizations"})


class UnknownModel(ValueError):
    """A model id litellm could not route; the message is one sentence for the user."""


class ModelTable(NamedTuple):
    """What litellm resolves a name without a provider prefix to, and, for a name it
    lists only under a prefix (`mistral/mistral-large-latest`), the id to suggest."""

    bare: dict[str, str]
    routes: tuple[tuple[re.Pattern[str], str], ...]
    prefixed: dict[str, str]


def litellm_dir() -> Path | None:
    """Where litellm is installed; `find_spec` on a top-level name locates it without running it."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _enum_providers(text: str) -> frozenset[str]:
    body = re.search(r"^class LlmProviders\(.*?\):\n(.*?)(?=^\S)", text, re.MULTILINE | re.DOTALL)
    if body is None:
        return frozenset()
    return frozenset(re.findall(r'^\s+[A-Z][A-Z0-9_]*\s*=\s*"([^"]+)"', body.group(1), re.MULTILINE))


@cache
def json_providers() -> dict[str, str]:
    """litellm's JSON-configured OpenAI-compatible providers: slug -> the variable holding its key.

    `JSONProviderRegistry` loads `llms/openai_like/providers.json` on import; no file means no
    such providers, as in litellm."""
    root = litellm_dir()
    if root is None:
        return {}
    path = root / "llms" / "openai_like" / "providers.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(raw, dict):
        return {}
    return {str(slug): str(config.get("api_key_env") or "") for slug, config in raw.items() if isinstance(config, dict)}


@cache
def known_providers() -> frozenset[str] | None:
    """Every provider prefix litellm routes, plus our `demo`; None when litellm's files cannot be read."""
    root = litellm_dir()
    if root is None:
        return None
    try:
        text = (root / "types" / "utils.py").read_text(encoding="utf-8")
    except OSError:
        return None
    providers = _enum_providers(text)
    if "openai" not in providers:
        return None
    return providers | json_providers().keys() | {"demo"}


def _expand_aliases(rows: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The table's rows under every name litellm serves them by (`_expand_model_aliases`):
    an `aliases` list adds names to a row, an `alias_of` row stands for its target."""
    pointers = {name: info["alias_of"] for name, info in rows.items() if isinstance(info.get("alias_of"), str)}
    entries = {name: info for name, info in rows.items() if name not in pointers}
    owners: dict[str, str] = {}
    for name, info in entries.items():
        aliases = info.get("aliases")
        if isinstance(aliases, list):
            for alias in aliases:
                if isinstance(alias, str) and alias not in entries and alias not in owners:
                    owners[alias] = name
    for alias, target in pointers.items():
        if target in entries and alias not in owners:
            owners[alias] = target
    return entries | {alias: entries[owner] for alias, owner in owners.items()}


def _hidden_as_retired(info: dict[str, Any]) -> bool:
    deprecation = info.get("deprecation_date")
    if not isinstance(deprecation, str):
        return False
    try:
        return datetime.date.fromisoformat(deprecation) <= datetime.datetime.now(datetime.UTC).date()
    except ValueError:
        return False


def _bare_route(name: str, info: dict[str, Any]) -> tuple[str, str] | None:
    """The (name, provider) a table row lets litellm resolve without a prefix, if any."""
    field = info.get("litellm_provider")
    provider = BARE_NAME_PROVIDERS.get(field) if isinstance(field, str) else None
    if provider is None:
        return None
    if field == "openai" and name.startswith("ft:") and name.count(":") <= 1:
        return None
    if field in RETIRED_HIDDEN_PROVIDERS and _hidden_as_retired(info):
        return None
    if field == "bedrock" and (
        info.get("mode") == "guardrail" or "month-commitment" in name or BEDROCK_PRICING_ONLY.match(name)
    ):
        return None
    if field in ("vertex_ai-image-models", "vertex_ai-video-models"):
        name = name.replace("vertex_ai/", "")
    if field == "anthropic" and name in ANTHROPIC_TEXT_MODELS:
        provider = "anthropic_text"
    return name, provider


def _suggestion_rank(name: str) -> tuple[int, int]:
    """Which of the ids that list a name to suggest: the provider the name is spelled after
    (mistral/mistral-large-latest), then a model's own maker before the services reselling it."""
    prefix, _, rest = name.partition("/")
    maker = SUGGESTED_PROVIDERS.index(prefix) if prefix in SUGGESTED_PROVIDERS else len(SUGGESTED_PROVIDERS)
    return (0 if rest.startswith(prefix) else 1, maker)


def _routing_rules(block: object) -> tuple[tuple[re.Pattern[str], str], ...]:
    """The table's routing rules: a regex whose only `model_info` is `litellm_provider`
    (litellm_core_utils/fallback_generalizations.py skips every other shape)."""
    rules = block.get("rules") if isinstance(block, dict) else None
    routes: list[tuple[re.Pattern[str], str]] = []
    for rule in rules if isinstance(rules, list) else []:
        if not isinstance(rule, dict) or "extends" in rule:
            continue
        pattern, info = rule.get("pattern"), rule.get("model_info")
        fill = rule.get("fill_missing_for_providers", [])
        if not isinstance(pattern, str) or not isinstance(info, dict) or not isinstance(fill, list | tuple):
            continue
        provider = info.get("litellm_provider")
        if len(info) != 1 or not isinstance(provider, str):
            continue
        try:
            routes.append((re.compile(pattern, re.IGNORECASE), provider))
        except re.error:
            continue
    return tuple(routes)


@cache
def model_table() -> ModelTable | None:
    """The bare names litellm's offline model table resolves, and its routing rules.

    Parsing the 3.5 MB file takes about 50 ms, so it is read only when a name without a
    provider prefix turns up, and only the bare names are kept."""
    root = litellm_dir()
    if root is None:
        return None
    try:
        raw = json.loads((root / "model_prices_and_context_window_backup.json").read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict):
        return None
    routes = _routing_rules(raw.get("fallback_generalizations"))
    rows = {name: info for name, info in raw.items() if name not in RESERVED_KEYS and isinstance(info, dict)}
    bare: dict[str, str] = {}
    prefixed: dict[str, str] = {}
    for name, info in _expand_aliases(rows).items():
        route = _bare_route(name, info)
        if route is not None:
            bare.setdefault(*route)
        rest = name.partition("/")[2]
        if rest and (rest not in prefixed or _suggestion_rank(name) < _suggestion_rank(prefixed[rest])):
            prefixed[rest] = name
    if not bare:
        return None
    return ModelTable(bare=bare, routes=routes, prefixed=prefixed)


def catalog_available() -> bool:
    """Whether litellm's files could be read; without them every model passes to the run's check."""
    return known_providers() is not None and model_table() is not None


def _bare_provider(name: str, table: ModelTable) -> str | None:
    """The provider litellm's `get_llm_provider` gives a name with no provider prefix."""
    if "ft:gpt-3.5-turbo" in name or "ft:gpt-4" in name:
        return "openai"
    if name in table.bare:
        return table.bare[name]
    parts = name.split(":")
    if len(parts) > 1 and len(parts[1]) == REPLICATE_VERSION_LENGTH:
        return "replicate"
    return next((provider for pattern, provider in table.routes if pattern.search(name)), None)


def _persona(name: str) -> str | None:
    return name if name in PERSONAS else None


def unknown_model_sentence(model: str, providers: frozenset[str] | None = None) -> str:
    """Why `model` cannot be routed, and what to write instead, in one sentence."""
    prefix, slash, rest = model.partition("/")
    if providers is not None and prefix in providers and not rest:
        return f"'{model}' names a provider but no model; write {prefix}/<model> ({MODELS_HINT})."
    if slash:
        close = difflib.get_close_matches(prefix, sorted(providers or ()), n=1)
        hint = f"did you mean {close[0]}/{rest}? " if close else f"see {PROVIDER_DOCS}; "
        return f"'{prefix}' is not a provider litellm knows ({hint}{MODELS_HINT})."
    persona = _persona(model)
    if persona is not None:
        return f"'{model}' is not a model litellm knows; did you mean demo/{persona}? ({MODELS_HINT})."
    table = model_table()
    if table is not None and model in table.prefixed:
        return f"'{model}' is not a model litellm knows without its provider; did you mean {table.prefixed[model]}? ({MODELS_HINT})."
    close = close_names(model)
    if close:
        return (
            f"'{model}' is not a model litellm knows; did you mean {' or '.join(close)}?"
            f" (if it is an OpenAI model write openai/{model}; {MODELS_HINT})."
        )
    return f"'{model}' is not a model litellm knows; if it is an OpenAI model write openai/{model} ({MODELS_HINT})."


# How like a known name a mistyped one must be to be offered (difflib's ratio): `gpt4o` is
# 0.91 of `gpt-4o`.
CLOSE_NAME = 0.8
MOST_SUGGESTED = 3


def close_names(name: str) -> list[str]:
    """Known names a mistyped `name` is close to: the alias table's (`panel models`) first,
    then the bare names litellm's table routes; a name taken from both is offered once."""
    from panel_cli.errors import PanelError
    from panel_cli.models.aliases import load_aliases

    try:
        aliases = sorted(load_aliases())
    except PanelError:  # a broken alias file is reported where it is read, not here
        aliases = []
    found = difflib.get_close_matches(name, aliases, n=MOST_SUGGESTED, cutoff=CLOSE_NAME)
    table = model_table()
    if table is not None and len(found) < MOST_SUGGESTED:
        listed = difflib.get_close_matches(name, sorted(table.bare), n=MOST_SUGGESTED, cutoff=CLOSE_NAME)
        found += [each for each in listed if each not in found]
    return found[:MOST_SUGGESTED]


def qualify_model(model: str, api_base: str | None = None) -> str:
    """The id litellm should be called with: `provider/model`, so its provider (and key) is known.

    Raises UnknownModel for an id litellm would refuse. With an `api_base`, a name without a
    known provider is taken as an OpenAI-compatible server's model, as litellm's `openai/`
    route serves any name there."""
    providers = known_providers()
    if providers is None:
        return model
    prefix, slash, rest = model.partition("/")
    if slash and rest and prefix in providers:
        return model
    if slash and not rest and prefix in providers:
        raise UnknownModel(unknown_model_sentence(model, providers))
    table = model_table()
    if table is None:
        return model
    provider = _bare_provider(model, table)
    if provider is not None:
        return f"{provider}/{model}"
    if api_base:
        return f"openai/{model}"
    raise UnknownModel(unknown_model_sentence(model, providers))


def check_with_litellm(litellm_module: ModuleType, model: str, api_base: str | None = None) -> str | None:
    """None when litellm routes `model`, else the sentence `qualify_model` would give.

    The authoritative check, made once litellm is loaded and before the first call: it also
    covers what the files could not tell (an unreadable catalog, a model passed unchanged).
    A provider that logs in while it is looked up (github_copilot, chatgpt) is routed by its
    prefix alone, as litellm itself does for metadata: asking would start a login. A demo
    persona is no model of litellm's: the gateway serves it, and `Member` has checked its name."""
    if is_demo(model):
        return None
    providers = frozenset(str(getattr(name, "value", name)) for name in getattr(litellm_module, "provider_list", ()))
    providers |= json_providers().keys() | {"demo"}
    constants = getattr(litellm_module, "constants", None)
    logs_in: Container[str] = getattr(constants, "PROVIDERS_THAT_AUTHENTICATE_ON_PROVIDER_INFO", frozenset())
    prefix, _, rest = model.partition("/")
    if prefix in logs_in and rest:
        return None
    try:
        litellm_module.get_llm_provider(model=model, api_base=api_base)
    except Exception:
        return unknown_model_sentence(model, providers)
    return None
