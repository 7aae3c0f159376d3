"""The protocol-aware checks of a panel, made by `panel validate` and by every run alike, so a
file that validates never fails at the start of a run.

Errors (a 1-member council, a judge that is not a member, a vote without options) raise
UserError. What a run would silently ignore (`chairman` for confer, a `weight`
outside weighted voting) comes back as warnings, located like config errors."""

from __future__ import annotations

from typing import Any

from panel_cli.config import Panel, settings_model
from panel_cli.errors import ConfigError, OptionError, UserError
from panel_cli.located_yaml import field_name
from panel_cli.protocols.base import Finding, rules_of
from panel_cli.protocols.vote.settings import VoteSettings
from panel_cli.tools.checks import tool_findings

# The panel's own fields every protocol reads (the roles and the weights file are read by some,
# as their rules say), and the member fields only some do.
COMMON_FIELDS = frozenset(
    {
        "name",
        "protocol",
        "question",
        "question_file",
        "members",
        "defaults",
        "concurrency",
        "timeouts",
        "tools",
        "attach",
    }
)
OPTIONAL_MEMBER_FIELDS = frozenset({"weight", "task"})


def check_panel(panel: Panel, protocol: str, declared: str | None = None) -> list[str]:
    """Raise UserError if `protocol` cannot run `panel`; return the warnings a run would raise.

    `declared` is the protocol the panel file names, if it names one. A file written for
    another protocol gets one warning saying so, rather than one per field it sets for it.
    The protocol's settings are read first, so a value only its own settings refuse stops
    here, located, rather than at the start of the run."""
    rules = rules_of(protocol)
    refuse_negative_weights(panel, protocol)
    settings = settings_model(protocol)
    if settings is not None:
        panel.settings_as(settings)
    own = set(settings.model_fields) if settings is not None else set()
    findings: list[Finding] = list(rules.check(panel)) if rules.check else []
    if declared is not None and declared != protocol:
        findings = [
            (
                ("protocol",),
                f"the file is written for {declared}; this run uses {protocol} and ignores what only {declared} reads",
            )
        ]
    else:
        findings += [
            ((name,), f"not used by {protocol}")
            for name in sorted(panel.model_fields_set - COMMON_FIELDS - rules.fields - own)
        ]
        findings += [
            (("timeouts", stage), f"not used by {protocol}")
            for stage in sorted(panel.timeouts.model_fields_set - set(rules.timeouts) - {"idle"})
        ]
        for index, member in enumerate(panel.members):
            unused = member.model_fields_set & OPTIONAL_MEMBER_FIELDS - rules.member_fields
            findings += [(("members", index, name), f"not used by {protocol}") for name in sorted(unused)]
    findings += tool_findings(panel)
    return [locate(panel, loc, problem) for loc, problem in findings]


def refuse_negative_weights(panel: Panel, protocol: str) -> None:
    """A weight below 0 is a member below chance, counted against what it names: only
    weighted_plurality can count it. weighted (more than half of the total weight) cannot, so a
    vote by weighted with one stops here; every other method and protocol ignores weights, and
    says so among the warnings."""
    if protocol not in ("vote", "decide") or VoteSettings.of(panel).method != "weighted":
        return
    for index, member in enumerate(panel.members):
        if member.weight < 0:
            loc = ("members", index, "weight")
            problem = (
                f"{member.weight:g} is below 0, which method weighted cannot count (more than half of the total "
                "weight); method weighted_plurality counts a member below chance against what it names"
            )
            if panel.source_file is None:
                raise UserError(f"{field_name(loc)}: {problem}.")
            raise ConfigError(panel.source_file, panel.line_of(loc), field_name(loc), problem)


def locate(panel: Panel, loc: tuple[Any, ...], problem: str) -> str:
    """`--option: problem.` for a field an option set; `file, line N: field: problem.` for one
    from a file; `field: problem.` otherwise."""
    return located_error(panel, loc, problem).message


def located_error(panel: Panel, loc: tuple[Any, ...], problem: str) -> UserError:
    """A problem with a field, as an error blaming whoever gave the field: the option that set
    it (an OptionError), else the line of the file that gives it (a ConfigError)."""
    flag = panel.option_for(loc)
    if flag is not None:
        return OptionError(f"{flag}: {problem}.")
    field = field_name(loc)
    if panel.source_file is None or not panel.in_file(loc[:1]):
        return UserError(f"{field}: {problem}.")  # a default: no line of the file gave it
    return ConfigError(panel.source_file, panel.line_of(loc), field, problem)
