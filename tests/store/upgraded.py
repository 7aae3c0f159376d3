"""Every row of a transcript file, as plain JSON data, to compare what a migration produced
with what it produced when it shipped (`fixtures/schema3-upgraded.json.gz`, see the README)."""

from __future__ import annotations

import sqlite3
from typing import Any

# Each table of the current schema and the columns its rows are sorted by.
ORDER = {
    "texts": "id",
    "runs": "id",
    "events": "run_id, seq",
    "calls": "run_id, id",
    "decisions": "run_id",
    "retallies": "id",
    "tool_calls": "run_id, seq",
}


def dump(db: sqlite3.Connection) -> dict[str, Any]:
    """The schema version, the schema's SQL, every row of every table (blobs as hex), and the
    full-text index as its terms: which text holds which word where."""
    schema = db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name").fetchall()
    tables: dict[str, Any] = {}
    for table, order in ORDER.items():
        cursor = db.execute(f"SELECT * FROM {table} ORDER BY {order}")
        names = [column[0] for column in cursor.description]
        tables[table] = [names, *([cell.hex() if isinstance(cell, bytes) else cell for cell in row] for row in cursor)]
    db.execute("CREATE VIRTUAL TABLE temp.search_terms USING fts5vocab(main, text_search, instance)")
    try:
        terms = db.execute("SELECT term, doc, col, offset FROM temp.search_terms ORDER BY doc, offset").fetchall()
    finally:
        db.execute("DROP TABLE temp.search_terms")
    return {
        "user_version": db.execute("PRAGMA user_version").fetchone()[0],
        "schema": [list(row) for row in schema],
        "tables": tables,
        "search": [list(row) for row in terms],
    }
