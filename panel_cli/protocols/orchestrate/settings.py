"""What orchestrate reads from a panel file beyond the fields every protocol shares
(docs/protocols.md#orchestrate)."""

from __future__ import annotations

from pydantic import Field

from panel_cli.config import ProtocolSettings


class OrchestrateSettings(ProtocolSettings):
    """How many times the planner is asked for a valid plan (`max_plan_attempts`)."""

    max_plan_attempts: int = Field(default=3, ge=1, le=10)
