"""The reference in docs/ checked against the code it describes, so the two cannot drift: the
exit codes, the fields of every result, the store's tables and columns, the query that
reassembles a text kept as parts, and every link and citation into the docs."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from pathlib import Path

import pytest
from pydantic import BaseModel

from panel_cli.exit_status import ExitStatus
from panel_cli.protocols.confer.engine import ConferResult
from panel_cli.protocols.council.engine import CouncilResult
from panel_cli.protocols.delphi.engine import DelphiResult
from panel_cli.protocols.ensemble.engine import EnsembleResult
from panel_cli.protocols.orchestrate.engine import OrchestrateResult
from panel_cli.protocols.supervise.engine import SuperviseResult
from panel_cli.protocols.vote.engine import DecideResult
from panel_cli.runs.outcome import RunEnvelope
from panel_cli.store.migrations import migrate
from panel_cli.store.texts import TextCache
from tests.store.protocol_runs import stored_run

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
STORE_TABLES = (
    "runs",
    "events",
    "calls",
    "texts",
    "tool_calls",
    "decisions",
    "retallies",
    "evals",
    "eval_questions",
    "eval_items",
    "eval_judge_calls",
)


def section(text: str, heading: str) -> str:
    """The text under a Markdown heading, up to the next heading of the same or a higher level."""
    level = heading.split(" ")[0]
    start = text.index(f"\n{heading}\n") + len(heading) + 2
    following = re.search(rf"\n#{{1,{len(level)}}} ", text[start:])
    return text[start : start + following.start()] if following else text[start:]


def documented_names(text: str) -> list[str]:
    """The names in the first cell of each table row (`| `a`, `b` | …`), in order."""
    names: list[str] = []
    for row in re.findall(r"^\| ([^|]*) \|", text, re.MULTILINE):
        names += re.findall(r"`([^`]+)`", row)
    return names


def test_exit_codes_doc_lists_exactly_the_exit_statuses() -> None:
    rows = re.findall(r"^\| (\d+) \| `(\w+)` \|", (DOCS / "exit-codes.md").read_text(), re.MULTILINE)
    assert [(name, int(code)) for code, name in rows] == [(status.name, status.value) for status in ExitStatus]


def test_signals_exit_as_shells_report_them() -> None:
    assert ExitStatus.for_signal(2) is ExitStatus.SIGINT == 130
    assert ExitStatus.for_signal(15) is ExitStatus.SIGTERM == 143


def test_no_file_cites_the_team_spec() -> None:
    """The spec the team works from is not shipped; code and tests cite docs/ or the README."""
    citing = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("panel_cli", "tests", "bench")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path != Path(__file__).resolve()
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if re.search(r"\bSPEC\b", line)
    ]
    assert citing == []


def test_the_envelope_doc_lists_every_field_in_order() -> None:
    table = section((DOCS / "result.md").read_text(), "## The envelope")
    assert documented_names(table) == [*RunEnvelope.model_fields, "failure_reason"]


@pytest.mark.parametrize(
    ("heading", "result"),
    [
        ("## confer", ConferResult),
        ("## council", CouncilResult),
        ("## ensemble", EnsembleResult),
        ("## vote and decide", DecideResult),
        ("## delphi", DelphiResult),
        ("## supervise", SuperviseResult),
        ("## orchestrate", OrchestrateResult),
    ],
)
def test_each_protocol_doc_lists_its_own_fields(heading: str, result: type[BaseModel]) -> None:
    """Every field of the result beyond the envelope's is documented, and nothing else is
    (`rounds[].votes` describes a nested field and is not counted)."""
    names = documented_names(section((DOCS / "result.md").read_text(), heading))
    top_level = {name for name in names if not re.search(r"[\[.]", name)}
    assert top_level == set(result.model_fields) - {"final_answer", "failure_reason"}


def fresh_store() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:", isolation_level=None)
    migrate(db)
    return db


@pytest.mark.parametrize("table", STORE_TABLES)
def test_store_doc_lists_every_column_of_each_table(table: str) -> None:
    columns = [row[1] for row in fresh_store().execute(f"PRAGMA table_info({table})")]
    documented = documented_names(section((DOCS / "store.md").read_text(), f"### {table}"))
    assert set(documented) == set(columns)


def test_store_doc_names_every_table_view_and_index() -> None:
    text = (DOCS / "store.md").read_text()
    names = [
        name
        for (name,) in fresh_store().execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view', 'index')")
        if not name.startswith(("sqlite_", "text_search_"))
    ]
    assert {name for name in names if f"`{name}`" not in text} == set()
    views = section(text, "## Views")
    for view in ("run_texts", "call_texts"):
        columns = [row[1] for row in fresh_store().execute(f"PRAGMA table_info({view})")]
        assert [column for column in columns if f"`{column}`" not in views] == []


def reassembly_query() -> str:
    blocks = re.findall(r"```sql\n(.*?)```", (DOCS / "store.md").read_text(), re.DOTALL)
    return next(block for block in blocks if "WITH RECURSIVE" in block)


def test_the_documented_query_reassembles_every_text_a_run_stores(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    asyncio.run(stored_run(path, "docsconfer01", "confer"))
    asyncio.run(stored_run(path, "docssupervis", "supervise"))
    db = sqlite3.connect(path)
    ids = [text_id for (text_id,) in db.execute("SELECT id FROM texts")]
    composed = db.execute("SELECT count(*) FROM texts WHERE parts IS NOT NULL").fetchone()[0]
    texts = TextCache(db)
    query = reassembly_query()
    assert composed > 0
    assert [text_id for text_id in ids if db.execute(query, {"id": text_id}).fetchone()[0] != texts.get(text_id)] == []


def test_the_documented_query_follows_parts_of_parts() -> None:
    """Slices of texts that are themselves parts, and whole texts inside slices, at any depth."""
    db = fresh_store()
    rows = [
        (1, "abcdef", None),
        (2, None, ["X", [1], "Y"]),
        (3, None, [[2, 1, 4], "Z"]),
        (4, None, [[3], [2, 0, 2], ""]),
        (5, None, [[4, 2, 5], [1, 5, 1]]),
        (6, "", None),
    ]
    for text_id, body, parts in rows:
        db.execute(
            "INSERT INTO texts (id, hash, body, parts) VALUES (?, ?, ?, ?)",
            (text_id, bytes([text_id]), body, None if parts is None else json.dumps(parts)),
        )
    query = reassembly_query()
    assert [db.execute(query, {"id": text_id}).fetchone()[0] for text_id, _, _ in rows] == [
        "abcdef",
        "XabcdefY",
        "abcdZ",
        "abcdZXa",
        "cdZXaf",
        "",
    ]
    texts = TextCache(db)
    assert [texts.get(text_id) for text_id, _, _ in rows] == ["abcdef", "XabcdefY", "abcdZ", "abcdZXa", "cdZXaf", ""]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.DOTALL)
    return {slug(heading) for heading in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}


def test_every_link_between_the_readme_and_the_docs_resolves() -> None:
    broken = []
    for page in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            file, _, anchor = target.partition("#")
            linked = (page.parent / file).resolve() if file else page
            if not linked.exists() or (anchor and anchor not in anchors(linked)):
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []


def test_every_citation_of_the_docs_in_code_resolves() -> None:
    """A docstring or comment cites a page as `(docs/protocols.md#confer)`."""
    broken = []
    for folder in ("panel_cli", "tests", "bench"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for file, anchor in re.findall(r"\(((?:docs/[\w-]+|README)\.md)(?:#([\w-]+))?", path.read_text()):
                cited = ROOT / file
                if not cited.exists() or (anchor and anchor not in anchors(cited)):
                    broken.append(f"{path.relative_to(ROOT)}: {file}#{anchor}")
    assert broken == []
