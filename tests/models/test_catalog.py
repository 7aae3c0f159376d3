"""The model catalog read from litellm's files: its rules on their own, then its verdicts
against litellm's own `get_llm_provider`, which is imported once for the whole module."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from panel_cli.models import catalog
from panel_cli.models.catalog import (
    UnknownModel,
    catalog_available,
    check_with_litellm,
    json_providers,
    known_providers,
    qualify_model,
)

LOCAL = "http://localhost:8000/v1"


def _clear_caches() -> None:
    for cached in (catalog.json_providers, catalog.known_providers, catalog.model_table):
        cached.cache_clear()


@pytest.fixture
def fake_litellm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A litellm install of our own making, so each rule is seen on a table we wrote."""
    root = tmp_path / "litellm"
    (root / "types").mkdir(parents=True)
    (root / "llms" / "openai_like").mkdir(parents=True)
    (root / "types" / "utils.py").write_text(
        textwrap.dedent(
            """\
            from enum import Enum

            class LlmProviders(str, Enum):
                OPENAI = "openai"
                ANTHROPIC = "anthropic"
                BEDROCK = "bedrock"
                OLLAMA = "ollama"  # a comment
                TEXT_COMPLETION_OPENAI = "text-completion-openai"

            LlmProvidersSet = {provider.value for provider in LlmProviders}
            """
        ),
        encoding="utf-8",
    )
    (root / "llms" / "openai_like" / "providers.json").write_text(
        json.dumps({"publicai": {"base_url": "https://api.publicai.co/v1", "api_key_env": "PUBLICAI_API_KEY"}}),
        encoding="utf-8",
    )
    table = {
        "sample_spec": {"litellm_provider": "one of the providers"},
        "gpt-4o": {"litellm_provider": "openai", "mode": "chat"},
        "gpt-latest": {"alias_of": "gpt-4o"},
        "gpt-3.5-turbo-instruct": {"litellm_provider": "text-completion-openai"},
        "claude-sonnet-4-5": {"litellm_provider": "anthropic", "aliases": ["claude-sonnet-latest"]},
        "claude-2": {"litellm_provider": "anthropic"},
        "ft:davinci-002": {"litellm_provider": "openai"},
        "anthropic.claude-v2": {"litellm_provider": "bedrock", "mode": "chat"},
        "bedrock/us-east-1/anthropic.claude-v2": {"litellm_provider": "bedrock"},
        "guard": {"litellm_provider": "bedrock", "mode": "guardrail"},
        "gemini-2.5-pro": {"litellm_provider": "vertex_ai-language-models"},
        "mistral/mistral-large-latest": {"litellm_provider": "mistral"},
        "azure/mistral-large-latest": {"litellm_provider": "azure"},
        "gemini/gemini-flash": {"litellm_provider": "gemini"},
        "fallback_generalizations": {
            "rules": [
                {"pattern": "^claude-[a-z]+-\\d+$", "model_info": {"litellm_provider": "anthropic"}},
                {"pattern": "^gpt-", "model_info": {"litellm_provider": "openai", "mode": "chat"}},
                {"pattern": "^broken(", "model_info": {"litellm_provider": "openai"}},
            ]
        },
    }
    (root / "model_prices_and_context_window_backup.json").write_text(json.dumps(table), encoding="utf-8")
    monkeypatch.setattr(catalog, "litellm_dir", lambda: root)
    _clear_caches()
    yield root
    _clear_caches()


@pytest.mark.parametrize(
    ("model", "api_base", "expected"),
    [
        ("demo/sage", None, "demo/sage"),
        ("openai/new-model", None, "openai/new-model"),
        ("ollama/llama3.1", None, "ollama/llama3.1"),
        ("publicai/some-model", None, "publicai/some-model"),
        ("gpt-4o", None, "openai/gpt-4o"),
        ("gpt-latest", None, "openai/gpt-latest"),
        ("claude-sonnet-latest", None, "anthropic/claude-sonnet-latest"),
        ("claude-sonnet-4-5", None, "anthropic/claude-sonnet-4-5"),
        ("claude-2", None, "anthropic_text/claude-2"),
        ("claude-fable-5", None, "anthropic/claude-fable-5"),
        ("gpt-3.5-turbo-instruct", None, "text-completion-openai/gpt-3.5-turbo-instruct"),
        ("ft:gpt-4o-mini:acme::id1", None, "openai/ft:gpt-4o-mini:acme::id1"),
        ("anthropic.claude-v2", None, "bedrock/anthropic.claude-v2"),
        ("gemini-2.5-pro", None, "vertex_ai/gemini-2.5-pro"),
        ("owner/name:" + "a" * 64, None, "replicate/owner/name:" + "a" * 64),
        ("my-model", LOCAL, "openai/my-model"),
        ("meta-llama/Llama-3.1-8B", LOCAL, "openai/meta-llama/Llama-3.1-8B"),
        ("gpt-4o", LOCAL, "openai/gpt-4o"),
        ("ollama/llama3.1", "http://localhost:11434", "ollama/llama3.1"),
    ],
)
def test_legal_models_are_qualified(fake_litellm: Path, model: str, api_base: str | None, expected: str) -> None:
    assert qualify_model(model, api_base) == expected


