"""Key checks without litellm: every missing key at once, and the values to redact."""

from __future__ import annotations

import os
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from panel_cli.llm.key_hosts import OWN_HOSTS, is_loopback, is_own_host, key_sent_elsewhere
from panel_cli.llm.providers import (
    AMBIENT,
    PROVIDER_KEYS,
    key_status,
    keys_in_use,
    missing_keys,
    missing_keys_litellm,
)
from panel_cli.models.aliases import split_url


@dataclass
class M:
    name: str
    model: str
    api_base: str | None = None
    api_key_env: str | None = None


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start every test from an environment holding no provider credential at all."""
    named = {name for found in PROVIDER_KEYS.values() for name in (*found.variables(), found.endpoint or "")}
    named |= {name for names in AMBIENT.values() for name in names}
    for name in list(os.environ):
        if name in named or name.endswith(("_API_KEY", "_TOKEN")) or name.startswith(("AWS_", "AZURE_")):
            monkeypatch.delenv(name)


def test_every_missing_key_is_reported_at_once() -> None:
    members = [
        M("claude", "anthropic/claude-sonnet-4-5"),
        M("gemini", "gemini/gemini-2.5-flash"),
        M("gpt", "azure/gpt-4o"),
    ]
    assert missing_keys(members) == [
        "Member 'claude' (anthropic/claude-sonnet-4-5) needs ANTHROPIC_API_KEY.",
        "Member 'gemini' (gemini/gemini-2.5-flash) needs GEMINI_API_KEY or GOOGLE_API_KEY.",
        "Member 'gpt' (azure/gpt-4o) needs AZURE_API_KEY and AZURE_API_BASE.",
    ]


def test_an_empty_api_key_env_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-present")
    assert missing_keys([M("gpt", "openai/gpt-4o", api_key_env="MY_KEY")]) == [
        "Member 'gpt' (openai/gpt-4o) needs the environment variable MY_KEY (its api_key_env)."
    ]
    monkeypatch.setenv("MY_KEY", "k")
    assert missing_keys([M("gpt", "anthropic/claude-sonnet-4-5", api_key_env="MY_KEY")]) == []


def test_a_variable_set_but_empty_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "")
    assert missing_keys([M("claude", "anthropic/claude-sonnet-4-5")]) == [
        "Member 'claude' (anthropic/claude-sonnet-4-5) needs ANTHROPIC_API_KEY."
    ]


@pytest.mark.parametrize(
    "member",
    [
        M("llama", "ollama/llama3.1", api_base="http://localhost:11434"),
        M("local", "hosted_vllm/x"),
        M("sage", "demo/sage"),
        M("studio", "lm_studio/x"),
        M("proxy", "openai/my-model", api_base="http://localhost:8000/v1"),
        M("aws", "bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0"),
        M("gcp", "vertex_ai/gemini-2.5-pro"),
        M("bare", "gpt-4o"),
        M("hf", "huggingface/some/model"),
    ],
)
def test_members_we_cannot_fault_offline_pass(member: M) -> None:
    assert missing_keys([member]) == []


@pytest.mark.parametrize(
    ("variables", "model", "expected"),
    [
        ({"ANTHROPIC_AUTH_TOKEN": "t"}, "anthropic/claude-sonnet-4-5", []),
        ({"GOOGLE_API_KEY": "g"}, "gemini/gemini-2.5-flash", []),
        ({"OR_API_KEY": "o"}, "openrouter/a/b", []),
        ({"TOGETHER_AI_TOKEN": "t"}, "together_ai/x", []),
        ({"AZURE_OPENAI_API_KEY": "a", "AZURE_API_BASE": "https://x.openai.azure.com"}, "azure/gpt-4o", []),
        (
            {"AZURE_TENANT_ID": "t", "AZURE_CLIENT_ID": "c", "AZURE_CLIENT_SECRET": "s", "AZURE_API_BASE": "https://x"},
            "azure/gpt-4o",
            [],
        ),
        (
            {"AZURE_TENANT_ID": "t", "AZURE_CLIENT_ID": "c", "AZURE_API_BASE": "https://x"},
            "azure/gpt-4o",
            ["Member 'm' (azure/gpt-4o) needs AZURE_API_KEY."],
        ),
        ({"AZURE_API_KEY": "a"}, "azure/gpt-4o", ["Member 'm' (azure/gpt-4o) needs AZURE_API_BASE."]),
        (
            {},
            "text-completion-openai/gpt-3.5-turbo-instruct",
            ["Member 'm' (text-completion-openai/gpt-3.5-turbo-instruct) needs OPENAI_API_KEY."],
        ),
        ({}, "cohere_chat/command-a-03-2025", ["Member 'm' (cohere_chat/command-a-03-2025) needs COHERE_API_KEY."]),
        ({}, "publicai/x", ["Member 'm' (publicai/x) needs PUBLICAI_API_KEY."]),
    ],
)
def test_providers_accept_what_litellm_reads(
    monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], model: str, expected: list[str]
) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert missing_keys([M("m", model)]) == expected


def test_an_api_base_stands_in_for_the_endpoint_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert missing_keys([M("gpt", "azure/gpt-4o", api_base="https://x.openai.azure.com")]) == [
        "Member 'gpt' (azure/gpt-4o) needs AZURE_API_KEY."
    ]


@pytest.mark.parametrize(
    ("variables", "args", "status"),
    [
        ({"ANTHROPIC_API_KEY": "k"}, ("anthropic",), "set (ANTHROPIC_API_KEY)"),
        ({}, ("anthropic",), "missing (ANTHROPIC_API_KEY)"),
        ({}, ("gemini",), "missing (GEMINI_API_KEY or GOOGLE_API_KEY)"),
        ({"AZURE_API_KEY": "k"}, ("azure",), "missing (AZURE_API_BASE)"),
        ({"AZURE_API_KEY": "k"}, ("azure", None, "https://x"), "set (AZURE_API_KEY)"),
        ({}, ("ollama",), "not needed"),
        ({}, ("demo",), "not needed"),
        ({}, ("openai", None, "http://localhost:8000/v1"), "not needed (custom api_base)"),
        ({"OPENAI_API_KEY": "k"}, ("openai", None, "http://localhost:8000/v1"), "set (OPENAI_API_KEY)"),
        ({}, ("bedrock",), "unknown"),
        ({}, ("vertex_ai",), "unknown"),
        ({}, ("nosuchprovider",), "unknown"),
        ({"MINE": "k"}, ("openai", "MINE"), "set (MINE)"),
        ({}, ("openai", "MINE"), "missing (MINE)"),
    ],
)
def test_key_status_names_variables_never_values(
    monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], args: tuple[Any, ...], status: str
) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert key_status(*args) == status


def test_keys_in_use_collects_every_secret_a_member_may_send(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.setenv("MY_PROXY_KEY", "x")
    monkeypatch.setenv("AZURE_API_KEY", "az-key")
    monkeypatch.setenv("AZURE_CLIENT_SECRET", "az-secret")
    monkeypatch.setenv("AZURE_CLIENT_ID", "client-id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    monkeypatch.setenv("HUGGINGFACE_API_KEY", "hf-key")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "not-used-by-any-member")
    members = [
        M("a", "openai/gpt-4o"),
        M("b", "openai/local", api_base="http://localhost:8000/v1"),
        M("c", "anthropic/claude-sonnet-4-5", api_key_env="MY_PROXY_KEY"),
        M("d", "azure/gpt-4o"),
        M("e", "bedrock/anthropic.claude-v2"),
        M("f", "huggingface/some/model"),
    ]
    used = keys_in_use(members)
    assert sorted(used) == sorted(["sk-openai", "x", "az-key", "az-secret", "aws-secret", "hf-key"])
    assert len(used) == len(set(used))


def test_missing_keys_litellm_asks_only_about_providers_we_do_not_know(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, str | None]] = []

    def validate_environment(model: str, api_base: str | None = None) -> dict[str, Any]:
        asked.append((model, api_base))
        if model.startswith("cloudflare/"):
            return {"keys_in_environment": False, "missing_keys": ["CLOUDFLARE_API_KEY", "CLOUDFLARE_API_BASE"]}
        if model.startswith("huggingface/"):
            return {"keys_in_environment": False, "missing_keys": ["HUGGINGFACE_API_KEY"]}
        return {"keys_in_environment": True, "missing_keys": []}

    fake = SimpleNamespace(validate_environment=validate_environment)
    members = [
        M("claude", "anthropic/claude-sonnet-4-5"),
        M("aws", "bedrock/anthropic.claude-v2"),
        M("llama", "ollama/llama3.1"),
        M("mine", "nosuch/x", api_key_env="MINE"),
        M("cf", "cloudflare/@cf/meta/llama-3-8b-instruct"),
        M("hf", "huggingface/some/model", api_base="https://my-endpoint"),
        M("bare", "some-model"),
    ]
    assert missing_keys_litellm(fake, members) == [
        "Member 'cf' (cloudflare/@cf/meta/llama-3-8b-instruct) needs CLOUDFLARE_API_KEY.",
        "Member 'hf' (huggingface/some/model) needs HUGGINGFACE_API_KEY.",
    ]
    assert asked == [
        ("cloudflare/@cf/meta/llama-3-8b-instruct", None),
        ("huggingface/some/model", "https://my-endpoint"),
        ("some-model", None),
    ]


def test_missing_keys_litellm_on_litellm_itself() -> None:
    """The shape of litellm's `validate_environment` answer, on the real thing."""
    import litellm

    members = [M("hf", "huggingface/meta-llama/Llama-3.1-8B-Instruct"), M("claude", "anthropic/claude-sonnet-4-5")]
    assert missing_keys_litellm(litellm, members) == [
        "Member 'hf' (huggingface/meta-llama/Llama-3.1-8B-Instruct) needs HUGGINGFACE_API_KEY."
    ]


