"""What running a panel does besides calling each member's provider: each command it starts
(where, and with which environment), each key it sends to a host other than that provider's
own, each header it sends to a tool server.

A panel file is code. This is what `panel validate` lists before someone runs a file they did
not write, and what `panel resume` shows, and asks about, before it continues a run that
`panel history import` brought in: that run's panel is the other file's, read by nobody here.
"""

from __future__ import annotations

from panel_cli.config import Panel
from panel_cli.redact import REDACTED, named_like_a_secret


def beyond_the_providers(panel: Panel) -> list[str]:
    """One line each, as `panel validate` prints them under "beyond calling the providers"."""
    from panel_cli.llm.key_hosts import keys_sent_elsewhere
    from panel_cli.models.aliases import split_url
    from panel_cli.tools.checks import started

    lines: list[str] = []
    hidden = set(panel.expanded_values)
    for name in started(panel):
        server = panel.tools[name]
        line = panel.line_of(("tools", name))
        where = f"tools.{name}" if line is None else f"tools.{name}, line {line}"
        if server.command is not None:
            folder = f" in {server.cwd}" if server.cwd else ""
            env = ", ".join(
                f"{key}={_shown(panel, ('tools', name, 'env', key), value, hidden)}"
                for key, value in server.env.items()
            )
            given = f" with {env}" if env else ""
            lines.append(f"starts {server.target}{folder}{given} ({where})")
        elif server.headers:
            host = split_url(server.target).hostname
            carried = [_yours(panel.variables_of(("tools", name, "headers", header))) for header in server.headers]
            carrying = " and ".join(source for source in carried if source)
            carrying = f", carrying {carrying}" if carrying else ""
            lines.append(f"sends the headers {', '.join(server.headers)} to {host}{carrying} ({where})")
    for sent, line in keys_sent_elsewhere(panel):
        host = f"{sent.host} (this machine)" if sent.loopback else sent.host
        at = f", line {line}" if line is not None else ""
        lines.append(f"sends {sent.variable} to {host}, not to {sent.provider}'s own API (member {sent.member}{at})")
    return lines


def _shown(panel: Panel, loc: tuple[str, ...], value: str, hidden: set[str]) -> str:
    """A value handed to a command as a person may read it: where a `${VAR}` came from (`your
    ${OPENAI_API_KEY}`: the user's own environment), never what it holds; a value named like a
    secret hidden; any other value as the file wrote it (`PYTHONSTARTUP=/tmp/x.py` matters)."""
    yours = _yours(panel.variables_of(loc))
    if yours:
        return yours
    return REDACTED if named_like_a_secret(loc[-1]) or value in hidden else value


def _yours(variables: list[str]) -> str:
    return "your " + " and ".join(f"${{{name}}}" for name in variables) if variables else ""
