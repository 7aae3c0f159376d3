"""What a run checks and gathers before its first call, in the cheapest order: every missing key
at once (before litellm has even loaded), the run's secrets and the keys it sends to hosts not
their provider's, then, once litellm is in, that it can route every model; the spending cap;
the earlier run a follow-up continues.

Nothing here prints: what a person should hear before the run (a key sent to a host that is not
its provider's) goes to the `notify` the caller hands in, and a wait for litellm shows only what
the caller's `GatewayLoader` shows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from panel_cli.config import Panel
from panel_cli.errors import MissingKeyError, UserError
from panel_cli.protocols.base import Engine, engine_of
from panel_cli.redact import secret_values
from panel_cli.runs.controls import NO_CONTROLS, RunControls
from panel_cli.runs.followup import FollowUp, resolve_follow_up
from panel_cli.runs.loader import GatewayLoader

if TYPE_CHECKING:
    from panel_cli.llm.budget import Budget
    from panel_cli.protocols.gates import Gate
    from panel_cli.runs.resume import Continuation

# Whoever hears what a run says before it starts: one line at a time.
Notify = Callable[[str], None]

KEY_ADVICE = ("Set it, or try the panel offline with --demo.", "Set them, or try the panel offline with --demo.")


@dataclass(frozen=True)
class PreparedRun:
    """Everything a run needs, checked: the engine, the panel and question, the warnings its
    checks found, the secrets to scrub from every event, its spending cap, the run it follows
    up, the run it resumes and its gate (each None when it has none)."""

    engine: Engine
    panel: Panel
    question: str
    warnings: Sequence[str]
    secrets: Sequence[str]
    budget: Budget | None = None
    follow_up: FollowUp | None = None
    continuing: Continuation | None = None
    gate: Gate | None = None


def prepare_run(
    loader: GatewayLoader,
    panel: Panel,
    question: str,
    *,
    warnings: Sequence[str] = (),
    controls: RunControls = NO_CONTROLS,
    db_path: Path | None = None,
    continuing: Continuation | None = None,
    gate: Gate | None = None,
    notify: Notify | None = None,
) -> PreparedRun:
    """A run of `panel`'s protocol, ready to execute (`panel_cli.runs.execute.run_panel`).
    Raises UserError (exit 2) for a missing key, a model litellm cannot route, an unknown
    price under a cost cap (BudgetError), or a follow-up of a run that is not there. `notify`:
    as for `ready_to_call`."""
    follow_up = resolve_follow_up(db_path, controls.follow_up) if controls.follow_up is not None else None
    secrets = ready_to_call(loader, panel, notify=notify)
    return PreparedRun(
        engine=engine_of(panel.protocol),
        panel=panel,
        question=question,
        warnings=list(warnings),
        secrets=secrets,
        budget=run_budget(panel, controls),
        follow_up=follow_up,
        continuing=continuing,
        gate=gate,
    )


def check_keys(panel: Panel) -> None:
    """Every missing key at once, before litellm has even loaded (and before a question is
    asked at a prompt, so a person does not type one for a run that cannot start)."""
    from panel_cli.llm.providers import missing_keys

    missing = missing_keys(panel.callable_members())
    if missing:
        raise MissingKeyError(listed(missing, KEY_ADVICE))


def check_routable(litellm: ModuleType, panel: Panel) -> None:
    """That litellm can route every model of the panel; every one it cannot, at once."""
    from panel_cli.models.catalog import check_with_litellm

    unknown = [
        f"Member '{member.name}': {problem}"
        for member in panel.callable_members()
        if (problem := check_with_litellm(litellm, member.model, member.api_base)) is not None
    ]
    if unknown:
        raise UserError(listed(unknown))


def ready_to_call(loader: GatewayLoader, panel: Panel, *, notify: Notify | None = None) -> list[str]:
    """The checks every run makes before its first call, in the cheapest order: every missing
    key, then, once litellm has loaded (`loader.wait`), that it can route every model and the
    keys of providers our own table does not know. Tells `notify`, before litellm loads, which
    keys go to a host that is neither this machine nor their provider's (`key_notices`).
    Returns the run's secrets (`run_secrets`). A panel of demo personas alone needs no
    litellm, and skips its checks."""
    from panel_cli.models.routes import needs_litellm

    loader.start(panel)
    check_keys(panel)
    secrets = run_secrets(panel)
    if notify is not None:
        for notice in key_notices(panel):
            notify(notice)
    if needs_litellm(panel.callable_members()):
        check_loaded(loader.wait(), panel)
    return secrets


def check_loaded(litellm: ModuleType, panel: Panel) -> None:
    """What only litellm can tell: that it routes every model of the panel, and that the keys of
    providers our own table does not know are set."""
    from panel_cli.llm.providers import missing_keys_litellm

    check_routable(litellm, panel)
    missing = missing_keys_litellm(litellm, panel.callable_members())
    if missing:
        raise MissingKeyError(listed(missing, KEY_ADVICE))


def key_notices(panel: Panel) -> list[str]:
    """One line per key a run sends to a host that is neither this machine nor its provider's
    (members sending one key to one host share a line); the variable is named, never its value."""
    from panel_cli.llm.key_hosts import keys_sent_elsewhere

    grouped: dict[tuple[str, str, str], list[str]] = {}
    for sent, line in keys_sent_elsewhere(panel, this_machine=False):
        if not sent.loopback:
            where = f"line {line}: member '{sent.member}'" if line is not None else f"member '{sent.member}'"
            grouped.setdefault((sent.variable, sent.host, sent.provider), []).append(where)
    source = f"{panel.source_file}, " if panel.source_file else ""
    return [
        f"warning: {variable} is sent to {host}, not to {provider}'s own API ({source}{'; '.join(where)})."
        for (variable, host, provider), where in grouped.items()
    ]


def run_secrets(panel: Panel) -> list[str]:
    """What this run must never write down or draw: keys named like secrets, every key a member
    uses, and the values of the `${VAR}`s its panel file expanded."""
    from panel_cli.llm.providers import keys_in_use

    members = panel.callable_members()
    names = [member.api_key_env for member in members if member.api_key_env]
    return secret_values(names, known=[*keys_in_use(members), *panel.expanded_values])


def run_budget(panel: Panel, controls: RunControls = NO_CONTROLS, *, allow_flag: bool = True) -> Budget | None:
    """The run's budget: `--max-cost` (else the panel's `defaults.max_cost`) and `--max-calls`;
    refuses (exit 2) a cost cap over a member of unknown price unless it is allowed. Commands
    without `--allow-unknown-prices` (`allow_flag` false: batch, eval) say what else to do."""
    from panel_cli.llm.budget import ALLOW_ADVICE
    from panel_cli.llm.run_budget import run_budget as budget_for

    cap = "--max-cost" if controls.max_cost is not None else "defaults.max_cost"
    advice = ALLOW_ADVICE if allow_flag else "take max_cost out of the file's defaults to run them without a cap"
    max_cost = controls.max_cost if controls.max_cost is not None else panel.defaults.max_cost
    return budget_for(
        panel.callable_members(),
        max_cost=max_cost,
        max_calls=controls.max_calls,
        allow_unknown_prices=controls.allow_unknown_prices,
        cap=cap,
        advice=advice,
    )


def listed(problems: list[str], advice: tuple[str, str] | None = None) -> str:
    """One problem per line, so none hides behind the first, then the advice (singular or
    plural) on a line of its own."""
    lines = [problem if problem.endswith(".") else problem + "." for problem in problems]
    if advice is not None:
        lines.append(advice[0] if len(lines) == 1 else advice[1])
    return "\n".join(lines)
