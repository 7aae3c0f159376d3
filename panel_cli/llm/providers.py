"""Which environment variable holds each common provider's key, for display without litellm.

The gateway asks litellm itself before a run; this table only lets `panel models` and
`panel validate` say, instantly, what is set.
"""

from __future__ import annotations

import os

PROVIDER_KEYS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "mistral": ("MISTRAL_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "together_ai": ("TOGETHERAI_API_KEY", "TOGETHER_API_KEY"),
    "xai": ("XAI_API_KEY",),
    "cohere": ("COHERE_API_KEY",),
}

KEYLESS = frozenset({"demo", "ollama", "ollama_chat", "hosted_vllm", "lm_studio", "llamafile", "vllm"})


def key_status(provider: str, api_key_env: str | None = None, api_base: str | None = None) -> str:
    """`set (NAME)`, `missing (NAME)`, `not needed` or `unknown` — never the key itself."""
    if api_key_env:
        return f"{'set' if os.environ.get(api_key_env) else 'missing'} ({api_key_env})"
    if provider in KEYLESS:
        return "not needed"
    names = PROVIDER_KEYS.get(provider)
    if names is None:
        return "unknown"
    present = [name for name in names if os.environ.get(name)]
    if present:
        return f"set ({present[0]})"
    if api_base and provider == "openai":
        return "not needed (custom api_base)"
    return f"missing ({' or '.join(names)})"
