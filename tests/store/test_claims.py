"""Claims: all or none, never over a live holder of this host, taken over from a dead one,
from another host only with force, and released only by their own process."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from panel_cli.store.claims import ClaimHeld, release_claims, take_claims
from panel_cli.store.processes import this_host


def held(db: Path) -> list[tuple]:
    with contextlib.closing(sqlite3.connect(db)) as con:
        return con.execute("SELECT kind, target, pid, host FROM claims ORDER BY kind, target").fetchall()


def put(db: Path, target: str, pid: int, host: str) -> None:
    with contextlib.closing(sqlite3.connect(db)) as con, con:
        con.execute("INSERT INTO claims VALUES ('run', ?, ?, ?, '2026-01-01T00:00:00.000000000Z')", (target, pid, host))


def ended_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_claims_are_taken_all_or_none(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    (first,) = take_claims(db, [("run", "b")])
    with pytest.raises(ClaimHeld) as refused:
        take_claims(db, [("run", "a"), ("run", "b"), ("batch", "c")])
    assert refused.value.holder.pid == first.pid and refused.value.holder.here
    assert held(db) == [("run", "b", first.pid, this_host())]  # neither a nor c
    first.release()
    claims = take_claims(db, [("run", "a"), ("run", "b"), ("batch", "c")])
    assert [row[:2] for row in held(db)] == [("batch", "c"), ("run", "a"), ("run", "b")]
    release_claims(claims)
    assert held(db) == []


@pytest.mark.subprocess
def test_a_dead_holder_is_taken_over_and_its_other_claims_dropped(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    take_claims(db, [("run", "x")])[0].release()  # the table exists
    dead = ended_pid()
    put(db, "a", dead, this_host())
    put(db, "b", dead, this_host())
    (claim,) = take_claims(db, [("run", "a")])
    assert held(db) == [("run", "a", claim.pid, this_host())]


def test_another_hosts_claim_needs_force_and_is_never_released_by_us(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    take_claims(db, [("run", "x")])[0].release()
    put(db, "a", 4242, "elsewhere.example")
    with pytest.raises(ClaimHeld, match="on elsewhere.example .*give --force to take it over"):
        take_claims(db, [("run", "a")])
    (claim,) = take_claims(db, [("run", "a")], force=True)
    assert held(db) == [("run", "a", claim.pid, this_host())]
    put(db, "b", 4242, "elsewhere.example")
    release_claims([claim, *take_claims(db, [("run", "c")])])
    assert held(db) == [("run", "b", 4242, "elsewhere.example")]
