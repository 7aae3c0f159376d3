"""Where a member's key goes: its provider's own API, or a host the panel file names instead.

litellm sends a provider's key from the environment to whatever `api_base` a member gives: a
panel file with `model: openai/anything` and `api_base: http://some-host/` hands the user's own
OPENAI_API_KEY to that host as a Bearer token. That has its uses (a proxy, a gateway, a server of
one's own), so it is allowed, but the user must be able to see it: `panel validate` lists every
such key, and a run names each one before its first call unless the host is this machine.

The key a call sends is the gateway's choice (`Gateway._api_key`): the member's `api_key_env`,
else none of ours, so litellm reads the provider's variable from the environment; an OpenAI-
compatible `api_base` with OPENAI_API_KEY unset gets a placeholder, which is no key. The
variable litellm reads is the first set one of the provider's (`providers.credentials`), else
`<PROVIDER>_API_KEY`, which litellm reads for the providers our table leaves out (ollama reads
OLLAMA_API_KEY).

A provider's own hosts are a table of ours (`OWN_HOSTS`), not litellm's defaults: litellm keeps
each provider's endpoint in that provider's code (`https://api.anthropic.com/v1/messages` in its
Anthropic config, `api.groq.com` in `get_llm_provider`), readable only by importing litellm (six
seconds), which `panel validate` never does. The OpenAI-compatible providers litellm configures
from `providers.json` have their `base_url` read from that file, as `catalog` reads their keys.
`tests/llm/test_providers.py` checks the table against the installed litellm. A provider in
neither has no known host of its own, so any `api_base` it is given is another host.
"""

from __future__ import annotations

import ipaddress
import json
import os
from functools import cache
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from panel_cli.llm.providers import AMBIENT, NOT_SECRET, SAME_KEYS, KeyedMember, credentials, provider_of
from panel_cli.models.aliases import split_url
from panel_cli.models.catalog import litellm_dir

if TYPE_CHECKING:
    from panel_cli.config import Member, Panel

# Each provider's own API hosts; a subdomain of one is the provider's too (an Azure resource,
# a region of Volcengine's).
OWN_HOSTS: dict[str, tuple[str, ...]] = {
    "openai": ("api.openai.com",),
    "anthropic": ("api.anthropic.com",),
    "gemini": ("generativelanguage.googleapis.com",),
    "mistral": ("api.mistral.ai",),
    "deepseek": ("api.deepseek.com",),
    "groq": ("api.groq.com",),
    "openrouter": ("openrouter.ai",),
    "together_ai": ("api.together.ai", "api.together.xyz"),
    "xai": ("api.x.ai",),
    "cohere": ("api.cohere.ai", "api.cohere.com"),
    "azure": ("openai.azure.com", "cognitiveservices.azure.com"),
    "azure_ai": ("services.ai.azure.com", "inference.ai.azure.com"),
    "fireworks_ai": ("api.fireworks.ai",),
    "perplexity": ("api.perplexity.ai",),
    "cerebras": ("api.cerebras.ai",),
    "deepinfra": ("api.deepinfra.com",),
    "codestral": ("codestral.mistral.ai",),
    "nvidia_nim": ("integrate.api.nvidia.com",),
    "sambanova": ("api.sambanova.ai",),
    "ai21_chat": ("api.ai21.com",),
    "replicate": ("api.replicate.com",),
    "moonshot": ("api.moonshot.ai",),
    "dashscope": ("dashscope.aliyuncs.com", "dashscope-intl.aliyuncs.com"),
    "zai": ("api.z.ai",),
    "minimax": ("api.minimax.io", "api.minimaxi.com"),
    "novita": ("api.novita.ai",),
    "nebius": ("api.studio.nebius.ai",),
    "featherless_ai": ("api.featherless.ai",),
    "hyperbolic": ("api.hyperbolic.xyz",),
    "lambda_ai": ("api.lambda.ai",),
    "meta_llama": ("api.llama.com",),
    "friendliai": ("api.friendli.ai",),
    "volcengine": ("volces.com",),
    "wandb": ("api.inference.wandb.ai",),
    "vercel_ai_gateway": ("ai-gateway.vercel.sh",),
}


class KeySent(BaseModel):
    """A key a member's calls send to a host that is not its provider's own."""

    model_config = ConfigDict(frozen=True)

    member: str
    provider: str
    variable: str
    """The environment variable holding the key (never its value)."""
    host: str
    loopback: bool
    """Whether the host is this machine (`localhost`, 127.0.0.1, ::1)."""