@pytest.mark.parametrize(
    ("model", "sentence"),
    [
        (
            "gpt-5-ultra",
            "'gpt-5-ultra' is not a model litellm knows; if it is an OpenAI model write openai/gpt-5-ultra"
            " (panel models lists the short names).",
        ),
        (
            "nosuchprovider/foo",
            "'nosuchprovider' is not a provider litellm knows (see https://docs.litellm.ai/docs/providers;"
            " panel models lists the short names).",
        ),
        (
            "antropic/claude-x",
            "'antropic' is not a provider litellm knows (did you mean anthropic/claude-x? panel models lists the short names).",
        ),
        ("sage", "'sage' is not a model litellm knows; did you mean demo/sage? (panel models lists the short names)."),
        (
            "mistral-large-latest",
            "'mistral-large-latest' is not a model litellm knows without its provider; did you mean"
            " mistral/mistral-large-latest? (panel models lists the short names).",
        ),
        (
            "openai/",
            "'openai/' names a provider but no model; write openai/<model> (panel models lists the short names).",
        ),
        (
            "anthropic",
            "'anthropic' names a provider but no model; write anthropic/<model> (panel models lists the short names).",
        ),
        (
            "ft:davinci-002",
            "'ft:davinci-002' is not a model litellm knows; if it is an OpenAI model write openai/ft:davinci-002"
            " (panel models lists the short names).",
        ),
        (
            "guard",
            "'guard' is not a model litellm knows; if it is an OpenAI model write openai/guard (panel models lists the short names).",
        ),
        (
            "us-east-1/anthropic.claude-v2",
            "'us-east-1' is not a provider litellm knows (see https://docs.litellm.ai/docs/providers;"
            " panel models lists the short names).",
        ),
    ],
)
def test_unknown_models_get_one_sentence(fake_litellm: Path, model: str, sentence: str) -> None:
    with pytest.raises(UnknownModel) as caught:
        qualify_model(model, None)
    assert str(caught.value) == sentence


def test_only_well_formed_routing_rules_count(fake_litellm: Path) -> None:
    table = catalog.model_table()
    assert table is not None
    assert [provider for _, provider in table.routes] == ["anthropic"]
    assert "sample_spec" not in table.bare


def test_the_catalog_reads_litellm_enum_json_providers_and_demo(fake_litellm: Path) -> None:
    assert catalog.known_providers() == {
        "openai",
        "anthropic",
        "bedrock",
        "ollama",
        "text-completion-openai",
        "publicai",
        "demo",
    }
    assert catalog.json_providers() == {"publicai": "PUBLICAI_API_KEY"}
    assert catalog_available()


@pytest.mark.parametrize("missing", ["types/utils.py", "model_prices_and_context_window_backup.json"])
def test_an_unreadable_catalog_lets_every_model_through(fake_litellm: Path, missing: str) -> None:
    (fake_litellm / missing).unlink()
    _clear_caches()
    assert not catalog_available()
    assert qualify_model("gpt-5-ultra", None) == "gpt-5-ultra"
    assert qualify_model("nosuchprovider/foo", None) == "nosuchprovider/foo"


def test_a_moved_enum_counts_as_unreadable(fake_litellm: Path) -> None:
    (fake_litellm / "types" / "utils.py").write_text("class Providers:\n    OPENAI = 'openai'\n", encoding="utf-8")
    _clear_caches()
    assert not catalog_available()
    assert qualify_model("sage", None) == "sage"


def test_no_litellm_installed_lets_every_model_through(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catalog, "litellm_dir", lambda: None)
    _clear_caches()
    try:
        assert not catalog_available()
        assert qualify_model("whatever", None) == "whatever"
    finally:
        _clear_caches()


def test_check_with_litellm_turns_a_refusal_into_the_same_sentence(fake_litellm: Path) -> None:
    def get_llm_provider(model: str, api_base: str | None = None) -> tuple[str, str, None, None]:
        if model.startswith("openai/"):
            return model[7:], "openai", None, None
        raise ValueError("LLM Provider NOT provided")

    fake = SimpleNamespace(provider_list=["openai", "anthropic"], get_llm_provider=get_llm_provider)
    assert check_with_litellm(fake, "openai/gpt-4o", None) is None
    assert check_with_litellm(fake, "sage", None) == (
        "'sage' is not a model litellm knows; did you mean demo/sage? (panel models lists the short names)."
    )
    assert check_with_litellm(fake, "nosuch/foo", None) == (
        "'nosuch' is not a provider litellm knows (see https://docs.litellm.ai/docs/providers; panel models lists the short names)."
    )


