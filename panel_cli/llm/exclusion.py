"""Members that failed for good in a run (a rejected key, an unknown model, a refused
connection): calling them again would fail the same way, so they are not called again in
that run, and the run's result reports them."""

from __future__ import annotations

import uuid

from panel_cli.config import Member
from panel_cli.events import ErrorKind, MemberSkipped, WarningRaised
from panel_cli.llm.errors import Failure
from panel_cli.llm.exchange import Emit
from panel_cli.llm.result import CallResult


class Exclusions:
    """A run's excluded members, each with why (`auth: the provider rejected the key (401)`)."""

    def __init__(self) -> None:
        self.reasons: dict[str, str] = {}
        self._kinds: dict[str, ErrorKind] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.reasons

    async def exclude(self, emit: Emit, member: Member, failure: Failure) -> None:
        """Exclude the member if `failure` is for good (once; the run says so)."""
        if not failure.permanent or member.name in self.reasons:
            return
        reason = f"{failure.kind}: {failure.message}"
        self.reasons[member.name] = reason
        self._kinds[member.name] = failure.kind
        await emit(
            WarningRaised(member=member.name, message=f"failed for good ({reason}); it is not called again in this run")
        )

    async def skip(self, emit: Emit, member: Member, stage: str, round: int | None, about: str | None) -> CallResult:
        """The call an excluded member is not asked: reported as skipped, with the reason."""
        reason = self.reasons[member.name]
        await emit(
            MemberSkipped(member=member.name, model=member.model, stage=stage, round=round, about=about, reason=reason)
        )
        return CallResult(
            call_id=uuid.uuid4().hex[:16],
            member=member.name,
            model=member.model,
            ok=False,
            skipped=True,
            error_kind=self._kinds[member.name],
            error=f"not called: failed for good earlier ({reason})",
        )
