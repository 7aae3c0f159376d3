"""Nothing outside `panel_cli.store` reaches past its interface (listed in its docstring):
the writer's thread and transactions, the connection, the text store and the migrations stay
the store's own, free to change."""

from __future__ import annotations

import ast
from pathlib import Path

import panel_cli
import panel_cli.store

PACKAGE = Path(panel_cli.__file__).parent
STORE = Path(panel_cli.store.__file__).parent

# Module -> the names other code may import from it (None: any of its names).
SURFACE: dict[str, frozenset[str] | None] = {
    "panel_cli.store.subscriber": frozenset({"TranscriptStore", "StoreFailure"}),
    "panel_cli.store.reader": frozenset({"TranscriptReader"}),
    "panel_cli.store.records": None,
    "panel_cli.store.stats": None,
    "panel_cli.store.maintenance": frozenset({"record_retally", "delete_run", "purge_runs", "refuse_running"}),
    "panel_cli.store.merge": frozenset({"import_runs"}),
    "panel_cli.store.claims": frozenset({"take_claims", "release_claims", "Claim", "ClaimHeld"}),
    "panel_cli.store.paths": frozenset({"resolve_db_path", "default_db_path"}),
    "panel_cli.store.times": frozenset({"epoch"}),
    "panel_cli.store.evals": frozenset({"EvalWriter", "EvalReader", "EvalRow", "StoredEval"}),
}


def store_imports(path: Path) -> list[tuple[str, str | None]]:
    """(module, name) for each import of the store in a file; name None for `import module`."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("panel_cli.store"):
            found += [(node.module or "", alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names if alias.name.startswith("panel_cli.store")]
    return found


def test_code_outside_the_store_imports_only_its_interface() -> None:
    outside = [path for path in PACKAGE.rglob("*.py") if STORE not in path.parents]
    assert outside
    reaching = []
    for path in outside:
        for module, name in store_imports(path):
            allowed = SURFACE.get(module, frozenset())
            if name is None or (allowed is not None and name not in allowed):
                reaching.append(f"{path.relative_to(PACKAGE)}: {module}.{name}")
    assert reaching == []


def test_the_surface_names_what_its_modules_define() -> None:
    """A name dropped from the store cannot linger in the list."""
    for module, names in SURFACE.items():
        source = (STORE / f"{module.rsplit('.', 1)[1]}.py").read_text(encoding="utf-8")
        defined = {
            target.id if isinstance(target, ast.Name) else getattr(target, "name", "")
            for node in ast.parse(source).body
            for target in (node.targets if isinstance(node, ast.Assign) else [node])
        }
        assert (names or frozenset()) <= defined, module
