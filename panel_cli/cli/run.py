"""`panel run FILE`: run a panel with the protocol its file names (README.md#commands)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from panel_cli.cli import options


@options.with_run_controls
def run(
    panel_file: Path = options.panel_file_argument(),
    question: str | None = options.QUESTION,
    json_mode: bool = options.JSON,
    quiet: bool = options.QUIET,
    db: Path | None = options.DB,
    demo: bool = options.DEMO,
    attach: list[Path] | None = options.ATTACH,
    controls: options.RunControls = options.NO_CONTROLS,
) -> None:
    """Run a panel with the protocol its file names (protocol: confer, council, …)."""
    from panel_cli.cli.confer import confer
    from panel_cli.cli.council import council
    from panel_cli.cli.delphi import delphi
    from panel_cli.cli.ensemble import ensemble
    from panel_cli.cli.orchestrate import orchestrate
    from panel_cli.cli.supervise import supervise
    from panel_cli.cli.vote import decide, vote
    from panel_cli.config import load_panel
    from panel_cli.protocols.checks import check_panel

    panel = load_panel(panel_file)
    check_panel(panel, panel.protocol)  # a protocol this version cannot run stops here, located
    common: dict[str, Any] = {
        "panel_file": panel_file,
        "question": question,
        "json_mode": json_mode,
        "quiet": quiet,
        "db": db,
        "demo": demo,
        "attach": attach,
        "controls": controls,
    }
    # Each command with its own options at their defaults: the file decides.
    commands: dict[str, tuple[Any, dict[str, Any]]] = {
        "confer": (confer, {"agents": None, "max_rounds": None, "no_convergence": False}),
        "council": (council, {"members": None, "chairman": None, "no_anonymize": False, "timeout": None}),
        "ensemble": (ensemble, {"members": None, "mode": None, "scorer": None, "aggregator": None, "timeout": None}),
        "delphi": (
            delphi,
            {"members": None, "chairman": None, "max_rounds": None, "no_convergence": False, "timeout": None},
        ),
        "supervise": (supervise, {"max_rounds": None, "timeout": None}),
        "orchestrate": (
            orchestrate,
            {"members": None, "planner": None, "chairman": None, "max_plan_attempts": None, "timeout": None},
        ),
        "vote": (vote, dict.fromkeys(("members", "choices", "method", "threshold", "quorum", "timeout", "no_match"))),
        "decide": (
            decide,
            dict.fromkeys(("members", "choices", "leader", "method", "threshold", "quorum", "timeout", "no_match")),
        ),
    }
    command, own = commands[panel.protocol]
    command(**common, **own)