def test_panel_members_are_checked_as_they_are(monkeypatch: pytest.MonkeyPatch) -> None:
    from panel_cli.config import Member

    members = [Member(name="claude", model="anthropic/claude-sonnet-4-5"), Member(name="sage", model="demo/sage")]
    assert missing_keys(members) == ["Member 'claude' (anthropic/claude-sonnet-4-5) needs ANTHROPIC_API_KEY."]
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    assert missing_keys(members) == []
    assert keys_in_use(members) == ["k"]


# Where a key goes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("member", "env", "sent"),
    [
        (M("a", "openai/anything", "http://some-host/"), {"OPENAI_API_KEY": "k"}, ("OPENAI_API_KEY", "some-host")),
        (M("a", "openai/anything", "http://some-host/"), {}, None),  # the gateway sends a placeholder
        (M("a", "openai/gpt-4o", "https://api.openai.com/v1"), {"OPENAI_API_KEY": "k"}, None),
        (
            M("a", "openai/gpt-4o", "https://api.openai.com.evil.example/v1"),
            {"OPENAI_API_KEY": "k"},
            ("OPENAI_API_KEY", "api.openai.com.evil.example"),
        ),
        (M("a", "openai/gpt-4o"), {"OPENAI_API_KEY": "k"}, None),
        (
            M("c", "anthropic/claude", "https://evil.example"),
            {"ANTHROPIC_API_KEY": "k"},
            ("ANTHROPIC_API_KEY", "evil.example"),
        ),
        (
            M("c", "anthropic/claude", "https://evil.example"),
            {"ANTHROPIC_AUTH_TOKEN": "t"},
            ("ANTHROPIC_AUTH_TOKEN", "evil.example"),
        ),
        (
            M("p", "openai/x", "https://proxy.example", "MY_PROXY_KEY"),
            {"MY_PROXY_KEY": "k"},
            ("MY_PROXY_KEY", "proxy.example"),
        ),
        (M("p", "anthropic/claude", None, "MY_PROXY_KEY"), {"MY_PROXY_KEY": "k"}, None),
        (M("z", "azure/gpt", "https://mine.openai.azure.com"), {"AZURE_API_KEY": "k"}, None),
        (M("z", "azure/gpt", "https://evil.example"), {"AZURE_API_KEY": "k"}, ("AZURE_API_KEY", "evil.example")),
        (M("o", "ollama/llama3", "http://gpu-box:11434"), {}, None),
        (M("o", "ollama/llama3", "http://gpu-box:11434"), {"OLLAMA_API_KEY": "k"}, ("OLLAMA_API_KEY", "gpu-box")),
        (M("d", "demo/sage", "http://evil.example"), {"OPENAI_API_KEY": "k"}, None),
    ],
)
def test_the_key_a_call_sends_to_a_host_not_its_providers(monkeypatch, member, env, sent) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    found = key_sent_elsewhere(member)
    assert (None if found is None else (found.variable, found.host)) == sent


