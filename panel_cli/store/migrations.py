"""The transcript schema, as an ordered list of migrations.

`PRAGMA user_version` counts the migrations a file has had, so opening an older file
brings it forward. A change to the schema is a new function, added at the end of
`MIGRATIONS` with `SCHEMA_VERSION` raised to its number. One that has shipped is never
edited, and is frozen: it holds its own SQL and calls nothing the live store may change
(the writer, the text store, the read models), so a file migrated today and one migrated
when it shipped are the same file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

Migration = Callable[[sqlite3.Connection], None]

SCHEMA_VERSION = 12  # the number of the last migration, the version every file is brought to
TEXTS_VERSION = 4  # the version whose migration moved every text to `texts`


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


def m002_call_detail_and_truncation(db: sqlite3.Connection) -> None:
    """`detail` keeps a failed call's raw provider text for whoever debugs it; `truncated`
    marks a reply cut at `max_response_chars`, so its stored response is only a beginning."""
    db.execute("ALTER TABLE calls ADD COLUMN detail TEXT")
    db.execute("ALTER TABLE calls ADD COLUMN truncated INTEGER")


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


def m004_texts_iso_times_and_search(db: sqlite3.Connection) -> None:
    """Each distinct text is stored once, in `texts`, and rows refer to it (see
    `panel_cli.store.texts`); an event leaves out what the row claiming it holds (see
    `panel_cli.store.rows`); times are ISO-8601 UTC text; a run keeps the pid and host of the
    process writing it; questions and final answers are indexed for full-text search. The
    tables of version 3 are renamed, copied run by run (`panel_cli.store.upgrade`), and
    dropped."""
    from panel_cli.store.upgrade import copy_version_3

    for index in ("runs_started_at", "calls_run_id", "decisions_decided_at", "retallies_run_id"):
        db.execute(f"DROP INDEX IF EXISTS {index}")
    for table in ("runs", "events", "calls", "decisions", "retallies"):
        db.execute(f"ALTER TABLE {table} RENAME TO {table}_v3")
    db.execute(
        """
        CREATE TABLE texts (
            id INTEGER PRIMARY KEY,
            hash BLOB NOT NULL UNIQUE,           -- the first 16 bytes of the text's SHA-256
            body TEXT,                           -- the text, or NULL when it is kept as parts
            parts TEXT,                          -- JSON: "literal", [id] or [id, start, length], joined in order
            searchable INTEGER NOT NULL DEFAULT 0  -- 1: a question or a final answer, in text_search
        )
        """
    )
    db.execute("CREATE VIRTUAL TABLE text_search USING fts5(body, content='texts', content_rowid='id')")
    db.execute(
        """
        CREATE TABLE runs (
            id TEXT PRIMARY KEY,
            protocol TEXT,
            panel TEXT,
            question_text INTEGER,               -- texts.id
            config_text INTEGER,                 -- texts.id of the panel's JSON
            status TEXT,                         -- running | finished | no_answer | failed | interrupted
            started_at TEXT,                     -- ISO-8601 UTC
            finished_at TEXT,
            final_answer_text INTEGER,           -- texts.id
            result_json TEXT,                    -- JSON; {"$text": id} for each long string
            error TEXT,
            outcome TEXT,                        -- the winner, or the final answer's first line
            calls INTEGER NOT NULL DEFAULT 0,
            tokens INTEGER,
            cost REAL,
            pid INTEGER,                         -- the process writing the run, and its host
            host TEXT,
            started_seq INTEGER,                 -- the events this row holds the fields of
            ended_seq INTEGER
        )
        """
    )
    db.execute("CREATE INDEX runs_started_at ON runs(started_at)")
    db.execute(
        """
        CREATE TABLE events (
            run_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            ts TEXT,                             -- ISO-8601 UTC
            type TEXT,
            payload_json TEXT,                   -- JSON: what no row holds; NULL for nothing
            PRIMARY KEY (run_id, seq)
        ) WITHOUT ROWID
        """
    )
    db.execute(
        """
        CREATE TABLE calls (
            run_id TEXT NOT NULL,
            id TEXT NOT NULL,
            seq INTEGER,                         -- its call_finished or call_failed event
            started_seq INTEGER,                 -- its call_started event
            member TEXT,
            model TEXT,
            stage TEXT,
            round INTEGER,
            about TEXT,
            request_json TEXT,                   -- JSON messages; {"$text": id} for each long content
            response_text INTEGER,               -- texts.id
            truncated INTEGER,
            reused INTEGER,
            request_hash TEXT,
            tokens_in INTEGER,
            tokens_out INTEGER,
            cost REAL,
            latency REAL,
            error_kind TEXT,
            error TEXT,
            detail TEXT,
            attempts INTEGER,
            ts TEXT,
            PRIMARY KEY (run_id, id)
        ) WITHOUT ROWID
        """
    )
    db.execute(
        """
        CREATE TABLE decisions (
            run_id TEXT PRIMARY KEY,
            seq INTEGER,                         -- its decision_recorded event
            topic TEXT,
            winner TEXT,
            vote_counts_json TEXT,
            method TEXT,
            total_votes INTEGER,
            ballots_cast INTEGER,
            leader TEXT,
            leader_override INTEGER,
            consensus_reached INTEGER,
            decided_at TEXT
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
            created_at TEXT
        )
        """
    )
    db.execute("CREATE INDEX retallies_run_id ON retallies(run_id)")
    db.execute(
        """
        CREATE VIEW run_texts AS
        SELECT r.id, r.protocol, r.panel, r.status, r.started_at, r.finished_at, question.body AS question,
               answer.body AS final_answer, r.outcome, r.error, r.calls, r.tokens, r.cost, config.body AS config
        FROM runs r
        LEFT JOIN texts question ON question.id = r.question_text
        LEFT JOIN texts answer ON answer.id = r.final_answer_text
        LEFT JOIN texts config ON config.id = r.config_text
        """
    )
    db.execute(
        """
        CREATE VIEW call_texts AS
        SELECT c.run_id, c.id AS call_id, c.ts, c.member, c.model, c.stage, c.round, c.about,
               (SELECT json_group_array(json_object(
                    'role', json_extract(m.value, '$.role'),
                    'content', CASE
                        WHEN t.id IS NULL THEN json_extract(m.value, '$.content')
                        WHEN t.body IS NOT NULL THEN t.body
                        ELSE json_object('parts', json(t.parts)) END))
                FROM json_each(c.request_json) m
                LEFT JOIN texts t ON t.id = json_extract(m.value, '$.content."$text"')) AS request,
               response.body AS response, c.error_kind, c.error, c.tokens_in, c.tokens_out, c.cost, c.latency
        FROM calls c
        LEFT JOIN texts response ON response.id = c.response_text
        """
    )
    copy_version_3(db)
    for table in ("runs", "events", "calls", "decisions", "retallies"):
        db.execute(f"DROP TABLE {table}_v3")


def m005_batch_ids(db: sqlite3.Connection) -> None:
    """`batch_id` names the `panel batch` a run belongs to (its `batch` tag), so a batch's
    runs are found through an index; a run of no batch has NULL."""
    db.execute("ALTER TABLE runs ADD COLUMN batch_id TEXT")
    db.execute("CREATE INDEX runs_batch_id ON runs(batch_id) WHERE batch_id IS NOT NULL")


def m006_tool_calls(db: sqlite3.Connection) -> None:
    """`tool_calls` has a row per tool call a member's model made, found through the model call
    it was made in (`call_id`, as in `calls.id`). Its `tool_call_finished` event keeps the whole
    payload, the result's text included; the row is there to query (`status`, `result_chars`,
    `duration`, `error`)."""
    db.execute(
        """
        CREATE TABLE tool_calls (
            run_id TEXT NOT NULL,
            seq INTEGER NOT NULL,                -- its tool_call_finished event
            call_id TEXT,                        -- calls.id of the model call that asked for it
            tool_call_id TEXT,                   -- the provider's id for the tool call
            member TEXT,
            stage TEXT,
            round INTEGER,
            about TEXT,
            server TEXT,                         -- NULL when the model named no tool it was offered
            tool TEXT,
            arguments_json TEXT,                 -- as the model wrote them (a JSON string when not an object)
            status TEXT,                         -- ok | failed | timeout
            result_chars INTEGER,                -- the result's size before the cap
            truncated INTEGER,
            error TEXT,
            duration REAL,
            ts TEXT,                             -- ISO-8601 UTC
            PRIMARY KEY (run_id, seq)
        ) WITHOUT ROWID
        """
    )
    db.execute("CREATE INDEX tool_calls_call_id ON tool_calls(run_id, call_id)")


def m007_follow_ups(db: sqlite3.Connection) -> None:
    """`parent_id` names the run a follow-up continues (`--continue`), copied from its config as
    the batch id is, so a thread is walked both ways: up by id, down through the index. A run
    that continues none has NULL."""
    db.execute("ALTER TABLE runs ADD COLUMN parent_id TEXT")
    db.execute("CREATE INDEX runs_parent_id ON runs(parent_id) WHERE parent_id IS NOT NULL")


def m008_evals(db: sqlite3.Connection) -> None:
    """`panel eval` kept: `evals` has a row per eval, its plan, settings, theory lines and
    calibration as JSON (`summary_json`); `eval_questions` the questions it graded, with their
    gold answers; `eval_items` each question through each system, graded, with its run
    (`graded_run`, as in `runs.id`); `eval_judge_calls` each call a judge made to grade one."""
    db.execute(
        """
        CREATE TABLE evals (
            id TEXT PRIMARY KEY,
            status TEXT,                         -- running | finished | interrupted | failed
            started_at TEXT,                     -- ISO-8601 UTC
            finished_at TEXT,
            panel TEXT,
            dataset TEXT,                        -- builtin:NAME or the path given
            dataset_sha256 TEXT,
            questions INTEGER,
            seed INTEGER,
            pid INTEGER,
            host TEXT,
            summary_json TEXT                    -- the eval without its questions and items
        )
        """
    )
    db.execute("CREATE INDEX evals_started_at ON evals(started_at)")
    db.execute(
        """
        CREATE TABLE eval_questions (
            eval_id TEXT NOT NULL,
            position INTEGER NOT NULL,
            question_id TEXT NOT NULL,
            question TEXT,
            answer TEXT,                         -- the gold answer
            options_json TEXT,                   -- NULL for a short-answer question
            about TEXT,
            PRIMARY KEY (eval_id, position)
        ) WITHOUT ROWID
        """
    )
    db.execute(
        """
        CREATE TABLE eval_items (
            eval_id TEXT NOT NULL,
            system TEXT NOT NULL,
            question_id TEXT NOT NULL,
            graded_run TEXT,                     -- runs.id of the run graded
            final_answer TEXT,
            correct INTEGER,
            grade_json TEXT,                     -- how it was graded: method, what it was read as, why
            calls INTEGER,
            tokens INTEGER,
            cost REAL,
            duration REAL,
            error TEXT,                          -- why its run failed outright (graded wrong)
            judge_tokens INTEGER,
            judge_cost REAL,
            ts TEXT,
            PRIMARY KEY (eval_id, system, question_id)
        ) WITHOUT ROWID
        """
    )
    db.execute(
        """
        CREATE TABLE eval_judge_calls (
            eval_id TEXT NOT NULL,
            system TEXT NOT NULL,
            question_id TEXT NOT NULL,
            member TEXT,
            model TEXT,
            prompt TEXT,
            reply TEXT,
            tokens_in INTEGER,
            tokens_out INTEGER,
            cost REAL,
            latency REAL,
            error TEXT,
            ts TEXT,
            PRIMARY KEY (eval_id, system, question_id)
        ) WITHOUT ROWID
        """
    )


def m009_resume_links_and_claims(db: sqlite3.Connection) -> None:
    """`resumed_by` names the run that took a run over (`panel resume`, `batch --resume`); the
    run itself is then `resumed`. `claims` has a row while a process resumes a run or runs a
    batch, taken under the write lock before its first call, so two processes never run the
    same questions at once; the holder's `pid` and `host` tell a claim whose process died."""
    db.execute("ALTER TABLE runs ADD COLUMN resumed_by TEXT")
    db.execute(
        """
        CREATE TABLE claims (
            kind TEXT NOT NULL,                  -- run | batch
            target TEXT NOT NULL,                -- the run's or the batch's id
            pid INTEGER,                         -- the process holding it, and its host
            host TEXT,
            claimed_at TEXT,                     -- ISO-8601 UTC
            PRIMARY KEY (kind, target)
        ) WITHOUT ROWID
        """
    )


