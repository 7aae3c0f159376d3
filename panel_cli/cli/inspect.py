"""`panel validate` and `panel models`: look at panels and models without calling one.

Everything the user wrote (names, questions, models) is printed as plain text, never as
Rich markup: a `[/INST]` in a question prints as written.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from panel_cli.cli import completion
from panel_cli.exit_status import ExitStatus

if TYPE_CHECKING:
    from panel_cli.config import Panel

# A question is shown on one line, cut to this many characters: a 100 KB question is data to
# check, not something to print.
QUESTION_PREVIEW = 100


def validate(
    panel_files: list[Path] = typer.Argument(
        ..., help="Panel YAML files.", metavar="FILE...", dir_okay=False, autocompletion=completion.panel_files
    ),
) -> None:
    """Check panel files as a run would (protocol included) and show what each declares; no model is called."""
    from panel_cli.errors import UserError

    console = Console(markup=False, highlight=False)
    # soft_wrap: a located error is one line, however narrow the terminal or the pipe.
    errors = Console(stderr=True, markup=False, highlight=False, soft_wrap=True)
    failed = 0
    for index, panel_file in enumerate(panel_files):
        if index:
            console.print()
        try:
            _validate_one(console, errors, panel_file)
        except UserError as exc:
            failed += 1
            for line in exc.message.splitlines():
                errors.print(Text(f"panel: {line}"))
    if failed:
        if len(panel_files) > 1:
            errors.print(Text(f"panel: {failed} of {len(panel_files)} files are not valid."))
        raise typer.Exit(ExitStatus.USER_ERROR)


def _validate_one(console: Console, errors: Console, panel_file: Path) -> None:
    from panel_cli.config import load_panel, read_question_file
    from panel_cli.llm.providers import key_status
    from panel_cli.protocols.checks import check_panel
    from panel_cli.protocols.registry import rules_of
    from panel_cli.tools.checks import tool_settings
    from panel_cli.view.fmt import one_line

    panel = load_panel(panel_file)
    warnings = check_panel(panel, panel.protocol)
    question = panel.question
    if panel.question_file and not question:
        question = read_question_file(panel, panel_file.parent)
    rules = rules_of(panel.protocol)

    console.print(
        Text.assemble(
            (panel.name, "bold"), f": {panel.protocol}, {len(panel.members)} members — ", str(panel_file), " is valid."
        )
    )
    source = f" (from {panel.question_file})" if panel.question_file else ""
    shown = (
        f"{one_line(question, QUESTION_PREVIEW)}{source}"
        if question
        else "none in the file (give one with -q or on stdin)"
    )
    console.print(Text.assemble(("question: ", "dim"), shown))
    show_weight = "weight" in rules.member_fields
    table = Table("member", "model", "api_base", "key", *(["weight"] if show_weight else []))
    for member in panel.callable_members():
        row = [
            member.name,
            member.model,
            member.api_base or "",
            key_status(member.provider, member.api_key_env, member.api_base),
        ]
        table.add_row(*(Text(cell) for cell in row), *([Text(f"{member.weight:g}")] if show_weight else []))
    console.print(table)
    defaults = panel.defaults
    settings = [
        *rules.describe(panel),
        (
            "defaults",
            f"temperature {_or_default(defaults.temperature)}, max_tokens {_or_default(defaults.max_tokens)}, "
            f"retries {defaults.retries}, concurrency {defaults.concurrency}",
        ),
        *tool_settings(panel),
    ]
    for name, value in settings:
        console.print(Text.assemble((f"{name}: ", "dim"), value))
    beyond = _beyond_the_providers(panel, panel_file)
    if beyond:
        console.print(Text("beyond calling the providers:", style="bold"))
        for line in beyond:
            console.print(Text(f"  {line}"), soft_wrap=True)
    for warning in warnings:
        errors.print(Text(f"warning: {warning}", style="yellow"))


def _beyond_the_providers(panel: Panel, panel_file: Path) -> list[str]:
    """What running the file does besides calling each member's provider: each command it
    starts and each variable it hands that command (`env:`), each key it sends to a host
    other than that provider's own (this machine included), each header it sends to a tool
    server. A variable's value is never shown: only where it comes from, the user's own
    environment (`${VAR}`) or the file. A panel file is code; this is what to read before
    running someone else's."""
    from panel_cli.llm.aliases import split_url
    from panel_cli.llm.key_hosts import keys_sent_elsewhere
    from panel_cli.tools.checks import started

    written = _as_written(panel_file)
    lines: list[str] = []
    for name in started(panel):
        server = panel.tools[name]
        where = f"tools.{name}, line {panel.line_of(('tools', name))}"
        if server.command is not None:
            lines.append(f"starts {server.target} ({where})")
            for variable in server.env:
                source = _source(written, ("tools", name, "env", variable))
                line = panel.line_of(("tools", name, "env", variable))
                lines.append(f"hands {variable} to that command: {source} (tools.{name}.env, line {line})")
        elif server.headers:
            host = split_url(server.target).hostname
            sources = [_source(written, ("tools", name, "headers", header)) for header in server.headers]
            keys = [source for source in sources if source.startswith("your ")]
            carrying = f", carrying {' and '.join(keys)}" if keys else ""
            lines.append(f"sends the headers {', '.join(server.headers)} to {host}{carrying} ({where})")
    for sent, line in keys_sent_elsewhere(panel):
        host = f"{sent.host} (this machine)" if sent.loopback else sent.host
        lines.append(
            f"sends {sent.variable} to {host}, not to {sent.provider}'s own API (member {sent.member}, line {line})"
        )
    return lines


def _as_written(panel_file: Path) -> object:
    """The file's values as written, each `${VAR}` left as it is."""
    from panel_cli.located_yaml import parse_yaml, read_config_text

    return parse_yaml(read_config_text(panel_file, str(panel_file)), str(panel_file), expand_env=False).data


def _source(written: object, loc: tuple[str, ...]) -> str:
    """Where the value at `loc` comes from: `your ${TOKEN}` (the user's environment), or the file."""
    from panel_cli.located_yaml import variables_in

    value = written
    for key in loc:
        value = value.get(key) if isinstance(value, dict) else None
    names = variables_in(value) if isinstance(value, str) else []
    if not names:
        return "a value written in the file"
    return "your " + " and ".join(f"${{{name}}}" for name in names)


def _or_default(value: object) -> str:
    return "provider default" if value is None else str(value)


def models() -> None:
    """Aliases, demo personas, and which provider keys are set (names only, never values)."""
    from panel_cli.llm.aliases import load_aliases, user_alias_file
    from panel_cli.llm.demo import PERSONAS
    from panel_cli.llm.providers import PROVIDER_KEYS, key_status

    console = Console(markup=False, highlight=False)
    aliases = Table("alias", "model", "api_base", title="Aliases")
    for name, alias in sorted(load_aliases().items()):
        aliases.add_row(Text(name), Text(alias.model), Text(alias.api_base or ""))
    console.print(aliases)
    console.print(f"Add your own in {user_alias_file()} (name: provider/model).\n")
    keys = Table("provider", "key", title="Provider keys")
    for provider in PROVIDER_KEYS:
        keys.add_row(provider, key_status(provider))
    console.print(keys)
    console.print("\nDemo personas (no key, no network): " + ", ".join(f"demo/{p}" for p in PERSONAS))
    console.print(
        "Simulated voters for `panel eval`: demo/oracle@<p>, right with probability p (e.g. demo/oracle@0.7)."
    )
    console.print("Any litellm model id works too, e.g. openai/gpt-4o-mini or ollama/llama3.1 (with api_base).")
