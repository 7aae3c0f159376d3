"""Which environment variables hold each provider's credentials, judged without litellm.

A missing key used to surface one per run, each after litellm's six-second import. This
table lets a run (and `panel validate`) name every missing key at once, before litellm
loads. The variable names are the ones litellm's own code reads for a chat call (its
`get_secret_str(...)` chains and `validate_environment`); a provider whose credentials
can live outside the environment (AWS profiles, Google application-default credentials,
a device login) is `unknown` rather than guessed at, and neither we nor litellm block it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from types import ModuleType
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from panel_cli.models.catalog import json_providers

AZURE_ENTRA = (
    ("AZURE_AD_TOKEN",),
    ("AZURE_TENANT_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET"),
    ("AZURE_USERNAME", "AZURE_PASSWORD", "AZURE_CLIENT_ID"),
)
# Credential variables that identify rather than authenticate: needed, but not secret.
NOT_SECRET = frozenset({"AZURE_TENANT_ID", "AZURE_CLIENT_ID", "AZURE_USERNAME"})


class Credentials(BaseModel):
    """What one provider reads from the environment for a call."""

    model_config = ConfigDict(frozen=True)

    keys: tuple[str, ...]
    """Any one of these is the key; they are the names a user is told to set."""
    alternatives: tuple[tuple[str, ...], ...] = ()
    """Other complete sets litellm accepts instead (older names, Entra ID logins)."""
    endpoint: str | None = None
    """The variable naming the endpoint, needed unless the member has an api_base."""

    def variables(self) -> tuple[str, ...]:
        return (*self.keys, *(name for group in self.alternatives for name in group))


PROVIDER_KEYS: dict[str, Credentials] = {
    "openai": Credentials(keys=("OPENAI_API_KEY",)),
    "anthropic": Credentials(keys=("ANTHROPIC_API_KEY",), alternatives=(("ANTHROPIC_AUTH_TOKEN",),)),
    "gemini": Credentials(keys=("GEMINI_API_KEY", "GOOGLE_API_KEY")),
    "mistral": Credentials(keys=("MISTRAL_API_KEY",), alternatives=(("MISTRAL_AZURE_API_KEY",),)),
    "deepseek": Credentials(keys=("DEEPSEEK_API_KEY",)),
    "groq": Credentials(keys=("GROQ_API_KEY",)),
    "openrouter": Credentials(keys=("OPENROUTER_API_KEY",), alternatives=(("OR_API_KEY",),)),
    "together_ai": Credentials(
        keys=("TOGETHER_API_KEY", "TOGETHERAI_API_KEY"), alternatives=(("TOGETHER_AI_API_KEY",), ("TOGETHER_AI_TOKEN",))
    ),
    "xai": Credentials(keys=("XAI_API_KEY",)),
    "cohere": Credentials(keys=("COHERE_API_KEY",), alternatives=(("CO_API_KEY",),)),
    "azure": Credentials(
        keys=("AZURE_API_KEY",), alternatives=(("AZURE_OPENAI_API_KEY",), *AZURE_ENTRA), endpoint="AZURE_API_BASE"
    ),
    "azure_ai": Credentials(keys=("AZURE_AI_API_KEY",), alternatives=AZURE_ENTRA, endpoint="AZURE_AI_API_BASE"),
    "fireworks_ai": Credentials(
        keys=("FIREWORKS_API_KEY", "FIREWORKS_AI_API_KEY"),
        alternatives=(("FIREWORKSAI_API_KEY",), ("FIREWORKS_AI_TOKEN",)),
    ),
    "perplexity": Credentials(keys=("PERPLEXITYAI_API_KEY", "PERPLEXITY_API_KEY")),
    "cerebras": Credentials(keys=("CEREBRAS_API_KEY",)),
    "deepinfra": Credentials(keys=("DEEPINFRA_API_KEY",)),
    "codestral": Credentials(keys=("CODESTRAL_API_KEY",)),
    "nvidia_nim": Credentials(keys=("NVIDIA_NIM_API_KEY",)),
    "sambanova": Credentials(keys=("SAMBANOVA_API_KEY",)),
    "ai21_chat": Credentials(keys=("AI21_API_KEY",)),
    "replicate": Credentials(keys=("REPLICATE_API_KEY", "REPLICATE_API_TOKEN")),
    "moonshot": Credentials(keys=("MOONSHOT_API_KEY",)),
    "dashscope": Credentials(keys=("DASHSCOPE_API_KEY",)),
    "zai": Credentials(keys=("ZAI_API_KEY",)),
    "minimax": Credentials(keys=("MINIMAX_API_KEY",)),
    "novita": Credentials(keys=("NOVITA_API_KEY",)),
    "nebius": Credentials(keys=("NEBIUS_API_KEY",)),
    "featherless_ai": Credentials(keys=("FEATHERLESS_AI_API_KEY", "FEATHERLESS_API_KEY")),
    "hyperbolic": Credentials(keys=("HYPERBOLIC_API_KEY",)),
    "lambda_ai": Credentials(keys=("LAMBDA_API_KEY",)),
    "meta_llama": Credentials(keys=("LLAMA_API_KEY",)),
    "friendliai": Credentials(keys=("FRIENDLIAI_API_KEY", "FRIENDLI_TOKEN")),
    "volcengine": Credentials(keys=("VOLCENGINE_API_KEY",)),
    "wandb": Credentials(keys=("WANDB_API_KEY",)),
    "vercel_ai_gateway": Credentials(keys=("VERCEL_AI_GATEWAY_API_KEY",), alternatives=(("VERCEL_OIDC_TOKEN",),)),
}
# Routes litellm gives bare names (catalog.qualify_model) that read another entry's key.
SAME_KEYS = {
    "text-completion-openai": "openai",
    "anthropic_text": "anthropic",
    "cohere_chat": "cohere",
    "ai21": "ai21_chat",
    "text-completion-codestral": "codestral",
}

KEYLESS = frozenset(
    {
        "demo",
        "ollama",
        "ollama_chat",
        "hosted_vllm",
        "vllm",
        "lm_studio",
        "llamafile",
        "lemonade",
        "docker_model_runner",
    }
)

# Credentials that may come from files or instance metadata (AWS profiles and roles, Google
# application-default credentials, a device login): nothing in the environment says whether
# they are there, so these providers are `unknown` and the call itself decides. The names
# listed are the secret variables each may read, kept only so their values are redacted.
AMBIENT: dict[str, tuple[str, ...]] = {
    "bedrock": ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK"),
    "bedrock_mantle": ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK"),
    "sagemaker": ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"),
    "sagemaker_chat": ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"),
    "sagemaker_nova": ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"),
    "vertex_ai": ("VERTEXAI_CREDENTIALS", "VERTEX_CREDENTIALS"),
    "vertex_ai_beta": ("VERTEXAI_CREDENTIALS", "VERTEX_CREDENTIALS"),
    "github_copilot": (),
    "chatgpt": (),
}


class KeyedMember(Protocol):
    """What a key check reads from a panel member."""

    name: str
    model: str
    api_base: str | None
    api_key_env: str | None


def provider_of(model: str) -> str | None:
    """The provider prefix of a qualified model id; None for a bare name (unqualified)."""
    prefix, slash, _ = model.partition("/")
    return prefix if slash else None


def credentials(provider: str) -> Credentials | None:
    """Our table's entry, else the key litellm declares for a JSON-configured provider."""
    provider = SAME_KEYS.get(provider, provider)
    if provider in PROVIDER_KEYS:
        return PROVIDER_KEYS[provider]
    key = json_providers().get(provider)
    return Credentials(keys=(key,)) if key else None


