"""What `panel validate` and every run check of a panel's tools and attachments before anything
starts: each attached file can be read as text, each server's command exists, and a server no
member names is pointed out (it is never started)."""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any

from panel_cli.config import Panel, ToolServer
from panel_cli.errors import ConfigError, UserError
from panel_cli.tools.attachments import read_attachments

# A bare `python` runs the interpreter running panel, so a server written with the SDK that
# panel installs finds it, whatever `python` the PATH holds.
PYTHON_NAMES = frozenset({"python", "python3"})

Finding = tuple[tuple[Any, ...], str]


def command_line(server: ToolServer) -> list[str]:
    """The command a stdio server is started with."""
    assert server.command is not None
    command, *args = server.command
    return [sys.executable if command in PYTHON_NAMES else command, *args]


def tool_findings(panel: Panel) -> list[Finding]:
    """Raise for an attachment or a server command panel could not use; return the warnings."""
    read_attachments(panel)
    for name, server in panel.tools.items():
        if server.command is not None and not _runnable(command_line(server)[0], server.cwd):
            problem = f"no such command: {server.command[0]}"
            if panel.source_file is None:
                raise UserError(f"tools.{name}.command: {problem}.")
            raise ConfigError(
                panel.source_file, panel.line_of(("tools", name, "command")), f"tools.{name}.command", problem
            )
    named = started(panel)
    findings: list[Finding] = [
        (("tools", name), "no member names it, so it is not started") for name in panel.tools if name not in named
    ]
    if named and panel.defaults.tool_budget == 0:
        findings.append((("defaults", "tool_budget"), "is 0, so no member gets tools"))
    return findings


def started(panel: Panel) -> list[str]:
    """The tool servers a run of the panel may start: those some member names."""
    named = {name for member in panel.callable_members() for name in member.tools}
    return [name for name in panel.tools if name in named]


def tool_settings(panel: Panel) -> list[tuple[str, str]]:
    """What `panel validate` shows of a panel's tools and attachments (nothing when it has none)."""
    settings: list[tuple[str, str]] = []
    for name, server in panel.tools.items():
        users = [member.name for member in panel.callable_members() if name in member.tools]
        who = f"for {', '.join(users)}" if users else "named by no member"
        settings.append((f"tools.{name}", f"{server.target} ({server.transport}), {who}"))
    if panel.tools:
        settings.append(("tool_budget", f"{panel.defaults.tool_budget} calls per member per stage"))
    if panel.attach:
        shown = [f"{each.name} ({each.resolved})" for each in read_attachments(panel)]
        settings.append(("attach", ", ".join(shown)))
    return settings


def _runnable(command: str, cwd: str | None) -> bool:
    """A path (relative to the server's folder) that exists, or a name on the PATH."""
    if os.sep in command or (os.altsep and os.altsep in command):
        return os.path.exists(os.path.join(cwd or os.getcwd(), command))
    return shutil.which(command) is not None
