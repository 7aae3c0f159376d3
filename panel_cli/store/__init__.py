"""The transcript store: one SQLite file that holds every run.

What the rest of panel uses of it, and all it may use (`tests/store/test_surface.py` checks):

- Writing a run: `subscriber.TranscriptStore`. `await TranscriptStore.open(path,
  secret_names=...)`, subscribe it to the run's EventBus, `await store.close()` (or `async
  with`). Everything it was given is on disk once `close` returns, or `close` raises
  `subscriber.StoreFailure` saying which runs are not kept whole (the runs themselves went
  on). A run's start, each of its stages and its end are on disk when the bus hands them on;
  a run killed outright keeps what was committed before. How events reach the file (today
  aiosqlite's thread, a transaction for all the events queued meanwhile) is the store's
  business, free to change.
- Reading: `reader.TranscriptReader.open(path)`, a context manager: runs, a run's calls,
  events, recounts and thread, decisions, a batch's runs, totals. It returns the dataclasses
  of `records` (and the models of `stats`), which say what each field means; a row it cannot
  read is `damaged`, never an exception.
- Changing what is stored outside a run: `maintenance.record_retally`, `delete_run`,
  `purge_runs` (and `refuse_running`, to refuse before asking); `merge.import_runs`.
- Claims: `claims.take_claims(path, [(kind, target)], force=...)` before resuming a run or
  running a batch, all or none, under the write lock; `Claim.release` (or `release_claims`)
  when the work is over.
  A claim whose process is gone is taken over; `ClaimHeld` (a UserError) names the holder.
- Evals (`panel eval`): `evals.EvalWriter` keeps one as it runs (`open(path, eval_id)`, then
  `begin`, `item`, `update`, `end`), `evals.EvalReader` reads them back (`list_evals`, `get`),
  as plain values (`EvalRow`, `StoredEval`) that `panel_cli.eval` validates into its models.
- Where the file is: `paths.resolve_db_path` and `paths.default_db_path`.
- `times.epoch`, for shell completion, which reads the `run_texts` view itself to stay fast.
  (The keys of a run's config the store reads are `panel_cli.run_keys`'s.)

Inside, a module a job: `connection` opens a file (for writing: created, WAL, busy timeout,
brought forward, on an aiosqlite connection's thread; for reading: read-only, never migrated)
and words SQLite's refusals; `subscriber` queues a run's events and decides when they reach
the file; `migrations` is the schema and its stated version; `upgrade` and `upgrade_texts`
are the frozen code migration 4 copies a version 3 file's runs with; `writer` turns events
into rows; `rows` says which fields an event leaves to the row that holds them; `texts`
keeps each text once; `times` and `processes` are how times and the writing process are kept.

Nothing is imported here: `panel history` loads only the modules it reads with.
"""
