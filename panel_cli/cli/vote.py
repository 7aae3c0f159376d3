"""`panel vote` and `panel decide`: options, members, counting rules, the engine, the exit code.

`--options` takes every word after it up to the next flag (`--options PostgreSQL MySQL
"SQL Server"`), as a person types a list; Click gives an option one value per flag, so
`SpreadOptions` spreads the words into one `--options` each before Click parses them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import typer

from panel_cli.cli import completion, options
from panel_cli.cli.panels import MEMBERS, TIMEOUT, panel_for, with_timeout

if TYPE_CHECKING:
    import click

    from panel_cli.protocols.vote.tally import Method

OPTIONS_FLAG = "--options"
OPTIONS = typer.Option(
    None,
    OPTIONS_FLAG,
    help='What to vote on: every word after --options up to the next flag; quote an option with spaces ("SQL Server"). Replaces the file\'s options.',
    show_default=False,
    metavar="<option …>",
)
METHOD = typer.Option(
    None,
    "--method",
    help="majority, supermajority, unanimous, ranked_choice, weighted, plurality or weighted_plurality, in any case "
    "(default majority).",
)
THRESHOLD = typer.Option(
    None, "--threshold", help="supermajority: the share of the votes an option must exceed (default 0.667)."
)
QUORUM = typer.Option(None, "--quorum", min=1, help="Fewer ballots than this, and nothing wins (default 1).")
NO_MATCH = typer.Option(
    None, "--no-match", help="A ballot that names no option: abstain (default), or first (a vote for the first option)."
)
LEADER = typer.Option(
    None, "--leader", help="The member who chooses when no option wins.", autocompletion=completion.member_names
)


def spread_options(args: list[str], flag: str = OPTIONS_FLAG) -> list[str]:
    """`--options A B C` -> `--options A --options B --options C`: every word after the flag
    up to the next word that starts with `-` (a flag, or `--` before positional words)."""
    spread: list[str] = []
    taking = False
    for index, arg in enumerate(args):
        if arg == "--":
            spread += args[index:]
            break
        if taking and not arg.startswith("-"):
            spread += [flag, arg]
            continue
        taking = arg == flag
        if not taking:
            spread.append(arg)
        elif index + 1 == len(args) or args[index + 1].startswith("-"):
            raise typer.BadParameter(
                "give the options after it, like --options PostgreSQL MySQL", param_hint=f"'{flag}'"
            )
    return spread


class SpreadOptions:
    """For a command class: `--options` takes every word up to the next flag."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, spread_options(args))  # type: ignore[misc, no-any-return]


def parse_method(value: str, option: str = "--method") -> Method:
    """A method named in any case (`Plurality`, `weighted-plurality`)."""
    from panel_cli.errors import UserError
    from panel_cli.protocols.vote.tally import METHODS, parse_choice

    method = parse_choice(value, METHODS)
    if method is None:
        raise UserError(f"{option}: '{value}' is not a method; choose {', '.join(METHODS[:-1])} or {METHODS[-1]}.")
    return method


@options.with_run_controls
def vote(
    panel_file: Path | None = options.panel_file_argument(required=False),
    question: str | None = options.QUESTION,
    choices: list[str] | None = OPTIONS,
    members: str | None = MEMBERS,
    method: str | None = METHOD,
    threshold: float | None = THRESHOLD,
    quorum: int | None = QUORUM,
    timeout: str | None = TIMEOUT,
    no_match: str | None = NO_MATCH,
    json_mode: bool = options.JSON,
    quiet: bool = options.QUIET,
    db: Path | None = options.DB,
    demo: bool = options.DEMO,
    attach: list[Path] | None = options.ATTACH,
    controls: options.RunControls = options.NO_CONTROLS,
) -> None:
    """Every member votes on fixed options; the ballots are counted by the method, against the quorum."""
    _run(
        "vote",
        panel_file,
        question,
        choices=choices,
        members=members,
        method=method,
        threshold=threshold,
        quorum=quorum,
        timeout=timeout,
        no_match=no_match,
        leader=None,
        json_mode=json_mode,
        quiet=quiet,
        db=db,
        demo=demo,
        attach=attach,
        controls=controls,
    )


@options.with_run_controls
def decide(
    panel_file: Path | None = options.panel_file_argument(required=False),
    question: str | None = options.QUESTION,
    choices: list[str] | None = OPTIONS,
    members: str | None = MEMBERS,
    leader: str | None = LEADER,
    method: str | None = METHOD,
    threshold: float | None = THRESHOLD,
    quorum: int | None = QUORUM,
    timeout: str | None = TIMEOUT,
    no_match: str | None = NO_MATCH,
    json_mode: bool = options.JSON,
    quiet: bool = options.QUIET,
    db: Path | None = options.DB,
    demo: bool = options.DEMO,
    attach: list[Path] | None = options.ATTACH,
    controls: options.RunControls = options.NO_CONTROLS,
) -> None:
    """A vote inside the group, stored as a decision; when no option wins, the leader chooses."""
    _run(
        "decide",
        panel_file,
        question,
        choices=choices,
        members=members,
        method=method,
        threshold=threshold,
        quorum=quorum,
        timeout=timeout,
        no_match=no_match,
        leader=leader,
        json_mode=json_mode,
        quiet=quiet,
        db=db,
        demo=demo,
        attach=attach,
        controls=controls,
    )


def _run(
    protocol: Literal["vote", "decide"],
    panel_file: Path | None,
    question: str | None,
    *,
    choices: list[str] | None,
    members: str | None,
    method: str | None,
    threshold: float | None,
    quorum: int | None,
    timeout: str | None,
    no_match: str | None,
    leader: str | None,
    json_mode: bool,
    quiet: bool,
    db: Path | None,
    demo: bool,
    attach: list[Path] | None = None,
    controls: options.RunControls,
) -> None:
    from panel_cli.cli.running import apply_demo, begin_run, execute, question_for

    loader = begin_run()
    from panel_cli.errors import UserError
    from panel_cli.protocols.checks import check_panel
    from panel_cli.protocols.vote import engine as engines

    panel, declared = panel_for(panel_file, members, None, protocol, demo=demo)
    updates: dict[str, Any] = {}
    if choices:
        problems = engines.option_problems(choices)
        if problems:
            raise UserError(f"{OPTIONS_FLAG}: {problems[0][1]}.")
        updates["options"] = [choice.strip() for choice in choices]
    if method is not None:
        updates["method"] = parse_method(method)
    if threshold is not None:
        updates["threshold"] = threshold
    if quorum is not None:
        updates["quorum"] = quorum
    if no_match is not None:
        if no_match not in ("abstain", "first"):
            raise UserError(f"--no-match: '{no_match}' is not a choice; use abstain or first.")
        updates["no_match"] = no_match
    if leader is not None:
        updates["leader"] = leader
    panel = panel.model_copy(update=updates)
    if threshold is not None and panel.method != "supermajority":
        raise UserError(f"--threshold applies to --method supermajority, not {panel.method}.")
    panel = apply_demo(with_timeout(panel, timeout, ("vote",)), demo).with_attachments(attach)
    warnings = check_panel(panel, protocol, declared)
    text = question_for(panel, panel_file, question)
    engine = engines.vote if protocol == "vote" else engines.decide
    execute(loader, engine, panel, text, warnings=warnings, json_mode=json_mode, quiet=quiet, db=db, controls=controls)
