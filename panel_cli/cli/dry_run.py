"""The estimate of a run, printed: what `--dry-run` on any protocol command and `panel
estimate FILE` show, with no model called, no key needed and nothing stored."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from panel_cli.config import Panel
    from panel_cli.runs.followup import FollowUp
    from panel_cli.runs.loader import GatewayLoader
    from panel_cli.view.environment import Environment


def show_estimate(
    env: Environment,
    loader: GatewayLoader,
    panel: Panel,
    question: str,
    *,
    json_mode: bool,
    follow_up: FollowUp | None = None,
) -> None:
    """Print the estimate of a run on `env` (a table, or JSON with `--json`). The models must
    be ones litellm routes, as for a run; the keys need not be set, since nothing is sent. A
    follow-up's earlier turns are counted in every prompt, as its run sends them."""
    from panel_cli.estimate.build import estimate_run
    from panel_cli.runs.prepare import check_routable

    check_routable(loader.wait(), panel)
    estimate = estimate_run(panel, question, follow_up.turns if follow_up is not None else ())
    if json_mode:
        env.stdout.write(json.dumps(estimate.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n")
        return
    from panel_cli.view.estimate import print_estimate

    print_estimate(env.console, estimate)