def _is_set(name: str) -> bool:
    return bool(os.environ.get(name))


def _missing(provider: str, api_base: str | None) -> list[str] | None:
    """What to set for `provider`: [] when nothing is missing, None when we cannot judge."""
    if provider in KEYLESS:
        return []
    if provider == "openai" and api_base:
        # An OpenAI-compatible server of one's own; the gateway sends a placeholder key.
        return []
    found = credentials(provider)
    if found is None:
        return None
    missing: list[str] = []
    has_key = any(_is_set(name) for name in found.keys) or any(
        all(_is_set(name) for name in group) for group in found.alternatives
    )
    if found.keys and not has_key:
        missing.append(" or ".join(found.keys))
    if found.endpoint and not api_base and not _is_set(found.endpoint):
        missing.append(found.endpoint)
    return missing


def key_status(provider: str, api_key_env: str | None = None, api_base: str | None = None) -> str:
    """`set (NAME)`, `missing (NAME)`, `not needed` or `unknown` — never the key itself."""
    if api_key_env:
        return f"{'set' if _is_set(api_key_env) else 'missing'} ({api_key_env})"
    if provider in KEYLESS:
        return "not needed"
    found = credentials(provider)
    present = [name for name in found.variables() if _is_set(name)] if found else []
    missing = _missing(provider, api_base)
    if missing is None:
        return "unknown"
    if missing:
        return f"missing ({' and '.join(missing)})"
    if present:
        return f"set ({present[0]})"
    return "not needed (custom api_base)"


