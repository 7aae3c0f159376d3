"""The arithmetic of a valid orchestrate plan (no cycle, every dependency known): depths, the
tree the view draws, the critical path and a wave scheduler's time.

Pure functions with no I/O and no imports beyond the standard library, so the views that draw
a stored plan (`panel history show`) load nothing else; the tests check them by hand, and the
benchmark measures a run against `critical_path`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def depths(depends: Mapping[str, Sequence[str]]) -> dict[str, int]:
    """How many subtasks stand on the longest chain before each one (0: it starts at once)."""
    found: dict[str, int] = {}

    def depth(node: str) -> int:
        if node not in found:
            found[node] = 1 + max((depth(dep) for dep in depends[node]), default=-1)
        return found[node]

    for node in depends:
        depth(node)
    return found


def tree_parents(depends: Mapping[str, Sequence[str]]) -> dict[str, str | None]:
    """Where each subtask hangs when the graph is drawn as a tree: under its deepest
    dependency (the first such one it lists), so its indent is its depth; None for a root.
    Its other dependencies are listed on its row."""
    depth = depths(depends)
    return {node: max(deps, key=lambda dep: depth[dep]) if (deps := list(depends[node])) else None for node in depends}


def tree_order(depends: Mapping[str, Sequence[str]]) -> list[tuple[str, tuple[bool, ...]]]:
    """The subtasks in the order a tree of them is drawn (`tree_parents`): each root, then its
    subtree, children in plan order (`depends` is). With each, whether it and each ancestor is
    the last of its siblings, root first: its depth is one less than their number, and they
    are what its branch lines need. A stored plan is drawn whatever it holds (`drawable`)."""
    depends = drawable(depends)
    parents = tree_parents(depends)
    children: dict[str | None, list[str]] = {}
    for node in depends:
        children.setdefault(parents[node], []).append(node)
    order: list[tuple[str, tuple[bool, ...]]] = []

    def walk(node: str | None, lasts: tuple[bool, ...]) -> None:
        kids = children.get(node, [])
        for index, kid in enumerate(kids):
            place = (*lasts, index == len(kids) - 1)
            order.append((kid, place))
            walk(kid, place)

    walk(None, ())
    return order


def drawable(depends: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """A plan as a tree can draw it: dependencies on no subtask of the plan dropped, and each
    dependency that would close a cycle too. The engine only runs valid plans; a stored one
    (imported from another file, say) may hold anything, and is drawn all the same."""
    kept: dict[str, list[str]] = {node: [] for node in depends}
    state: dict[str, str] = {}

    def visit(node: str) -> None:
        state[node] = "open"
        for dep in depends[node]:
            if dep not in depends or state.get(dep) == "open" or dep in kept[node]:
                continue
            if dep not in state:
                visit(dep)
            kept[node].append(dep)
        state[node] = "done"

    for node in depends:
        if node not in state:
            visit(node)
    return kept


def critical_path(depends: Mapping[str, Sequence[str]], seconds: Mapping[str, float]) -> float:
    """The least time a plan can take when every subtask starts as soon as its dependencies
    end: the longest chain of durations."""
    finish: dict[str, float] = {}

    def end(node: str) -> float:
        if node not in finish:
            finish[node] = max((end(dep) for dep in depends[node]), default=0.0) + seconds[node]
        return finish[node]

    return max((end(node) for node in depends), default=0.0)


def wave_time(depends: Mapping[str, Sequence[str]], seconds: Mapping[str, float]) -> float:
    """The time a wave scheduler takes (seed 003's): it starts every subtask whose
    dependencies are done, then waits for the whole wave before starting the next."""
    done: set[str] = set()
    total = 0.0
    while len(done) < len(depends):
        wave = [node for node in depends if node not in done and all(dep in done for dep in depends[node])]
        total += max(seconds[node] for node in wave)
        done.update(wave)
    return total
