"""Shipped migrations are frozen: the schema-3 fixture upgrades to exactly the rows it upgraded
to when migration 4 shipped (`fixtures/schema3-upgraded.json.gz`, see the README), whatever the
writer does today."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from panel_cli.store.db import TranscriptReader, connect
from tests.store.upgraded import dump

FIXTURES = Path(__file__).parent / "fixtures"


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
