"""`panel estimate FILE`: the calls, tokens and cost a run would take, with no model called, no
key needed and nothing stored: the file's protocol command with `--dry-run`, whose estimate
`panel_cli.cli.dry_run` prints."""

from __future__ import annotations

from pathlib import Path

from panel_cli.cli import options


def estimate(
    panel_file: Path = options.panel_file_argument(),
    question: str | None = options.QUESTION,
    json_mode: bool = options.JSON,
    demo: bool = options.DEMO,
    attach: list[Path] | None = options.ATTACH,
) -> None:
    """Show the calls, tokens and cost a run of the panel would take, calling no model."""
    from panel_cli.cli.protocol_commands import run_protocol
    from panel_cli.config import load_panel
    from panel_cli.protocols.registry import spec

    given = {"panel_file": panel_file, "question": question, "json_mode": json_mode, "demo": demo, "attach": attach}
    run_protocol(spec(load_panel(panel_file).protocol), {**given, "dry_run": True})