def m010_late_calls(db: sqlite3.Connection) -> None:
    """`late` marks a call whose reply came in after its stage had stopped waiting for it (a
    race already won): answered and paid for, its text kept, not used by the protocol."""
    db.execute("ALTER TABLE calls ADD COLUMN late INTEGER")


def m011_eval_item_confidence(db: sqlite3.Connection) -> None:
    """Each graded item's `confidence` (the probability its answer is right), what it rests on
    or why there is none (`confidence_basis`), and who worked it out (`confidence_from`: `run`
    or `eval`). NULL in the items of an older eval."""
    db.execute("ALTER TABLE eval_items ADD COLUMN confidence REAL")
    db.execute("ALTER TABLE eval_items ADD COLUMN confidence_basis TEXT")
    db.execute("ALTER TABLE eval_items ADD COLUMN confidence_from TEXT")


def m012_imported_runs(db: sqlite3.Connection) -> None:
    """`imported_from` names the file `panel history import` brought a run from: a run made
    elsewhere, whose panel (the commands it starts, the hosts it sends keys to) nobody here
    has read, so resuming it asks first."""
    db.execute("ALTER TABLE runs ADD COLUMN imported_from TEXT")


MIGRATIONS: list[Migration] = [
    m001_initial,
    m002_call_detail_and_truncation,
    m003_decisions_and_retallies,
    m004_texts_iso_times_and_search,
    m005_batch_ids,
    m006_tool_calls,
    m007_follow_ups,
    m008_evals,
    m009_resume_links_and_claims,
    m010_late_calls,
    m011_eval_item_confidence,
    m012_imported_runs,
]


def schema_version(db: sqlite3.Connection) -> int:
    return db.execute("PRAGMA user_version").fetchone()[0]


def migrate(db: sqlite3.Connection) -> None:
    """Apply the migrations this file has not had yet, each with its new version in one
    transaction. `BEGIN IMMEDIATE` takes the write lock before reading the version again,
    so two panels opening the same new file at once cannot both run a migration.
    The connection must be in autocommit mode (`isolation_level=None`)."""
    while schema_version(db) < SCHEMA_VERSION:
        db.execute("BEGIN IMMEDIATE")
        try:
            version = schema_version(db)
            if version < SCHEMA_VERSION:
                MIGRATIONS[version](db)
                db.execute(f"PRAGMA user_version = {version + 1}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