def key_sent_elsewhere(member: KeyedMember) -> KeySent | None:
    """The key `member`'s calls send to a host other than its provider's own, or None: without
    an `api_base` (the provider's own endpoint), with one on the provider's own hosts, or when
    the call sends no key (its variable is unset: a run then either refuses to start for the
    missing key or, for an OpenAI-compatible server, sends a placeholder)."""
    if not member.api_base or member.model.startswith("demo/"):
        return None
    host = split_url(member.api_base).hostname
    if not host:
        return None
    provider = provider_of(member.model) or "openai"
    if is_own_host(provider, host):
        return None
    variable = _key_variable(member, provider)
    if variable is None:
        return None
    return KeySent(member=member.name, provider=provider, variable=variable, host=host, loopback=is_loopback(host))


def keys_sent_elsewhere(panel: Panel) -> list[tuple[KeySent, int | None]]:
    """Each key the panel's members send to a host other than their provider's own, with the
    line of the panel file that sends it there (None for a panel without a file)."""
    found: list[tuple[KeySent, int | None]] = []
    for member in panel.callable_members():
        sent = key_sent_elsewhere(member)
        if sent is not None:
            found.append((sent, panel.line_of((*_member_location(panel, member), "api_base"))))
    return found


def _member_location(panel: Panel, member: Member) -> tuple[Any, ...]:
    """Where the panel file declares a member: `("members", 2)`, `("critic",)`, `("chairman", 1)`."""
    for index, candidate in enumerate(panel.members):
        if candidate is member:
            return ("members", index)
    if isinstance(panel.chairman, list):
        for index, chair in enumerate(panel.chairman):
            if chair is member:
                return ("chairman", index)
    return next(((role,) for role in ("chairman", "critic", "planner") if getattr(panel, role) is member), ())


def is_own_host(provider: str, host: str) -> bool:
    """Whether `host` is one of the provider's own API hosts, or a subdomain of one."""
    owned = OWN_HOSTS.get(SAME_KEYS.get(provider, provider)) or json_provider_hosts().get(provider, ())
    host = host.lower().rstrip(".")
    return any(host == own or host.endswith(f".{own}") for own in owned)


def is_loopback(host: str) -> bool:
    """Whether a host names this machine: `localhost` or a loopback address (an IPv4 one
    written as IPv6 included). Only these spellings count: a name that a resolver may or may
    not send to this machine (`x.localhost`, `127.1`) is told about, which is the safe side."""
    host = host.lower().rstrip(".")
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def _key_variable(member: KeyedMember, provider: str) -> str | None:
    """The set variable whose value the call sends: the member's `api_key_env`, else the first
    set one of the provider's; None when it sends none."""
    if member.api_key_env:
        return member.api_key_env if os.environ.get(member.api_key_env) else None
    found = credentials(provider)
    names = found.variables() if found else AMBIENT.get(provider, (f"{provider.upper().replace('-', '_')}_API_KEY",))
    return next((name for name in names if name not in NOT_SECRET and os.environ.get(name)), None)


def endpoint_of(member: KeyedMember) -> str:
    """Where a member's calls go, for a message: its `api_base`'s host and port (never a path,
    a query or anything else the URL carries), else its provider's own API."""
    if member.api_base:
        parts = split_url(member.api_base)
        if parts.hostname:
            return parts.netloc.rpartition("@")[2] or parts.hostname
    return f"{provider_of(member.model) or 'openai'}'s own API"


def key_source(member: KeyedMember) -> str:
    """Which key a member's calls send, by its variable's name (never its value), as the
    gateway chooses it (`Gateway._api_key`): `the key in PROXY_KEY`, `no key (PROXY_KEY
    unset)`, or the provider's variable litellm reads."""
    if member.api_key_env:
        if os.environ.get(member.api_key_env):
            return f"the key in {member.api_key_env}"
        return f"no key ({member.api_key_env} unset)"
    provider = provider_of(member.model) or "openai"
    variable = _key_variable(member, provider)
    if variable is not None:
        return f"the key in {variable}"
    if member.api_base and provider == "openai":
        return "no key (OPENAI_API_KEY unset)"
    return "no key (its provider's key variables unset)"


@cache
def json_provider_hosts() -> dict[str, tuple[str, ...]]:
    """The host of each OpenAI-compatible provider litellm configures from `providers.json`."""
    root = litellm_dir()
    if root is None:
        return {}
    try:
        raw = json.loads((root / "llms" / "openai_like" / "providers.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(raw, dict):
        return {}
    hosts: dict[str, tuple[str, ...]] = {}
    for slug, config in raw.items():
        base = config.get("base_url") if isinstance(config, dict) else None
        host = split_url(base).hostname if isinstance(base, str) else None
        if host:
            hosts[str(slug)] = (host,)
    return hosts