def test_qualifying_never_imports_litellm() -> None:
    """`panel validate` runs these checks and must stay clear of litellm's six-second import."""
    code = (
        "import sys\n"
        "from panel_cli.models.catalog import qualify_model, catalog_available\n"
        "from panel_cli.llm.providers import missing_keys, keys_in_use, key_status\n"
        "assert catalog_available()\n"
        "print(qualify_model('gpt-4o-mini'), qualify_model('openai/new-model'), key_status('anthropic'))\n"
        "print('litellm' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    first, second = result.stdout.splitlines()
    assert first.split()[:2] == ["openai/gpt-4o-mini", "openai/new-model"]
    assert second == "False"


# --- against litellm itself ------------------------------------------------------------


@pytest.fixture(scope="module")
def litellm() -> Iterator[ModuleType]:
    """litellm as a run loads it: offline and quiet."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        patch.setenv("LITELLM_OFFLINE_MODE", "True")
        from panel_cli.llm.gateway import load_litellm

        yield load_litellm()


def test_the_catalog_reads_litellms_own_provider_list(litellm: ModuleType) -> None:
    """The providers the catalog reads from litellm's files (a regular expression over its
    `LlmProviders` enum, its `providers.json`) are exactly those litellm itself lists: a litellm
    release that moves or reshapes either fails here, instead of every model id passing
    through unchecked until the run's own check."""
    from litellm.llms.openai_like.json_loader import JSONProviderRegistry

    _clear_caches()
    slugs = JSONProviderRegistry.list_providers()
    listed = {str(getattr(name, "value", name)) for name in litellm.provider_list}
    assert "openai" in listed and "anthropic" in listed
    assert known_providers() == listed | set(slugs) | {"demo"}
    keys = {slug: config.api_key_env for slug in slugs if (config := JSONProviderRegistry.get(slug)) is not None}
    assert slugs and json_providers() == keys
    assert catalog_available()


def test_demo_personas_are_routed_without_asking_litellm(litellm: ModuleType) -> None:
    """The gateway serves demo personas itself; litellm has never heard of them."""
    assert qualify_model("demo/sage", None) == "demo/sage"
    assert check_with_litellm(litellm, "demo/sage", None) is None
    with pytest.raises(litellm.exceptions.BadRequestError):
        litellm.get_llm_provider(model="demo/sage")


