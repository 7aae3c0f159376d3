"""What RunStarted's config holds beside the panel's own fields.

The run core writes them once (`panel_cli.runs.execute.run_config`); the store, resume and
follow-ups read them. A module of its own, with no imports, so the store reads them without
loading the event models.
"""

# The run's fence tag: a resumed run fences quoted texts with it again, so its prompts repeat.
FENCE_TAG_KEY = "fence_tag"
# The run a resumed run continues.
RESUMED_FROM_KEY = "resumed_from"
# The run a follow-up (`--continue`) continues; also the `runs.parent_id` column.
PARENT_ID_KEY = "parent_id"
# Short strings a batch or an eval tags its runs with; the batch id (BATCH_TAG) is also the
# `runs.batch_id` column.
TAGS_KEY = "tags"
BATCH_TAG = "batch"
# The outcome a gated run (`--gate`) waits for: a resumed run judges its result against it too.
GATE_KEY = "gate"
RUN_KEYS = frozenset({FENCE_TAG_KEY, RESUMED_FROM_KEY, PARENT_ID_KEY, TAGS_KEY, GATE_KEY})
