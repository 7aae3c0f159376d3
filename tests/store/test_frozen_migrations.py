"""Shipped migrations are frozen: they import nothing of the live store, the schema version
is stated rather than counted, and the schema-3 fixture upgrades to exactly the rows it
upgraded to when migration 4 shipped (`fixtures/schema3-upgraded.json.gz`, see the README),
whatever the writer does today."""

from __future__ import annotations

import ast
import gzip
import json
import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any

import panel_cli.store
from panel_cli.store.connection import connect
from panel_cli.store.migrations import MIGRATIONS, SCHEMA_VERSION, TEXTS_VERSION
from panel_cli.store.reader import TranscriptReader
from tests.store.upgraded import dump

FIXTURES = Path(__file__).parent / "fixtures"
STORE = Path(panel_cli.store.__file__).parent
# The migrations and the code of version 4 that migration 4 copies old runs with.
FROZEN = ("migrations", "upgrade", "upgrade_texts")


def test_the_stated_schema_version_is_the_number_of_the_last_migration() -> None:
    """A migration added without raising SCHEMA_VERSION (or the other way round) fails here."""
    numbers = [int(migration.__name__[1:4]) for migration in MIGRATIONS]
    assert numbers == list(range(1, len(MIGRATIONS) + 1))
    assert numbers[-1] == SCHEMA_VERSION


def test_the_texts_version_is_the_migration_that_moved_texts() -> None:
    assert MIGRATIONS[TEXTS_VERSION - 1].__name__ == "m004_texts_iso_times_and_search"


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at the top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_the_frozen_migrations_import_nothing_of_the_live_store() -> None:
    allowed = {f"panel_cli.store.{name}" for name in FROZEN}
    for name in FROZEN:
        imported = imported_modules(STORE / f"{name}.py")
        ours = {module for module in imported if module.split(".")[0] not in sys.stdlib_module_names}
        assert ours <= allowed, name


def expected() -> dict[str, Any]:
    with gzip.open(FIXTURES / "schema3-upgraded.json.gz", "rt", encoding="utf-8") as file:
        return json.load(file)


def fixture_copy(tmp_path: Path) -> Path:
    path = tmp_path / "schema3.db"
    shutil.copy(FIXTURES / "schema3.db", path)
    return path


def assert_same(found: dict[str, Any], wanted: dict[str, Any]) -> None:
    """Table by table, so a difference names the table it is in."""
    assert found["user_version"] == wanted["user_version"]
    assert found["schema"] == wanted["schema"]
    for table, rows in wanted["tables"].items():
        assert found["tables"][table] == rows, table
    assert found["search"] == wanted["search"]


def test_the_writer_upgrades_the_schema_3_fixture_to_exactly_the_rows_it_always_has(tmp_path: Path) -> None:
    path = fixture_copy(tmp_path)
    connect(path).close()
    with sqlite3.connect(path) as db:
        found = dump(db)
    db.close()
    assert_same(found, expected())


def test_the_reader_brings_the_schema_3_fixture_forward_to_the_same_rows(tmp_path: Path) -> None:
    path = fixture_copy(tmp_path)
    with TranscriptReader.open(path) as reader:
        found = dump(reader.connection)
    assert_same(found, expected())
