"""The protocol-aware checks of a panel, made by `panel validate` and by every run alike, so a
file that validates never fails at the start of a run.

Errors (a 1-member council, a judge that is not a member, a vote without options) raise
UserError. What a run would silently ignore (`chairman` for confer, a `weight`
outside weighted voting) comes back as warnings, located like config errors."""

from __future__ import annotations

from typing import Any

from panel_cli.config import Panel, settings_model
from panel_cli.errors import ConfigError
from panel_cli.located_yaml import field_name
from panel_cli.protocols.base import Finding, rules_of
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


def locate(panel: Panel, loc: tuple[Any, ...], problem: str) -> str:
    """`file, line N: field: problem.` for a panel from a file; `field: problem.` otherwise."""
    field = field_name(loc)
    if panel.source_file is None:
        return f"{field}: {problem}."
    return ConfigError(panel.source_file, panel.line_of(loc), field, problem).message
