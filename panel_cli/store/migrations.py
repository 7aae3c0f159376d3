"""The transcript schema, as an ordered list of migrations.

`PRAGMA user_version` counts the migrations a file has had, so opening an older file
brings it forward. A change to the schema is a new function at the end of the list;
one that has shipped is never edited, or files written with it would miss the change.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

Migration = Callable[[sqlite3.Connection], None]

MIGRATIONS: list[Migration] = []


def migration(function: Migration) -> Migration:
    MIGRATIONS.append(function)
    return function


@migration
def m001_initial(db: sqlite3.Connection) -> None:
    db.execute(
        """
        CREATE TABLE runs (
            id TEXT PRIMARY KEY,
            protocol TEXT,
            panel TEXT,
            question TEXT,
            config_json TEXT,
            status TEXT,  -- running | finished | no_answer | failed | interrupted
            started_at REAL,
            finished_at REAL,
            final_answer TEXT,
            result_json TEXT,
            error TEXT,
            calls INTEGER,
            tokens INTEGER,
            cost REAL
        )
        """
    )
    db.execute("CREATE INDEX runs_started_at ON runs(started_at)")
    db.execute(
        """
        CREATE TABLE events (
            run_id TEXT,
            seq INTEGER,
            ts REAL,
            type TEXT,
            payload_json TEXT,
            PRIMARY KEY (run_id, seq)
        )
        """
    )
    db.execute(
        """
        CREATE TABLE calls (
            id TEXT PRIMARY KEY,
            run_id TEXT,
            member TEXT,
            model TEXT,
            stage TEXT,
            round INTEGER,
            request_json TEXT,
            response TEXT,
            tokens_in INTEGER,
            tokens_out INTEGER,
            cost REAL,
            latency REAL,
            error_kind TEXT,
            error TEXT,
            attempts INTEGER,
            ts REAL
        )
        """
    )
    db.execute("CREATE INDEX calls_run_id ON calls(run_id)")


@migration
def m002_call_detail_and_truncation(db: sqlite3.Connection) -> None:
    """`detail` keeps a failed call's raw provider text for whoever debugs it; `truncated`
    marks a reply cut at `max_response_chars`, so its stored response is only a beginning."""
    db.execute("ALTER TABLE calls ADD COLUMN detail TEXT")
    db.execute("ALTER TABLE calls ADD COLUMN truncated INTEGER")


@migration
def m003_decisions_and_retallies(db: sqlite3.Connection) -> None:
    """`decisions` keeps every decide run's outcome (its id is the run's), so decisions are
    listed by topic without reading every run's events. `retallies` keeps each recount of a
    stored vote by `panel history retally`, beside the run it recounted, which stays as it was."""
    db.execute(
        """
        CREATE TABLE decisions (
            run_id TEXT PRIMARY KEY,
            topic TEXT,
            winner TEXT,
            vote_counts_json TEXT,
            method TEXT,
            total_votes INTEGER,
            ballots_cast INTEGER,
            leader TEXT,
            leader_override INTEGER,
            consensus_reached INTEGER,
            decided_at REAL
        )
        """
    )
    db.execute("CREATE INDEX decisions_decided_at ON decisions(decided_at)")
    db.execute(
        """
        CREATE TABLE retallies (
            id TEXT PRIMARY KEY,
            run_id TEXT,
            method TEXT,
            threshold REAL,
            quorum INTEGER,
            winner TEXT,
            leader_override INTEGER,
            result_json TEXT,
            created_at REAL
        )
        """
    )
    db.execute("CREATE INDEX retallies_run_id ON retallies(run_id)")


def schema_version(db: sqlite3.Connection) -> int:
    return db.execute("PRAGMA user_version").fetchone()[0]


def migrate(db: sqlite3.Connection) -> None:
    """Apply the migrations this file has not had yet, each with its new version in one
    transaction. `BEGIN IMMEDIATE` takes the write lock before reading the version again,
    so two panels opening the same new file at once cannot both run a migration.
    The connection must be in autocommit mode (`isolation_level=None`)."""
    while schema_version(db) < len(MIGRATIONS):
        db.execute("BEGIN IMMEDIATE")
        try:
            version = schema_version(db)
            if version < len(MIGRATIONS):
                MIGRATIONS[version](db)
                db.execute(f"PRAGMA user_version = {version + 1}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