def missing_keys(members: Iterable[KeyedMember]) -> list[str]:
    """One sentence per member whose key is missing, all of them, before litellm loads."""
    problems: list[str] = []
    for member in members:
        if member.api_key_env:
            if not _is_set(member.api_key_env):
                problems.append(
                    f"Member '{member.name}' ({member.model}) needs the environment variable {member.api_key_env} (its api_key_env)."
                )
            continue
        provider = provider_of(member.model)
        missing = _missing(provider, member.api_base) if provider else None
        if missing:
            problems.append(f"Member '{member.name}' ({member.model}) needs {' and '.join(missing)}.")
    return problems


def _judged_by_litellm(member: KeyedMember) -> bool:
    """Whether only litellm can judge this member's key: its provider is in no table of ours."""
    if member.api_key_env:
        return False
    provider = provider_of(member.model)
    if provider is None:
        return True
    return provider not in AMBIENT and _missing(provider, member.api_base) is None


def missing_keys_litellm(litellm_module: ModuleType, members: Iterable[KeyedMember]) -> list[str]:
    """The same sentences, from litellm's `validate_environment`, for the members whose
    provider our table does not know; called once litellm has loaded."""
    problems: list[str] = []
    for member in members:
        if not _judged_by_litellm(member):
            continue
        report = litellm_module.validate_environment(model=member.model, api_base=member.api_base)
        # An endpoint variable is never a key: litellm falls back to the provider's default.
        missing = [name for name in report.get("missing_keys", []) if not name.endswith("_API_BASE")]
        if missing and not report.get("keys_in_environment"):
            problems.append(f"Member '{member.name}' ({member.model}) needs {' and '.join(missing)}.")
    return problems


def keys_in_use(members: Iterable[KeyedMember]) -> list[str]:
    """The values of every secret any member's call may send, whatever their length, so the
    caller can redact them from all output: a member's api_key_env, else its provider's."""
    names: dict[str, None] = {}
    for member in members:
        if member.api_key_env:
            names[member.api_key_env] = None
            continue
        provider = provider_of(member.model) or "openai"
        found = credentials(provider)
        secrets = found.variables() if found else AMBIENT.get(provider, ())
        # The conventional name too: harmless when unset, a leak avoided when a provider
        # missing from our tables reads it.
        conventional = f"{provider.upper().replace('-', '_')}_API_KEY"
        names.update(dict.fromkeys(name for name in (*secrets, conventional) if name not in NOT_SECRET))
    return list(dict.fromkeys(value for name in names if (value := os.environ.get(name))))
