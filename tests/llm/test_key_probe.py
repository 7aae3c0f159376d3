"""Which key goes to a member's `api_base`, asked of litellm (`panel_cli.llm.key_probe`) and
checked against what litellm really sends, for every provider it lists."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from panel_cli.llm.key_hosts import keys_sent_by
from panel_cli.models.catalog import litellm_dir
from tests.helpers import cli, run_python
from tests.llm.test_providers import M

TRUTH = Path(__file__).with_name("litellm_key_truth.py")
# Every name litellm's provider code may read a key from (its proxy server left out).
KEY_NAME = re.compile(r"""["']([A-Z][A-Z0-9_]*(?:_KEY|APIKEY|_TOKEN|_SECRET|_PASSWORD|_CREDENTIALS|_PASSWD))["']""")


def litellm_key_names() -> list[str]:
    root = litellm_dir()
    assert root is not None
    names: set[str] = set()
    for path in root.rglob("*.py"):
        if "proxy" not in path.relative_to(root).parts:
            names.update(KEY_NAME.findall(path.read_text(encoding="utf-8", errors="replace")))
    return sorted(names)


def network_namespace() -> list[str]:
    """`unshare --net` with loopback up, where this machine allows it."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs unshare and ip (util-linux, iproute2) for a network namespace")
    check = subprocess.run(["unshare", "--net", "true"], capture_output=True, check=False)
    if check.returncode != 0:
        pytest.skip("this machine refuses a network namespace")
    return ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$0" "$@"']


@pytest.mark.subprocess
def test_the_variable_named_is_the_one_litellm_sends_for_every_provider(monkeypatch):
    import litellm

    names = litellm_key_names()
    for name in names:
        monkeypatch.setenv(name, f"truth-{name}-")
    done = subprocess.run(
        [*network_namespace(), sys.executable, str(TRUTH)], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    truth: dict[str, list[str]] = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(truth) == {getattr(p, "value", p) for p in litellm.provider_list}
    assert sum(bool(sent) for sent in truth.values()) > 100, "most providers send a key to an api_base"

    members = [M(provider, f"{provider}/m", "http://evil.example/v1") for provider in truth]
    named = {member.name: sent for member, sent in zip(members, keys_sent_by(members), strict=True)}

    wrong = {
        provider: (sorted(named[provider].variable.split(" and ")) if named[provider] else [], sent)
        for provider, sent in truth.items()
        if (sorted(named[provider].variable.split(" and ")) if named[provider] else []) != sent
    }
    assert wrong == {}, "named by panel, sent by litellm"
    assert named["custom_openai"].variable == "OPENAI_API_KEY"
    assert named["datarobot"].variable == "DATAROBOT_API_TOKEN"


EVIL = """name: keys
question: q?
members:
  - {name: custom, model: custom_openai/x, api_base: "http://evil.example/v1"}
  - {name: aio, model: aiohttp_openai/x, api_base: "http://evil.example/v1"}
  - {name: xinf, model: xinference/x, api_base: "http://evil.example/v1"}
  - {name: robot, model: datarobot/x, api_base: "http://evil.example/v1"}
  - {name: jurassic, model: ai21/x, api_base: "http://evil.example/v1"}
  - {name: gpt, model: openai/gpt-4o}
"""


@pytest.mark.subprocess
def test_validate_names_the_key_each_route_sends_to_another_host(monkeypatch, tmp_path):
    for name in ("OPENAI_API_KEY", "DATAROBOT_API_TOKEN", "AI21_API_KEY"):
        monkeypatch.setenv(name, f"secret-value-of-{name}")
    path = tmp_path / "p.yaml"
    path.write_text(EVIL)
    outcome = cli("validate", str(path))
    assert outcome.exit_code == 0, outcome.output
    section = outcome.stdout.split("beyond calling the providers:\n", 1)[1].splitlines()
    assert section == [
        f"  sends {variable} to evil.example, not to {provider}'s own API (member {member}, line {line})"
        for variable, provider, member, line in [
            ("OPENAI_API_KEY", "custom_openai", "custom", 4),
            ("OPENAI_API_KEY", "aiohttp_openai", "aio", 5),
            ("OPENAI_API_KEY", "xinference", "xinf", 6),
            ("DATAROBOT_API_TOKEN", "datarobot", "robot", 7),
            ("OPENAI_API_KEY", "ai21", "jurassic", 8),
        ]
    ]
    assert "secret-value-of" not in outcome.output


@pytest.mark.subprocess
def test_validate_of_a_demo_panel_never_loads_litellm(tmp_path):
    path = tmp_path / "demo.yaml"
    path.write_text("name: d\nmembers:\n  - {name: a, model: demo/sage, api_base: 'http://evil.example/v1'}\n")
    result = run_python(
        "import sys\n"
        f"sys.argv = ['panel', 'validate', {str(path)!r}]\n"
        "from panel_cli.cli.app import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('LITELLM' if any(m == 'litellm' or m.startswith('litellm.') for m in sys.modules) else 'NONE')\n"
    )
    assert result.stdout.splitlines()[-1] == "NONE", result.stderr


@pytest.mark.subprocess
def test_a_proxy_in_the_environment_does_not_hide_the_key(monkeypatch):
    """The probe's call goes to its own server here; a proxy setting must not carry it away
    (the audit hook would stop it, and no key would be named)."""
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    monkeypatch.setenv("OPENAI_API_KEY", "secret-value")
    (sent,) = keys_sent_by([M("c", "custom_openai/x", "http://evil.example/v1")])
    assert sent is not None and sent.variable == "OPENAI_API_KEY"
