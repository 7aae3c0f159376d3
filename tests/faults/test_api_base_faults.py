"""Credentials inside an `api_base` (or a tool server's `url`) are refused, however the URL hides
them: the URL is shown, stored and quoted in error reports, so a password in it would leak. The
check reads the URL as the HTTP client will (the URL library), not with a pattern."""

from __future__ import annotations

import pytest

from panel_cli.config import parse_panel
from panel_cli.errors import ConfigError

PASSWORD = "hunter2"
HIDDEN_PASSWORDS = [
    f"http://user:{PASSWORD}/x@evil.example/v1",  # a '/' in the password ends the authority early
    f"http://user:{PASSWORD}?x@evil.example/v1",
    f"http://user:{PASSWORD}#x@evil.example/v1",
    f"//user:{PASSWORD}@evil.example/v1",  # no scheme
    f"user:{PASSWORD}@evil.example:8000/v1",
    f"https://{PASSWORD}@evil.example",  # a token as the user
    f"http://user:{PASSWORD}%40x@evil.example",  # a percent-encoded '@'
    f"http://user:{PASSWORD}\\@evil.example",
]


def error_of(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_panel(text, "p.yaml")
    return caught.value.message


@pytest.mark.parametrize("url", HIDDEN_PASSWORDS)
def test_a_password_in_api_base_is_refused_however_it_is_written(url):
    message = error_of(f"members:\n  - name: a\n    model: openai/x\n    api_base: '{url}'\n")
    assert message == (
        "p.yaml, line 4: members[0].api_base: a user or password in the URL is not supported; "
        "put the key in an environment variable and name it with api_key_env."
    )
    assert PASSWORD not in message


@pytest.mark.parametrize("url", HIDDEN_PASSWORDS[:3])
def test_a_password_in_a_tool_servers_url_is_refused_too(url):
    message = error_of(f"members:\n  - name: a\n    model: openai/x\ntools:\n  t:\n    url: '{url}'\n")
    assert message.startswith("p.yaml, line 6: tools.t.url: a user or password in the URL is not supported")
    assert PASSWORD not in message


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost:11434",
        "https://api.example.com/v1?team=a",
        "http://[::1]:8080/v1",
        "http://localhost:8787/ai/run/@cf/meta/llama-3",  # '@' in a path (Cloudflare's model names)
        "localhost:11434",
    ],
)
def test_an_api_base_without_credentials_is_accepted(url):
    panel = parse_panel(f"members:\n  - name: a\n    model: openai/x\n    api_base: '{url}'\n", "p.yaml")
    assert panel.members[0].api_base == url


@pytest.mark.parametrize("field", ["api_base", "url"])
def test_a_port_that_is_no_number_is_refused_as_such(field):
    text = (
        "members:\n  - name: a\n    model: openai/x\n    api_base: 'http://host:abc/v1'\n"
        if field == "api_base"
        else "members:\n  - name: a\n    model: openai/x\ntools:\n  t:\n    url: 'http://host:abc/v1'\n"
    )
    assert error_of(text).endswith(": the port in the URL is not a number.")
