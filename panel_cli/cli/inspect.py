"""`panel validate` and `panel models`: look at panels and models without calling one."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from panel_cli.cli import options


def validate(panel_file: Path = options.panel_file_argument()) -> None:
    """Check a panel file and show what it declares; no model is called."""
    from panel_cli.config import load_panel
    from panel_cli.llm.providers import key_status

    panel = load_panel(panel_file)
    console = Console()
    console.print(f"[bold]{panel.name}[/bold]: {panel.protocol}, {len(panel.members)} members — {panel_file} is valid.")
    table = Table("member", "model", "api_base", "key", "weight")
    for member in panel.members:
        table.add_row(member.name, member.model, member.api_base or "", key_status(member.provider, member.api_key_env, member.api_base), f"{member.weight:g}")
    console.print(table)
    chairs = ", ".join(c.name for c in panel.chairmen()) if panel.chairman else "—"
    console.print(f"chairman: {chairs}   max_rounds: {panel.max_rounds}   until_convergence: {panel.until_convergence}")
    if panel.question or panel.question_file:
        console.print(f"question: {panel.question or 'from ' + str(panel.question_file)}")


def models() -> None:
    """Aliases, demo personas, and which provider keys are set (names only, never values)."""
    from panel_cli.llm.aliases import load_aliases, user_alias_file
    from panel_cli.llm.providers import PROVIDER_KEYS, key_status

    console = Console()
    aliases = Table("alias", "model", "api_base", title="Aliases")
    for name, alias in sorted(load_aliases().items()):
        aliases.add_row(name, alias.model, alias.api_base or "")
    console.print(aliases)
    console.print(f"Add your own in {user_alias_file()} (name: provider/model).\n")
    keys = Table("provider", "key", title="Provider keys")
    for provider in PROVIDER_KEYS:
        keys.add_row(provider, key_status(provider))
    console.print(keys)
    from panel_cli.llm.demo import PERSONAS

    console.print("\nDemo personas (no key, no network): " + ", ".join(f"demo/{p}" for p in PERSONAS))
