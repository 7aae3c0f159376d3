"""Data flows one way: config -> run core -> engine -> events -> (view, store). Every module of
panel_cli stands on a floor; it imports from its own floor and the floors below it, never from
one above, and no imports close a circle.

The floors, bottom to top (`FLOORS`; a module is on the floor of the longest name that holds it):

 1. Leaves, which import nothing of panel's but one another: `errors` and `exit_status`,
    `untrusted`, `redact`, `wording`, `tasks`, `run_keys`, `located_yaml` (the defensive YAML
    reader), `local_files` and `thresholds` (supermajority's one range); and two modules of packages higher up that are leaves all the
    same: `protocols.registry` (each protocol's name and spec, its heavy parts named by import
    path), which the panel model checks a file's `protocol:` against and the demo route asks
    who answers a kind of request, and `llm.brief` (what a
    request asks, in fields), which engines fill and simulated members read.
 2. `models`: the names a panel may give a model (aliases, litellm's catalog read from its
    files, routes, the demo personas and oracle names).
 3. `simulation`: the simulated voters (an oracle's belief, herding, persuasion, noisy
    confidence), played from a brief; the demo route (`llm`) and eval's theory both import them.
 4. `config` (panel YAML -> pydantic models) and `weights_file`, the weights a panel may name.
 5. `events`, and `totals` counted from them.
 6. `store`: fed events, it runs nothing.
 7. `llm`: the gateway, budget, streaming, the tool loop (it asks a `Toolbox`, a protocol, for
    each tool call), the demo route and its personas' replies.
 8. `tools`: members' MCP tool servers (a `Toolbox`), attachments, the tools a panel offers.
 9. `protocols`: the engines, their pure rules beside them (plans, ballots, tallies, rankings)
    and the checks of a panel.
10. `estimate`: a run's calls, tokens and cost, from the protocols' plans.
11. `eval`: datasets, grading, scores and theory (all but `eval.runner`).
12. `view`: Rich and plain views, history, and an eval's table (`view.eval`).
13. `runs`: the run core.
14. `batch` and `eval.runner`: many runs at once; `api`, the Python API, a caller of the run
    core as a server is.
15. `export`: Markdown, JSON and HTML, of a run or an eval.
16. `mcp_server`: `panel mcp`, a server of the run core, its runs read back as exports.
17. `cli` (and `__main__`), and the package's own `__init__`.

Every import counts for the floors, at the top of a module, inside a function or under
`if TYPE_CHECKING:`. For circles, an import under `if TYPE_CHECKING:` is exempt: it never runs,
so it cannot leave a module half-imported; every other one counts, top-level or inside a
function. Imports made by name at run time (`registry.resolve("module:attribute")`, how the
registry reaches engines, plans and stage views) are outside both: they are how a lower floor
names a part it never imports.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "panel_cli"

FLOORS: tuple[tuple[str, ...], ...] = (
    (
        "errors",
        "exit_status",
        "untrusted",
        "redact",
        "wording",
        "tasks",
        "run_keys",
        "located_yaml",
        "local_files",
        "thresholds",
        "protocols.registry",
        "llm.brief",
    ),
    ("models",),
    ("simulation",),
    ("config", "weights_file"),
    ("events", "totals"),
    ("store",),
    ("llm",),
    ("tools",),
    ("protocols",),
    ("estimate",),
    ("eval",),
    ("view",),
    ("runs",),
    ("batch", "eval.runner", "api"),
    ("export",),
    ("mcp_server",),
    ("cli", "__main__", "__init__"),
)

# Arrows that point up today, each with the change that removes it.
KNOWN_UPWARD: set[tuple[str, str]] = set()


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


@cache
def imports(name: str) -> tuple[tuple[str, bool], ...]:
    """Every name a module imports, absolute, each with whether it is under `if TYPE_CHECKING:`.
    `from a import b` gives `a` and `a.b` (b may be a module); relative imports are resolved."""
    path = modules()[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, bool]] = []

    def walk(nodes: list[ast.AST], typing_only: bool) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                found.extend((alias.name, typing_only) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    base = parts[: len(parts) - node.level + 1]
                    module = ".".join([*base, node.module] if node.module else base)
                else:
                    module = node.module or ""
                found.append((module, typing_only))
                found.extend((f"{module}.{alias.name}", typing_only) for alias in node.names)
            elif isinstance(node, ast.If) and is_type_checking(node):
                walk(node.body, True)
                walk(node.orelse, typing_only)
            else:
                walk(list(ast.iter_child_nodes(node)), typing_only)

    walk([ast.parse(path.read_text(encoding="utf-8"))], False)
    return tuple(found)


def module_imports(name: str, *, typing: bool) -> set[str]:
    """The panel_cli modules a module imports; with `typing` false, not those under TYPE_CHECKING only."""
    return {
        imported
        for imported, typing_only in imports(name)
        if imported in modules() and imported != name and (typing or not typing_only)
    }


def floor_of(name: str) -> int:
    """The floor a module stands on (0 is the bottom): that of the longest unit holding it."""
    relative = name.removeprefix("panel_cli").removeprefix(".") or "__init__"
    holding = [
        (len(unit), index)
        for index, units in enumerate(FLOORS)
        for unit in units
        if relative == unit or relative.startswith(unit + ".")
    ]
    if not holding:
        raise LookupError(f"{name} stands on no floor: add its package to FLOORS")
    return max(holding)[1]


def test_every_module_stands_on_a_floor_and_every_floor_names_modules() -> None:
    unplaced = []
    for name in modules():
        try:
            floor_of(name)
        except LookupError as exc:
            unplaced.append(str(exc))
    assert unplaced == []
    relative = {name.removeprefix("panel_cli").removeprefix(".") or "__init__" for name in modules()}
    named = [unit for units in FLOORS for unit in units]
    assert [unit for unit in named if not any(r == unit or r.startswith(unit + ".") for r in relative)] == []
    assert len(named) == len(set(named))


def test_no_import_reaches_a_floor_above() -> None:
    upward = sorted(
        (name, imported, floor_of(name) + 1, floor_of(imported) + 1)
        for name in modules()
        for imported in module_imports(name, typing=True)
        if floor_of(imported) > floor_of(name) and (name, imported) not in KNOWN_UPWARD
    )
    assert upward == []


def test_every_known_upward_arrow_is_still_there() -> None:
    """An exception whose import is gone is taken out of KNOWN_UPWARD, so it cannot hide a new one."""
    assert [pair for pair in KNOWN_UPWARD if pair[1] not in module_imports(pair[0], typing=True)] == []


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for after in sorted(graph[node]):
            if after not in index:
                connect(after)
                low[node] = min(low[node], low[after])
            elif after in on_stack:
                low[node] = min(low[node], index[after])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def test_no_imports_close_a_circle() -> None:
    """Top-level and lazy (inside a function) imports alike; TYPE_CHECKING-only ones are exempt."""
    assert circles({name: module_imports(name, typing=False) for name in modules()}) == []


def test_three_modules_in_a_ring_are_one_circle() -> None:
    """The circle finder itself: a ring is found whole, with what leads into it left out."""
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def offending(folder: str, forbidden: tuple[str, ...], allowed: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """The modules under `folder` that import a name under one of `forbidden` and not under one
    of `allowed` (any import)."""
    found = {}
    for name in modules():
        if not (name == f"panel_cli.{folder}" or name.startswith(f"panel_cli.{folder}.")):
            continue
        bad = sorted(
            {imported for imported, _ in imports(name) if under(imported, forbidden) and not under(imported, allowed)}
        )
        if bad:
            found[name] = bad
    return found


def under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


@pytest.mark.parametrize(
    ("folder", "forbidden"),
    [
        # Nothing below the command line imports it.
        *[
            (folder, ("panel_cli.cli",))
            for folder in ("runs", "protocols", "llm", "store", "view", "export", "batch", "eval", "estimate", "tools")
        ],
        # The run core runs engines; engines never reach up to it, nor draw or store anything.
        ("protocols", ("panel_cli.runs", "panel_cli.store", "panel_cli.view", "panel_cli.export", "rich")),
        # The gateway serves engines: it knows none of them, nor the run core, store or views; it
        # asks only the registry, a leaf, who answers a kind of request (`allowed` below). The tool
        # servers serve it through its `Toolbox` protocol, so it never reaches them either.
        (
            "llm",
            ("panel_cli.protocols", "panel_cli.runs", "panel_cli.store", "panel_cli.view", "panel_cli.tools", "rich"),
        ),
        # The store and the views are fed events; they never run anything.
        ("store", ("panel_cli.runs", "panel_cli.protocols", "panel_cli.llm", "panel_cli.view")),
        ("view", ("panel_cli.runs", "panel_cli.llm.gateway", "panel_cli.store.writer")),
        # eval measures; how a person reads a measure is a view's or an export's.
        ("eval", ("panel_cli.view", "panel_cli.export", "rich")),
        # The Python API stands on the run core and the store's reader, as a server does: never on
        # the command line or a view, whose output and exits a library caller must not get.
        ("api", ("panel_cli.cli", "panel_cli.view", "typer", "rich")),
    ],
)
def test_no_arrow_points_the_other_way(folder: str, forbidden: tuple[str, ...]) -> None:
    allowed = ("panel_cli.protocols.registry",) if folder == "llm" else ()
    assert offending(folder, forbidden, allowed) == {}


def test_outside_cli_nothing_imports_the_command_line() -> None:
    """Only `python -m panel_cli` (`__main__`) starts it."""
    found = {
        name: bad
        for folder in {name.split(".")[1] for name in modules() if "." in name}
        if folder not in ("cli", "__main__")
        for name, bad in offending(folder, ("panel_cli.cli",)).items()
    }
    assert found == {}


@pytest.mark.subprocess
def test_a_panel_with_a_weights_file_loads_no_gateway_no_engine_and_no_eval(tmp_path: Path) -> None:
    """Reading a panel file that says `weights: from FILE` reads a mapping of names to numbers:
    a fresh interpreter loads it and keeps the model gateway, every engine and eval unloaded."""
    (tmp_path / "weights.yaml").write_text("weights: {v1: 2.5, v2: 1}\n", encoding="utf-8")
    (tmp_path / "panel.yaml").write_text(
        "protocol: vote\nmethod: weighted_plurality\noptions: [a, b]\nweights: from weights.yaml\n"
        "members:\n  - {name: v1, model: demo/oracle@0.9}\n  - {name: v2, model: demo/sage}\n",
        encoding="utf-8",
    )
    code = textwrap.dedent(
        f"""
        import sys
        from panel_cli.config import load_panel
        panel = load_panel({str(tmp_path / "panel.yaml")!r})
        assert [member.weight for member in panel.members] == [2.5, 1.0], panel.members
        print("\\n".join(sorted(name for name in sys.modules if name.startswith(("panel_cli", "litellm")))))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = done.stdout.split()
    heavy = [
        name
        for name in loaded
        if name == "litellm"
        or name.startswith(("litellm.", "panel_cli.llm", "panel_cli.eval", "panel_cli.runs"))
        or name.endswith(".engine")
    ]
    assert heavy == []