# (model as typed, api_base, qualified id or None for unknown, the provider litellm routes it to)
CASES: list[tuple[str, str | None, str | None, str | None]] = [
    ("gpt-4o-mini", None, "openai/gpt-4o-mini", "openai"),
    ("gpt-4o", None, "openai/gpt-4o", "openai"),
    ("o3", None, "openai/o3", "openai"),
    ("claude-sonnet-4-5", None, "anthropic/claude-sonnet-4-5", "anthropic"),
    ("claude-haiku-4-5", None, "anthropic/claude-haiku-4-5", "anthropic"),
    ("claude-newfamily-5", None, "anthropic/claude-newfamily-5", "anthropic"),
    ("gemini-2.5-pro", None, "vertex_ai/gemini-2.5-pro", "vertex_ai"),
    ("gemini-2.5-flash", None, "vertex_ai/gemini-2.5-flash", "vertex_ai"),
    ("command-a-03-2025", None, "cohere_chat/command-a-03-2025", "cohere_chat"),
    (
        "us.anthropic.claude-3-5-sonnet-20240620-v1:0",
        None,
        "bedrock/us.anthropic.claude-3-5-sonnet-20240620-v1:0",
        "bedrock",
    ),
    ("ft:gpt-4o-mini-2024-07-18:acme::abc123", None, "openai/ft:gpt-4o-mini-2024-07-18:acme::abc123", "openai"),
    ("openai/gpt-4o", None, "openai/gpt-4o", "openai"),
    ("openai/new-model", None, "openai/new-model", "openai"),
    ("anthropic/claude-sonnet-4-5", None, "anthropic/claude-sonnet-4-5", "anthropic"),
    ("gemini/gemini-2.5-flash", None, "gemini/gemini-2.5-flash", "gemini"),
    ("mistral/mistral-large-latest", None, "mistral/mistral-large-latest", "mistral"),
    ("deepseek/deepseek-chat", None, "deepseek/deepseek-chat", "deepseek"),
    ("groq/llama-3.3-70b-versatile", None, "groq/llama-3.3-70b-versatile", "groq"),
    ("xai/grok-4", None, "xai/grok-4", "xai"),
    (
        "together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo",
        None,
        "together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo",
        "together_ai",
    ),
    (
        "fireworks_ai/accounts/fireworks/models/llama-v3p1-8b",
        None,
        "fireworks_ai/accounts/fireworks/models/llama-v3p1-8b",
        "fireworks_ai",
    ),
    ("perplexity/sonar-pro", None, "perplexity/sonar-pro", "perplexity"),
    ("cohere/command-r-plus", None, "cohere/command-r-plus", "cohere"),
    ("openrouter/anthropic/claude-3.5-sonnet", None, "openrouter/anthropic/claude-3.5-sonnet", "openrouter"),
    ("ollama/llama3.1", None, "ollama/llama3.1", "ollama"),
    ("ollama_chat/qwen2.5", None, "ollama_chat/qwen2.5", "ollama_chat"),
    ("hosted_vllm/x", None, "hosted_vllm/x", "hosted_vllm"),
    ("azure/x", None, "azure/x", "azure"),
    ("azure_ai/x", None, "azure_ai/x", "azure_ai"),
    (
        "bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0",
        None,
        "bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0",
        "bedrock",
    ),
    ("vertex_ai/gemini-2.5-pro", None, "vertex_ai/gemini-2.5-pro", "vertex_ai"),
    ("cerebras/llama3.1-8b", None, "cerebras/llama3.1-8b", "cerebras"),
    ("lm_studio/x", None, "lm_studio/x", "lm_studio"),
    ("publicai/x", None, "publicai/x", "publicai"),
    ("litellm_proxy/x", None, "litellm_proxy/x", "litellm_proxy"),
    ("nosuchprovider/foo", None, None, None),
    ("gpt-5-ultra", None, None, None),
    ("sage", None, None, None),
    ("skeptic", None, None, None),
    ("antropic/claude-x", None, None, None),
    ("mistral-large-latest", None, None, None),
    ("my-local-model", LOCAL, "openai/my-local-model", "openai"),
    ("meta-llama/Llama-3.1-8B-Instruct", LOCAL, "openai/meta-llama/Llama-3.1-8B-Instruct", "openai"),
    ("nosuchprovider/foo", LOCAL, "openai/nosuchprovider/foo", "openai"),
    ("gpt-4o", "http://localhost:4000", "openai/gpt-4o", "openai"),
    ("claude-sonnet-4-5", "http://localhost:4000", "anthropic/claude-sonnet-4-5", "anthropic"),
    ("ollama/llama3.1", "http://localhost:11434", "ollama/llama3.1", "ollama"),
]


@pytest.mark.parametrize(("model", "api_base", "qualified", "provider"), CASES)
def test_verdicts_agree_with_litellm(
    litellm: ModuleType, model: str, api_base: str | None, qualified: str | None, provider: str | None
) -> None:
    if qualified is None:
        with pytest.raises(UnknownModel) as caught:
            qualify_model(model, api_base)
        with pytest.raises(litellm.exceptions.BadRequestError):
            litellm.get_llm_provider(model=model, api_base=api_base)
        assert check_with_litellm(litellm, model, api_base) == str(caught.value)
        return
    assert qualify_model(model, api_base) == qualified
    assert litellm.get_llm_provider(model=qualified, api_base=api_base)[1] == provider
    assert check_with_litellm(litellm, qualified, api_base) is None
    if "/" not in model and api_base is None:
        # A bare name goes where litellm itself would send it.
        assert litellm.get_llm_provider(model=model)[1] == provider


def test_every_name_in_litellms_table_gets_litellms_verdict(litellm: ModuleType) -> None:
    """Each name litellm lists (aliases included) resolves, or not, as litellm resolves it."""
    logs_in = litellm.constants.PROVIDERS_THAT_AUTHENTICATE_ON_PROVIDER_INFO
    disagreements = []
    names = [name for name in litellm.model_cost if name.partition("/")[0] not in logs_in]
    for name in names:
        try:
            ours = qualify_model(name, None)
        except UnknownModel:
            ours = None
        try:
            theirs = litellm.get_llm_provider(model=name)[1]
        except Exception:
            theirs = None
        if ours is None or theirs is None:
            if ours != theirs:
                disagreements.append((name, ours, theirs))
        elif ours != name and ours.partition("/")[0] != theirs:
            disagreements.append((name, ours, theirs))
    assert len(names) > 1000
    assert disagreements == []


def test_a_provider_that_logs_in_is_not_asked(litellm: ModuleType) -> None:
    """Looking up github_copilot starts a device login over the network; its prefix is enough."""
    assert qualify_model("github_copilot/gpt-4o", None) == "github_copilot/gpt-4o"
    assert check_with_litellm(litellm, "github_copilot/gpt-4o", None) is None