def test_a_json_configured_providers_own_host_comes_from_litellms_file(monkeypatch) -> None:
    monkeypatch.setenv("PUBLICAI_API_KEY", "k")
    assert key_sent_elsewhere(M("p", "publicai/m", "https://api.publicai.co/v1")) is None
    assert key_sent_elsewhere(M("p", "publicai/m", "https://evil.example/v1")).variable == "PUBLICAI_API_KEY"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("LOCALHOST.", True),
        ("ollama.localhost", False),
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("localhost.evil.example", False),
        ("10.0.0.1", False),
        ("0x7f000001", False),  # resolves to 127.0.0.1, but only plain spellings count: a notice too many is safe
        ("some-host", False),
    ],
)
def test_loopback_is_this_machine_by_name_or_address(host, loopback) -> None:
    assert is_loopback(host) is loopback


def test_every_provider_with_a_known_key_has_its_own_hosts_listed() -> None:
    assert set(PROVIDER_KEYS) <= set(OWN_HOSTS)


def test_the_own_hosts_agree_with_litellms_defaults() -> None:
    """Where litellm names a provider's default endpoint (`get_llm_provider`), its host is one
    of ours; every host of ours is one litellm's code names."""
    import litellm

    from panel_cli.models.catalog import litellm_dir

    for provider in OWN_HOSTS:
        default = litellm.get_llm_provider(model=f"{provider}/some-model")[3]
        if default:
            assert is_own_host(provider, split_url(default).hostname), (provider, default)
    root = litellm_dir()
    source = "\n".join(path.read_text(encoding="utf-8") for path in (root / "llms").rglob("*.py"))
    for path in ("main.py", "litellm_core_utils/get_llm_provider_logic.py"):
        source += (root / path).read_text(encoding="utf-8")
    unnamed = [host for hosts in OWN_HOSTS.values() for host in hosts if host not in source]
    assert unnamed == []
