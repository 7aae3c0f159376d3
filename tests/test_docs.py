"""The reference in docs/ checked against the code it describes, so the two cannot drift: the
exit codes, the fields of every result, the store's tables and columns, the query that
reassembles a text kept as parts, every link and citation into the docs, and every result and
shell example, run."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import sqlite3
from pathlib import Path

import pytest
from pydantic import BaseModel

from panel_cli.errors import PanelError
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
from tests.helpers import cli
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


# -- the examples in the docs, run -----------------------------------------------------------------
#
# An example written by hand drifts: a field added, a value that became a number, an exit code that
# changed. Every result example in docs/result.md is checked against the real result of the
# command it names (its keys, in order, and the type of each value), and every shell example in
# docs/exit-codes.md is run and its exit code and `panel:` lines checked.

JSON_BLOCK = re.compile(r"```json\n(.*?)```", re.DOTALL)
COMMAND = re.compile(r"`(panel [^`]+ --json)`")


def json_examples() -> list[tuple[str, str, str]]:
    """(command, the JSON shown, the paragraph before it) for each example that names its command."""
    text = (DOCS / "result.md").read_text()
    found = []
    for match in JSON_BLOCK.finditer(text):
        before = text[: match.start()].rstrip().rsplit("\n\n", 1)[-1]
        named = COMMAND.findall(before)
        if named:
            found.append((named[-1], match.group(1), before))
    return found


def test_every_result_example_names_its_command() -> None:
    """Every JSON block but the batch's (checked against its models below) says which command printed it."""
    blocks = JSON_BLOCK.findall((DOCS / "result.md").read_text())
    assert len(json_examples()) == len(blocks) - 2


def shape_problems(shown: object, real: object, where: str = "") -> list[str]:
    """How an example differs in shape from the real value: a key missing, added or out of
    order, a value of another type (a number is a number, int or float). Examples are
    shortened, so a list shown may hold fewer entries than the real one, never more."""
    if isinstance(shown, dict):
        if not isinstance(real, dict):
            return [f"{where or 'the result'}: an object in the example, {type(real).__name__} in the run"]
        if list(shown) != list(real):
            return [f"{where or 'the result'}: keys {list(shown)} in the example, {list(real)} in the run"]
        return [problem for key in shown for problem in shape_problems(shown[key], real[key], f"{where}.{key}")]
    if isinstance(shown, list):
        if not isinstance(real, list) or len(shown) > len(real):
            return [f"{where}: a list of {len(shown)} in the example, {real!r:.60} in the run"]
        return [problem for i, item in enumerate(shown) for problem in shape_problems(item, real[i], f"{where}[{i}]")]
    if kind(shown) != kind(real):
        return [f"{where}: {kind(shown)} in the example, {kind(real)} in the run"]
    return []


def kind(value: object) -> str:
    if value is None or isinstance(value, bool | str):
        return type(value).__name__
    return "number" if isinstance(value, int | float) else type(value).__name__


def part_shown(shown: dict, real: dict, before: str) -> dict:
    """The part of the real result an example shows: the envelope (it starts at `run_id` and
    ends at `failure_reason`), the protocol's own fields (it starts at `failure_reason`), the
    fields it says it picks ("only the fields …"), or all of it."""
    keys = list(real)
    if list(shown)[0] == "run_id" and "failure_reason" in real and "winner" not in shown:
        return {key: real[key] for key in keys[: keys.index("failure_reason") + 1]}
    if list(shown)[0] == "failure_reason":
        return {key: real[key] for key in keys[keys.index("failure_reason") :]}
    if "only the fields" in before:
        return {key: real[key] for key in keys if key in shown}
    return real


@pytest.fixture
def at_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("PANEL_DB", str(tmp_path / "docs.db"))
    return tmp_path


@pytest.mark.parametrize(("command", "shown", "before"), json_examples(), ids=[c for c, _, _ in json_examples()])
def test_each_result_example_has_the_shape_of_its_commands_result(command, shown, before, at_root) -> None:
    outcome = cli(*shlex.split(command)[1:])
    assert outcome.exit_code in (0, 1, 3), outcome.output
    real = json.loads(outcome.stdout)
    example = json.loads(shown)
    assert shape_problems(example, part_shown(example, real, before)) == []


def test_the_batch_examples_have_the_fields_of_the_batch_models() -> None:
    from panel_cli.batch.runner import BatchLine, BatchSummary

    lines, summary = JSON_BLOCK.findall(section((DOCS / "result.md").read_text(), "## `panel batch`"))
    for line in lines.splitlines():
        assert list(json.loads(line)) == list(BatchLine.model_fields)
    assert list(json.loads(summary)) == list(BatchSummary.model_fields)


# docs/exit-codes.md: `$ panel …; echo $?`, what it printed, then the code.
CONSOLE_BLOCK = re.compile(r"```console\n(.*?)```", re.DOTALL)
# A run id, a date and a time: different in every run.
VOLATILE = re.compile(r"\b[0-9a-f]{12}\b|\d{4}-\d\d-\d\d \d\d:\d\d")
# What the examples read: a panel file with a mistake on line 4 (`temprature`).
BAD_PANEL = "members:\n  - name: a\n    model: demo/sage\n    temprature: 0.2\n"


def shell_examples() -> list[tuple[str, list[str], int]]:
    """(the command, what it printed, its exit code) for each `$ …; echo $?` example."""
    found = []
    for block in CONSOLE_BLOCK.findall((DOCS / "exit-codes.md").read_text()):
        for example in re.split(r"^\$ ", block, flags=re.MULTILINE)[1:]:
            command, *printed, code = example.rstrip("\n").split("\n")
            assert command.endswith("; echo $?"), command
            found.append((command.removesuffix("; echo $?"), printed, int(code)))
    return found


def test_the_shell_examples_are_found() -> None:
    assert len(shell_examples()) >= 10


@pytest.mark.parametrize(("command", "printed", "code"), shell_examples(), ids=[c for c, _, _ in shell_examples()])
def test_each_shell_example_exits_as_shown_and_says_what_it_shows(command, printed, code, at_root) -> None:
    """Run in a folder holding the demo panels (`configs/`) and the mistaken `bad.yaml`; a run id
    an example names is the id of a demo run made first."""
    monkeypatch = pytest.MonkeyPatch()
    (at_root / "configs").symlink_to(ROOT / "configs")
    (at_root / "bad.yaml").write_text(BAD_PANEL)
    monkeypatch.chdir(at_root)
    try:
        words = shlex.split(command)
        if any(re.fullmatch(r"[0-9a-f]{12}", word) for word in words):
            made = cli("confer", "configs/demo.yaml", "--json")
            ran = json.loads(made.stdout)["run_id"]
            words = [ran if re.fullmatch(r"[0-9a-f]{12}", word) else word for word in words]
        stdin = "" if "<" in words else None
        words = [
            word for index, word in enumerate(words) if word not in ("<", ">") and words[index - 1] not in ("<", ">")
        ]
        outcome = cli(*words[1:], input=stdin)
    finally:
        monkeypatch.undo()
    # In process, `panel: …` and exit 2 are the error `main` would print and exit with.
    error = outcome.exception if isinstance(outcome.exception, PanelError) else None
    assert (error.exit_code if error else outcome.exit_code) == code, outcome.output
    said = VOLATILE.sub("ID", outcome.output + (error.message if error else ""))
    for line in printed:
        if line.startswith(("panel: ", "Error: ")):
            assert VOLATILE.sub("ID", line.partition(": ")[2]) in said, line
