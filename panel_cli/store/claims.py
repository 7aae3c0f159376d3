"""Claims: a row that says a process is resuming a run or running a batch, so that a second
process asked to do the same refuses before its first call instead of paying for the same
questions again.

A claim is taken in one transaction that holds the write lock from its first read
(`BEGIN IMMEDIATE`), so of two processes claiming at once exactly one gets it. It names the
process (`pid`, `host`, when): a claim whose process has died (a crash, SIGKILL, a closed
terminal) blocks nothing, and the next claimer takes it over. A claim from another host cannot
be checked from here; `force` takes it over.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from panel_cli.errors import UserError
from panel_cli.store.connection import connect, database_error
from panel_cli.store.processes import process_alive, this_host
from panel_cli.store.records import read_time
from panel_cli.store.times import iso_time

ClaimKind = Literal["run", "batch"]


@dataclass(frozen=True)
class Holder:
    """Who holds a claim: the process, its host and since when (epoch seconds; None unknown)."""

    pid: int | None
    host: str | None
    since: float | None

    @property
    def here(self) -> bool:
        return self.host == this_host()

    def alive(self) -> bool:
        """Whether the holder may still be at work: always, for a process of another host."""
        if not self.here:
            return True
        return isinstance(self.pid, int) and process_alive(self.pid, self.since)


class ClaimHeld(UserError):
    """Another live process holds the claim (exit 2, like every refusal before a run)."""

    def __init__(self, message: str, holder: Holder) -> None:
        super().__init__(message)
        self.holder = holder


@dataclass(frozen=True)
class Claim:
    """A claim this process holds: `release` it once the work is over, however it ended (a
    process that dies holding one leaves a claim the next claimer takes over)."""

    path: Path
    kind: ClaimKind
    target: str
    pid: int

    def release(self) -> None:
        """Drop the claim, if it is still this process's (`release_claims`)."""
        release_claims([self])


def release_claims(claims: Sequence[Claim]) -> None:
    """Drop the claims that are still this process's, in one transaction. Never raises: the work
    they guarded is over, and a claim left behind is taken over once its process is gone."""
    if not claims:
        return
    try:
        db = connect(claims[0].path)
    except UserError:
        return
    try:
        db.execute("BEGIN IMMEDIATE")
        db.executemany(
            "DELETE FROM claims WHERE kind = ? AND target = ? AND pid = ? AND host = ?",
            [(claim.kind, claim.target, claim.pid, this_host()) for claim in claims],
        )
        db.execute("COMMIT")
    except sqlite3.Error:
        if db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
    finally:
        db.close()


def take_claims(path: Path, wanted: list[tuple[ClaimKind, str]], *, force: bool = False) -> list[Claim]:
    """Claim every (kind, target) of `wanted` for this process, all or none, in one transaction.
    A claim held by a live process of this host is never taken; one of another host only with
    `force`; one whose process is gone is taken over (and every other claim of this host whose
    process is gone is dropped). Raises `ClaimHeld` for the first that cannot be taken, naming
    its holder."""
    pid, host, now = os.getpid(), this_host(), time.time()
    db = connect(path)
    try:
        db.execute("BEGIN IMMEDIATE")
        try:
            for kind, target in wanted:
                row = db.execute(
                    "SELECT pid, host, claimed_at FROM claims WHERE kind = ? AND target = ?", (kind, target)
                ).fetchone()
                if row is not None:
                    holder = _holder(row)
                    if holder.alive() and (holder.here or not force):
                        raise ClaimHeld(_held(kind, target, holder), holder)
                db.execute(
                    "INSERT OR REPLACE INTO claims (kind, target, pid, host, claimed_at) VALUES (?, ?, ?, ?, ?)",
                    (kind, target, pid, host, iso_time(now)),
                )
            _forget_the_dead(db, host)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
    except sqlite3.DatabaseError as error:
        raise database_error(path, error, writing=True) from error
    finally:
        db.close()
    return [Claim(path=path, kind=kind, target=target, pid=pid) for kind, target in wanted]


def _forget_the_dead(db: sqlite3.Connection, host: str) -> None:
    """Drop every claim of this host whose process is gone, so claims left by crashes do not
    pile up (each would be taken over anyway)."""
    for row in db.execute("SELECT * FROM claims WHERE host = ?", (host,)).fetchall():
        if not _holder(row).alive():
            db.execute("DELETE FROM claims WHERE kind = ? AND target = ?", (row["kind"], row["target"]))


def _holder(row: sqlite3.Row) -> Holder:
    """Who holds a claim, as its row says (a value of the wrong type is not known)."""
    return Holder(
        pid=row["pid"] if isinstance(row["pid"], int) else None,
        host=row["host"] if isinstance(row["host"], str) else None,
        since=read_time(row["claimed_at"]),
    )


def _held(kind: ClaimKind, target: str, holder: Holder) -> str:
    """One sentence: what is held, by which process, since when, and what to do."""
    what = f"Run {target} is already being resumed" if kind == "run" else f"Batch {target} is already being run"
    since = f" since {time.strftime('%H:%M:%S', time.localtime(holder.since))}" if holder.since is not None else ""
    process = f"panel process {holder.pid}" if holder.pid is not None else "another panel process"
    if holder.here:
        return f"{what} by {process}{since}; let it finish, or stop it and try again."
    where = f" on {holder.host}" if holder.host else " on another host"
    return f"{what} by {process}{where}{since}; if that process is gone, give --force to take it over."
